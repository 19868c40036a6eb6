"""Each tool's typed result (`ToolSpec.output`, tools/outputs.py): listed as its `outputSchema`, with
fields, and held to by every result of the suite (`MNOTE_CHECK_RESULTS`, tests/conftest.py), which
is shown here to catch a planted wrong result."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest

from mnote_mcp.kernel.port import Kernel
from mnote_mcp.tools.catalog import ALL_TOOLS
from mnote_mcp.tools.page import PAGE_GET
from mnote_mcp.tools.registry import Registry
from mnote_mcp.tools.resultcheck import CHECK_RESULTS_ENV, ResultCheck
from mnote_mcp.vocabulary.envelope import OUTPUT_SCHEMA, ToolRequest, ToolResult
from mnote_mcp.vocabulary.identity import Identity
from tests.support.helpers import MODES, connect, make_app, page_args

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", MODES)
async def test_every_tool_lists_its_results_fields(db: Path, mode: str) -> None:
    """Under `--result-form both`, in both protocol eras, through the SDK's client: each tool's
    `outputSchema` is the envelope with this tool's result in `result`, which says its fields."""
    async with connect(db, mode, result_form="both") as client:
        listing = await client.list_tools()
    listed = {tool.name: tool.output_schema for tool in listing.tools}
    assert sorted(listed) == sorted(spec.name for spec in ALL_TOOLS)
    for name, schema in listed.items():
        assert schema is not None, name
        result, null = schema["properties"]["result"]["anyOf"]
        assert null == {"type": "null"}, name
        assert result["type"] == "object" and result["properties"], name
        assert all(
            {"type", "$ref", "const", "enum"} & set(field) for field in result["properties"].values()
        ), name
        assert set(result["required"]) <= set(result["properties"]), name
        # The envelope around it is the contract's, its failure branch unchanged.
        envelope = cast(dict[str, Any], OUTPUT_SCHEMA["properties"])
        assert {key: value for key, value in schema["properties"].items() if key != "result"} == {
            key: value for key, value in envelope.items() if key != "result"
        }
        assert not _keywords(schema) & {"title", "description"}, f"{name}: pydantic's words left in"


def _keywords(schema: object) -> set[str]:
    """Every keyword used anywhere in `schema` (property names are names, not keywords)."""
    if isinstance(schema, list):
        return set().union(*map(_keywords, schema)) if schema else set()
    if not isinstance(schema, dict):
        return set()
    found = set(schema)
    for key, value in schema.items():
        named = key in ("properties", "$defs") and isinstance(value, dict)
        found |= set().union(*map(_keywords, value.values())) if named and value else _keywords(value)
    return found


def test_the_suite_checks_every_result() -> None:
    """tests/conftest.py turned the check on for this run (and every server process it starts)."""
    assert os.environ.get(CHECK_RESULTS_ENV)


async def _wrong(request: ToolRequest, kernel: Kernel) -> ToolResult:
    return ToolResult(result={"title": 5, "revision": "7", "blocks": [{"id": "b"}]}, effect="read")


async def test_a_wrong_result_is_recorded_with_its_tool_and_pointer(db: Path, tmp_path: Path) -> None:
    found = tmp_path / "violations.jsonl"
    app = make_app(db)
    try:
        app.dispatcher.result_check = ResultCheck(str(found))
        envelope = await app.dispatcher.call("mnote.page.get", page_args(), None, Identity("user_editor"))
        assert envelope["ok"] and not found.exists(), "a true result records nothing"
        app.dispatcher.registry = Registry([replace(PAGE_GET, read=_wrong, fit=None)])
        await app.dispatcher.call("mnote.page.get", page_args(), None, Identity("user_editor"))
    finally:
        await app.kernel.aclose()
    violations = [json.loads(line) for line in found.read_text(encoding="utf-8").splitlines()]
    assert {v["tool"] for v in violations} == {"mnote.page.get"}
    pointers = {v["pointer"] for v in violations}
    assert {"/result/title", "/result/revision", "/result/blocks/0"} <= pointers, violations
