"""The checks as declared: each operation of the protocol's table gets its three, a request filled in
from any operation's schema is one the schema accepts, and docs/runtime-protocol.md's table for
runtime authors names every check the kit makes (and none it does not)."""

from __future__ import annotations

import re

from mnote_mcp.conformance.checks import filled_request
from mnote_mcp.conformance.kit import plan
from mnote_mcp.conformance.seed import Scratch
from mnote_mcp.conformance.session import Session
from mnote_mcp.kernel import protocol
from mnote_mcp.kernel.limits import PageLimits
from mnote_mcp.kernel.protocol import first_error
from tests.support.helpers import ROOT


def test_every_operation_gets_its_generic_checks() -> None:
    names = [check.name for check in plan()]
    assert len(names) == len(set(names)), "check names are unique"
    for op in protocol.OPERATIONS:
        for kind in ("differential", "schema", "coverage"):
            assert f"{kind}.{op}" in names


def test_a_request_filled_in_from_each_schema_is_valid() -> None:
    session = Session(wire=None, mirror=None, scratch=Scratch("t"), limits=PageLimits())  # type: ignore[arg-type]
    for op in protocol.OPERATIONS.values():
        wire = filled_request(op.request.schema, session)
        assert first_error(op.request.validator, wire) is None, (op.name, wire)
        op.request.decode(wire)


def test_the_runtime_authors_table_names_every_check() -> None:
    text = (ROOT / "docs" / "runtime-protocol.md").read_text(encoding="utf-8")
    section = text.split("## The conformance kit", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `([a-z_]+\.[a-z_<>]+)` \|", section, flags=re.M))
    declared = {check.name for check in plan()}
    generic = {name for name in declared if name.split(".", 1)[0] in ("differential", "schema", "coverage")}
    assert listed == (declared - generic) | {"differential.<op>", "schema.<op>", "coverage.<op>"}
