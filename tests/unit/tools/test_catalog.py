"""The advertised tool surface: per-tool snapshots, contract exactness, inventory invariants and size.

Every registered tool (`catalog.ALL_TOOLS`) is covered: a snapshot each in tests/snapshots/<tool>.json
(regenerate with MNOTE_UPDATE_SNAPSHOTS=1 after a deliberate change, and review the diff; a missing
snapshot fails, and so does one of a tool no longer registered), the schema calls are checked against
holding its declared `contract_schema` exactly, the advertised one holding it but for what the lean
rules leave out (docs/decisions.md, "Lean tool definitions"), and its definition within the size budget
it declares, as the model is given it. The six tools of contract v1 are also held to the hand copy of
the contract (tests/support/contract_schemas.py), and `--strict-contract` advertises it exactly.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, cast

import pytest
from jsonschema import Draft202012Validator

from mnote_mcp.kernel.blocks import DEFAULT_MAX_BLOCK_IDS
from mnote_mcp.tools.catalog import ALL_TOOLS
from mnote_mcp.tools.permissions import Caller
from mnote_mcp.tools.registry import ID_ARRAYS
from mnote_mcp.tools.schemas import SCHEMA_FORMS, SchemaForm, without_null_branches
from mnote_mcp.tools.sizes import (
    HERMES_UTILITY_TOOLS,
    definition_bytes,
    function_definition,
    utility_tool_bytes,
)
from mnote_mcp.tools.toolsets import Toolset
from mnote_mcp.vocabulary.envelope import DEFAULT_MAX_ID_CHARS, ID_FIELDS
from tests.support.contract_schemas import CONTRACT, CORRELATION
from tests.support.helpers import MODES, ROOT, connect
from tests.support.tool_calls import TOOLS, allowed

pytestmark = pytest.mark.anyio
SNAPSHOTS = ROOT / "tests" / "snapshots"
NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
CONTRACT_KEYWORDS = (
    "anyOf",
    "type",
    "enum",
    "minLength",
    "minimum",
    "maximum",
    "additionalProperties",
    "default",
    "properties",
)
ANNOTATIONS_ONLY = {"description", "items", "examples"}


async def _tools(db: Path, mode: str = "legacy", **config: Any) -> dict[str, dict[str, Any]]:
    async with connect(db, mode, **config) as client:
        listing = await client.list_tools()
    return {
        tool.name: tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in listing.tools
    }


def _snapshot_view(tool: dict[str, Any]) -> dict[str, Any]:
    return {
        key: tool[key]
        for key in ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
    }


@pytest.mark.parametrize("mode", MODES)
async def test_every_tool_is_advertised(db: Path, mode: str) -> None:
    tools = await _tools(db, mode)
    assert list(tools) == list(TOOLS), "every registered tool, in declaration order"
    assert set(CONTRACT) <= set(tools), "the contract's six tools among them"


def test_no_snapshot_is_left_of_a_tool_no_longer_registered() -> None:
    assert {path.stem for path in SNAPSHOTS.glob("*.json")} == set(TOOLS)


@pytest.mark.parametrize("name", list(TOOLS))
async def test_tool_matches_its_snapshot(db: Path, name: str) -> None:
    tool = _snapshot_view((await _tools(db))[name])
    path = SNAPSHOTS / f"{name}.json"
    text = json.dumps(tool, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if os.environ.get("MNOTE_UPDATE_SNAPSHOTS") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no snapshot for {name}: run with MNOTE_UPDATE_SNAPSHOTS=1 and review it"
    assert json.loads(path.read_text(encoding="utf-8")) == tool, f"{name} drifted from {path.name}"


def _assert_contains_contract(
    schema: dict[str, Any], contract: dict[str, Any], where: str, *, bounded_ids: bool
) -> None:
    """`schema` states every keyword `contract` does, adding words only; where `bounded_ids`, the ids
    carry the constraint added (`maxLength`: they are echoed and stored); lists of block ids their
    `maxItems` in every schema."""
    for keyword in CONTRACT_KEYWORDS:
        if keyword not in contract:
            continue
        if keyword == "properties":
            for prop, declared in contract["properties"].items():
                assert prop in schema["properties"], f"{where}: property {prop} missing"
                added = set(schema["properties"][prop]) - set(declared)
                if prop in ID_FIELDS and "/" not in where and bounded_ids:
                    assert schema["properties"][prop].get("maxLength") == DEFAULT_MAX_ID_CHARS
                    added -= {"maxLength"}
                if prop in ID_ARRAYS and "/" not in where:  # and so are lists of block ids (advertised)
                    assert schema["properties"][prop].get("maxItems") == DEFAULT_MAX_BLOCK_IDS
                    added -= {"maxItems"}
                assert added <= ANNOTATIONS_ONLY, (
                    f"{where}/{prop}: adds constraints {added - ANNOTATIONS_ONLY}"
                )
                nested = schema["properties"][prop]
                _assert_contains_contract(nested, declared, f"{where}/{prop}", bounded_ids=bounded_ids)
        else:
            assert schema.get(keyword) == contract[keyword], f"{where}: {keyword} differs"


def _lean(contract: dict[str, Any]) -> dict[str, Any]:
    """What the advertised form states of a declared schema: a nullable value as its type (the lean
    rules; null is still accepted)."""
    return cast(dict[str, Any], without_null_branches(contract))


async def _assert_holds_exactly(db: Path, name: str, contract: dict[str, Any]) -> None:
    default = (await _tools(db))[name]["inputSchema"]
    strict = (await _tools(db, strict_contract=True))[name]["inputSchema"]
    for schema in (default, strict):
        _assert_contains_contract(schema, _lean(contract), name, bounded_ids=False)
        Draft202012Validator.check_schema(schema)
        assert "additionalProperties" not in schema, "the contract sets none at the top level"
        assert "capabilityScope" not in schema["properties"], "accepted, never advertised"
    for strict_contract in (False, True):
        accepted = TOOLS[name].accepted_schema(strict=strict_contract)
        _assert_contains_contract(accepted, contract, name, bounded_ids=True)
        assert "capabilityScope" in accepted["properties"]
    assert strict["required"] == contract["required"], "--strict-contract advertises the contract's list"
    for field in CORRELATION:
        assert strict["properties"][field] == {"type": "string"}, "advertised as the contract says"
        assert field not in default["properties"], "accepted, never advertised by default"
    assert default["required"] == [r for r in contract["required"] if r not in CORRELATION]


@pytest.mark.parametrize("name", list(CONTRACT))
async def test_input_schema_holds_the_contract_exactly(db: Path, name: str) -> None:
    """The contract's six tools, against the hand copy of the contract (the spec)."""
    await _assert_holds_exactly(db, name, CONTRACT[name])


@pytest.mark.parametrize("name", list(TOOLS))
async def test_input_schema_holds_the_declared_schema_exactly(db: Path, name: str) -> None:
    """Every tool, against the schema it declares: extensions only add words and new properties."""
    await _assert_holds_exactly(db, name, dict(TOOLS[name].contract_schema))


async def test_inventory_invariants(db: Path) -> None:
    for name, tool in (await _tools(db)).items():
        assert NAME.match(name), name
        assert tool.get("title"), f"{name} has no title"
        assert tool.get("description"), f"{name} has no description"
        annotations = tool.get("annotations", {})
        for hint in ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"):
            assert isinstance(annotations.get(hint), bool), f"{name} does not set {hint}"
        schema = tool["inputSchema"]
        assert schema["type"] == "object"
        assert not {"anyOf", "oneOf", "allOf", "not", "enum", "$ref"} & set(schema), name
        assert "$ref" not in json.dumps(schema) and "$defs" not in json.dumps(schema), name
        assert tool["outputSchema"]["type"] == "object"


async def test_only_the_reads_are_read_only(db: Path) -> None:
    """readOnlyHint on exactly the tools the declarations allow on a read-only server."""
    tools = await _tools(db)
    read_only = {name for name, tool in tools.items() if tool["annotations"]["readOnlyHint"]}
    assert read_only == allowed(Caller.READ_ONLY_SERVER)
    for name in read_only:
        assert tools[name]["annotations"]["destructiveHint"] is False, name


async def test_block_tools_write_pages_and_say_so(db: Path) -> None:
    tools = await _tools(db)
    for spec in (spec for spec in ALL_TOOLS if spec.toolset is Toolset.BLOCK):
        annotations = tools[spec.name]["annotations"]
        assert annotations["readOnlyHint"] is False and annotations["openWorldHint"] is False
    for name in ("mnote.block.insert", "mnote.block.move"):
        assert tools[name]["annotations"]["destructiveHint"] is False, f"{name} loses nothing"
    for name in ("mnote.block.update", "mnote.block.delete"):
        assert tools[name]["annotations"]["destructiveHint"] is True, f"{name} overwrites or removes"


async def test_underscore_names_advertise_one_spelling(db: Path) -> None:
    tools = await _tools(db, tool_names="underscore")
    assert set(tools) == {name.replace(".", "_") for name in TOOLS}
    assert all(re.match(r"^[A-Za-z0-9_]+$", name) for name in tools)


async def test_read_only_hides_every_write_tool(db: Path) -> None:
    assert set(await _tools(db, read_only=True)) == allowed(Caller.READ_ONLY_SERVER)
    assert not any(TOOLS[name].writes for name in allowed(Caller.READ_ONLY_SERVER))


# Per-tool budgets (`ToolSpec.budget`): each tool's definition as the model is given it (Hermes's
# function definition, `tools/sizes.py`; tests/clients/test_hermes.py holds that measure to Hermes's
# own); the README's size table is generated from the same measure. Tokens are about bytes / 4.
# 250 since issue 35: the move and delete tools say what `section: true` takes, which a model would
# not guess, and every first sentence says what the tool does in English and Chinese.
DESCRIPTION_BUDGET = 250
PROPERTY_DESCRIPTION_BUDGET = 100
# The filesystem server's 14 definitions as Hermes 0.19.0 gives them to its model with every request
# (`python -m bench.agenttasks`, server-filesystem 2026.8.31; docs/performance.md): the default
# selection, with Hermes's four utility tools, is no larger, in all and per tool (issue 35).
FILESYSTEM_BYTES, FILESYSTEM_TOOLS = 8_630, 14


@pytest.mark.parametrize("form", SCHEMA_FORMS)
@pytest.mark.parametrize("mode", MODES)
async def test_every_tool_stays_within_its_size_budget(db: Path, mode: str, form: SchemaForm) -> None:
    async with connect(db, mode, schema_form=form) as client:
        listing = await client.list_tools()
    total = 0
    for tool in listing.tools:
        spec = TOOLS[tool.name]
        served = function_definition(tool.name, tool.description or "", tool.input_schema)
        size = definition_bytes(served)
        entry = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
        assert size == spec.model_bytes(form), f"{tool.name}: the size table measures what is served"
        assert len(json.dumps(entry, separators=(",", ":"), ensure_ascii=False).encode()) == spec.entry_bytes(
            form
        )
        assert size <= spec.budget.of(form), f"{tool.name} grew to {size} bytes ({form}): over its budget"
        total += size
        assert tool.description is not None and len(tool.description) <= DESCRIPTION_BUDGET, tool.name
        for prop, schema in tool.input_schema["properties"].items():
            described = len(schema.get("description", ""))
            assert described <= PROPERTY_DESCRIPTION_BUDGET, f"{tool.name}.{prop}: description too long"
    print(f"model-visible ({form}): {len(listing.tools)} tools, {total} bytes, ~{total // 4} tokens")


async def test_the_default_definitions_weigh_no_more_than_the_filesystem_servers(db: Path) -> None:
    async with connect(db, toolsets=frozenset()) as client:  # the server's own default selection
        listing = await client.list_tools()
    served = [
        definition_bytes(function_definition(tool.name, tool.description or "", tool.input_schema))
        for tool in listing.tools
    ]
    total = sum(served) + utility_tool_bytes()
    per_tool = total / (len(served) + len(HERMES_UTILITY_TOOLS))
    assert set(CONTRACT) <= {tool.name for tool in listing.tools}, "the contract's tools are in it"
    assert total <= FILESYSTEM_BYTES, (
        f"{total} bytes with every request, the filesystem server {FILESYSTEM_BYTES}"
    )
    assert per_tool <= FILESYSTEM_BYTES / FILESYSTEM_TOOLS, per_tool


def test_the_write_schema_skeleton_is_written_once() -> None:
    """Every write tool's schema comes from tools/schemas.write_schema; no copy of its skeleton remains."""
    tools = ROOT / "mnote_mcp" / "tools"
    copies = {
        path.name: text.count('"dryRun": {"type": "boolean"}')
        + text.count('"documentId": {"type": "string"}')
        for path in tools.glob("*.py")
        if path.name != "typedschemas.py"  # generated from the types: results name their pages too
        and (text := path.read_text(encoding="utf-8"))
    }
    assert {name: n for name, n in copies.items() if n} == {"schemas.py": 2}


def test_scope_and_read_only_hint_follow_from_the_command() -> None:
    from mnote_mcp.kernel.store.commands import COMMAND_SCOPES
    from mnote_mcp.tools.catalog import ALL_TOOLS
    from mnote_mcp.vocabulary.scopes import Scope

    for spec in ALL_TOOLS:
        expected = COMMAND_SCOPES[spec.command.name] if spec.command is not None else Scope.PAGE_READ
        assert spec.scope is expected and spec.mcp_annotations().read_only_hint is (spec.command is None)
    assert set(COMMAND_SCOPES) == {spec.command.name for spec in ALL_TOOLS if spec.command is not None}
