"""Each tool's typed arguments (`ToolSpec.arguments`, tools/inputs.py) agree with the schema its calls
are checked against, so a handler reading them as the type (`inputs.arguments_of`) reads what the
check let through."""

from __future__ import annotations

from typing import Any

import pytest

from mnote_mcp.calls.mapping import ENVELOPE_FIELDS
from mnote_mcp.tools.catalog import ALL_TOOLS
from mnote_mcp.tools.page import PAGE_GET
from mnote_mcp.tools.registry import ToolSpec
from mnote_mcp.tools.typeschemas import derived_schema

# What every tool accepts besides its own arguments, and no handler reads from `args`.
_NOT_ARGUMENTS = {*ENVELOPE_FIELDS, "capabilityScope"}


def _json_types(schema: dict[str, Any]) -> set[str]:
    kind = schema.get("type", [])
    return {kind} if isinstance(kind, str) else set(kind)


@pytest.mark.parametrize("spec", ALL_TOOLS, ids=lambda spec: spec.name)
def test_the_arguments_type_holds_what_the_schema_accepts(spec: ToolSpec) -> None:
    accepted = spec.accepted_schema(strict=False)
    typed = derived_schema(spec.arguments, lean=False)
    own = {name: schema for name, schema in accepted["properties"].items() if name not in _NOT_ARGUMENTS}
    declared: dict[str, Any] = dict(typed["properties"])  # type: ignore[arg-type]
    assert set(declared) == set(own), spec.name
    for name, schema in own.items():
        types = _json_types(schema)
        assert not types or types <= _json_types(declared[name]) | {"null"}, (spec.name, name)
        if "enum" in schema:
            assert declared[name]["enum"] == schema["enum"], (spec.name, name)
    required = {name for name in accepted["required"] if name not in _NOT_ARGUMENTS}
    assert set(typed.get("required", [])) == required, spec.name  # type: ignore[arg-type]


def test_what_a_read_adds_to_the_contract_derives_from_its_type() -> None:
    """`mnote.page.get`'s own properties beyond the contract are the type's, bounds included."""
    typed: dict[str, Any] = dict(derived_schema(PAGE_GET.arguments, lean=False)["properties"])  # type: ignore[arg-type]
    for name in ("format", "blockIds", "maxBlocks", "cursor"):
        assert PAGE_GET.extensions[name] == typed[name], name
    assert PAGE_GET.extensions["maxBlocks"]["minimum"] == 1
