"""Strict hosts (issue 16 items 1-3, issue 10 item 5): schemas a strict converter takes as they are,
tools a strict model can call, and names a model can call back.

- Every advertised input schema, in both forms and both name styles: no open object (an object without
  `properties` is closed to `{}` by Hermes and refused by the OpenAI Agents SDK), every array typed,
  no `$ref`; the strict form (`--schema-form strict`) is strict already: every object closed with every
  property required, optional ones nullable, no `default` or length limits, within OpenAI's nesting
  and size limits. (The frameworks' own converters run on them in tests/clients/test_frameworks.py.)
- Every registered tool's example (tests/support/tool_calls.py) called the way a strict model must call it
  (tests/support/strict_fill.py: every optional field null, or "" / [] where the model leaves it out) does
  exactly what the plain call does, in the strict form and in the contract form: `page.get`, a placing
  tool with an anchor and a forced `position`, and `page.revert` of the writes before it included.
- Under `--tool-names underscore` no text the server sends names a dotted tool.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mcp import Client

from mnote_mcp.tools.catalog import ALL_TOOLS
from mnote_mcp.vocabulary.naming import ToolNames
from tests.support.helpers import IDS, call, connect, page_args, write_args
from tests.support.strict_fill import PLACEHOLDERS, Placeholder, fill
from tests.support.tool_calls import calls, target

pytestmark = pytest.mark.anyio

FORMS = ("contract", "strict")
STYLES = ("dotted", "underscore")
# a dotted tool name of any domain a tool is declared in
DOTTED_TOOL = re.compile(
    r"mnote\.(" + "|".join(sorted({spec.name.split(".")[1] for spec in ALL_TOOLS})) + r")\."
)
DOC_1 = target("doc_1")
OPENAI_MAX_DEPTH = 10  # nesting levels of objects in one strict schema (OpenAI's structured outputs)
OPENAI_MAX_PROPERTIES = 5000


async def _listing(db: Path, **config: Any) -> tuple[dict[str, dict[str, Any]], str]:
    async with connect(db, **config) as client:
        listing = await client.list_tools()
        instructions = client.instructions or ""
    tools = {
        tool.name: tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in listing.tools
    }
    return tools, instructions


def _nodes(schema: Any, depth: int = 0) -> list[tuple[dict[str, Any], int]]:
    """Every schema node with its depth in objects (the root object is 1)."""
    if not isinstance(schema, dict):
        return []
    depth += schema.get("type") == "object"
    found = [(schema, depth)]
    for sub in schema.get("properties", {}).values():
        found += _nodes(sub, depth)
    for key in ("items",):
        found += _nodes(schema.get(key), depth)
    for variant in schema.get("anyOf", []):
        found += _nodes(variant, depth)
    return found


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("form", FORMS)
async def test_no_open_object_untyped_array_or_ref(db: Path, form: str, style: str) -> None:
    tools, _ = await _listing(db, schema_form=form, tool_names=style)
    assert len(tools) == len(ALL_TOOLS)
    for name, tool in tools.items():
        schema = tool["inputSchema"]
        assert "$ref" not in json.dumps(schema) and "$defs" not in json.dumps(schema), name
        Draft202012Validator.check_schema(schema)
        spec = next(spec for spec in ALL_TOOLS if spec.advertised_name(style) == name)  # type: ignore[arg-type]
        said = list(spec.said_in[1]) if spec.said_in is not None else []
        for node, _ in _nodes(schema):
            if node.get("type") == "object" and not node.get("properties"):
                # the one open object: blocks said in another listed tool's definition (`said_in`),
                # whose description names it; under a decoder that closes it, a block without `type`
                # is refused by the kernel, never written in part
                parents = [schema["properties"][prop] for prop in said]
                assert any(parent.get("items") is node for parent in parents), (
                    f"{name}: an open object {node}"
                )
                assert any("mnote" in parent.get("description", "") for parent in parents), name
            if node.get("type") == "array":
                items = node.get("items")
                assert isinstance(items, dict) and ("type" in items or "anyOf" in items), f"{name}: {node}"


async def test_the_strict_form_is_strict_already(db: Path) -> None:
    tools, _ = await _listing(db, schema_form="strict")
    for name, tool in tools.items():
        schema = tool["inputSchema"]
        nodes = _nodes(schema)
        for node, _ in nodes:
            assert not {"default", "minLength", "maxLength", "oneOf", "allOf"} & set(node), (name, node)
            if node.get("type") == "object":
                assert node["additionalProperties"] is False, (name, node)
                assert node["required"] == list(node["properties"]), (name, node)
        assert "anyOf" not in schema and schema["type"] == "object"
        assert max(depth for _, depth in nodes) <= OPENAI_MAX_DEPTH, name
        assert sum(len(node.get("properties", {})) for node, _ in nodes) <= OPENAI_MAX_PROPERTIES


async def test_the_contract_form_is_the_default_and_props_are_declared(db: Path) -> None:
    default, _ = await _listing(db)
    contract, _ = await _listing(db, schema_form="contract")
    assert default == contract
    strict, _ = await _listing(db, schema_form="strict")
    for name, listing in (
        ("mnote.block.insert", default),
        ("mnote.block.update", default),
        ("mnote.page.save", strict),  # in the contract form, said once in mnote.block.insert's
    ):
        schema = json.dumps(listing[name]["inputSchema"])
        assert '"props": {"type": "object"' in schema or '"props": {"anyOf"' in schema, name
        for key in ("level", "checked", "language", "icon"):
            assert f'"{key}"' in schema, (name, key)


# -- every tool, called as a strict model must call it -------------------------------------------


def _forced(plain: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """What a strict host makes the model send besides an anchor: a `position` as well (ignored)."""
    return {"position": "end"} if "afterBlockId" in plain and "position" in schema["properties"] else {}


def _comparable(envelope: dict[str, Any]) -> Any:
    assert envelope["ok"], envelope["error"]
    return envelope["result"]


@pytest.mark.parametrize("placeholder", PLACEHOLDERS)
@pytest.mark.parametrize("form", FORMS)
async def test_every_tool_called_as_a_strict_model_must_does_what_the_plain_call_does(
    tmp_path: Path, db: Path, form: str, placeholder: Placeholder
) -> None:
    """Each tool's first example on tests/fixtures/workspace.json's doc_1, in declaration order (its
    prior write first, for real): the plain dry run, the same call as a strict host fills it, then
    that filled call for real."""
    style: ToolNames = "underscore" if form == "strict" else "dotted"
    async with connect(db, schema_form=form, tool_names=style) as client:
        schemas = {
            tool.name: tool.input_schema for tool in (await client.list_tools()).tools
        }  # as advertised
        async with connect(db, schema_form="strict", tool_names=style) as strict_client:
            strict_schemas = {
                tool.name: tool.input_schema for tool in (await strict_client.list_tools()).tools
            }
        assert set(schemas) == {spec.advertised_name(style) for spec in ALL_TOOLS}
        for spec in ALL_TOOLS:
            *before, (name, made) = calls(spec, DOC_1, "strict-plain", dry_run=True, style=style)
            for prior_name, prior_arguments in before:
                assert (await call(client, prior_name, **{**IDS, **prior_arguments}))["ok"]
            # A strict host can send only what is advertised: the correlation ids are not (they come
            # from `_meta`, the connection, or are generated).
            plain_call = {**(IDS if form == "contract" else {}), **made}
            forced = {**plain_call, **_forced(plain_call, strict_schemas[name])}
            strict_call = fill(strict_schemas[name], forced, placeholder)
            if form == "strict":
                errors = [e.message for e in Draft202012Validator(schemas[name]).iter_errors(strict_call)]
                assert not errors, (name, errors)
            expected = _comparable(await call(client, name, **plain_call))
            got = _comparable(await call(client, name, **strict_call))
            assert got == expected, (name, strict_call)
            if spec.writes:  # and the real call, filled the same way, writes
                real = {**strict_call, "dryRun": False, "idempotencyKey": f"{spec.name}-real"}
                envelope = await call(client, name, **real)
                assert envelope["ok"] and envelope["audit"]["effect"] == "write", envelope
                assert envelope["toolName"] == name


async def test_a_forced_position_beside_an_anchor_is_ignored(db: Path) -> None:
    async with connect(db) as client:
        envelope = await call(
            client,
            "mnote.block.move",
            **write_args("move", blockId="p_2", afterBlockId="heading_1", position="end"),
        )
        page = await call(client, "mnote.page.get", **page_args())
    assert envelope["ok"], envelope
    assert [block["id"] for block in page["result"]["blocks"]] == ["heading_1", "p_2", "p_1"]


async def test_a_forced_base_revision_zero_is_a_conflict_that_says_the_revision(db: Path) -> None:
    """0 is a revision a caller can have read (a page's first), so it is never taken for "not given":
    a model that sends it on a page that moved on gets the current revision to retry with."""
    async with connect(db) as client:
        revision = (await call(client, "mnote.page.get", **page_args()))["result"]["revision"]
        envelope = await call(
            client, "mnote.page.update_title", **write_args("zero", title="x", baseRevision=0)
        )
    assert revision > 0
    assert envelope["error"]["code"] == "mnote_tool_conflict"
    assert f"baseRevision={revision}" in envelope["error"]["hint"]


async def test_null_is_never_refused_for_an_optional_field(db: Path) -> None:
    """In the contract form too: a model (or a host) that sends null for a field it leaves out."""
    async with connect(db) as client:
        read = await call(
            client,
            "mnote.page.get",
            **page_args(cursor=None, blockIds=None, maxBlocks=None, format=None, capabilityScope=None),
        )
        options = await call(
            client,
            "mnote.page.update_options",
            **write_args("opts", options={"showToc": True, "smallText": None}, baseRevision=None),
        )
    assert read["ok"] and options["ok"], (read, options)
    assert options["result"]["diff"] == [{"op": "options", "showToc": True}] or options["result"]["changed"]


# -- names ------------------------------------------------------------------------------------------


async def _every_kind_of_answer(client: Client) -> list[dict[str, Any]]:
    """Successes, dry runs, and the refusals whose words name tools (conflict hints, a bad cursor)."""
    answers = [
        await call(client, "mnote_page_get", **page_args()),
        await call(client, "mnote_page_get", **page_args(cursor="garbage")),
        await call(client, "mnote_page_get", **page_args(maxBlocks=1)),
        await call(client, "mnote_page_history", **page_args(cursor="garbage")),
        await call(client, "mnote_page_update_title", **write_args("t1", title="x", baseRevision=0)),
        await call(client, "mnote_block_update", **write_args("b1", blockId="p_1", text="y", baseRevision=0)),
        await call(client, "mnote_block_update", **write_args("b2", blockId="nope", text="y")),
        await call(client, "mnote_page_revert", **write_args("r0", dry_run=True, toRevision=0)),
        await call(client, "mnote_page_revert", **write_args("r1")),  # no target: names undoRunId
        await call(client, "mnote_page_save", **write_args("s1", content=[{"type": "nope"}])),
        await call(client, "mnote_page_update_options", **write_args("o1", options={"protectEditing": True})),
        await call(client, "mnote_artifact_create_summary", **write_args("a1", summary="s")),
    ]
    return answers


async def test_underscore_naming_names_no_dotted_tool_anywhere(db: Path) -> None:
    tools, instructions = await _listing(db, tool_names="underscore")
    said = [json.dumps(tools), instructions]
    async with connect(db, tool_names="underscore") as client:
        answers = await _every_kind_of_answer(client)
    async with connect(db, tool_names="underscore", read_only=True) as client:
        answers.append(await call(client, "mnote_page_save", **write_args("ro", content=[])))
    assert {answer["toolName"] for answer in answers} <= {name.replace(".", "_") for name in tools}
    assert any(not answer["ok"] and "hint" in answer["error"] for answer in answers)
    said += [json.dumps(answer, ensure_ascii=False) for answer in answers]
    for text in said:
        assert not DOTTED_TOOL.search(text), DOTTED_TOOL.search(text)
    # the same texts name the dotted tools in the default style: the test can fail
    tools, instructions = await _listing(db)
    assert DOTTED_TOOL.search(instructions) and DOTTED_TOOL.search(json.dumps(tools))
