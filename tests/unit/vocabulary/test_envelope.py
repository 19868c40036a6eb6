"""Every response shape of the contract, through the real MCP client, in both protocol eras.

For each tool: success, dryRun, permission failure and business failure, with the contract's zh-CN
messages where the contract gives them. Failures are `isError` results, never JSON-RPC errors. The
write tools and their calls come from the registry (tests/support/tool_calls.py): every write tool is here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from mnote_mcp.kernel.errors import ErrorCode, Reason
from mnote_mcp.tools.catalog import ALL_TOOLS
from mnote_mcp.tools.examples import Example, overridden
from mnote_mcp.tools.permissions import Caller
from tests.support.helpers import IDS, MODES, call, connect, page_args, write_args
from tests.support.tool_calls import TOOLS, arguments, call_example, target

pytestmark = pytest.mark.anyio

BLOCK = [{"type": "paragraph", "text": "appended"}]
DOC_1 = target("doc_1")
WRITES = [spec.name for spec in ALL_TOOLS if spec.writes]
# The contract's words for a viewer's refusal, by the reason the tool declares for it.
CONTRACT_WORDS = {Reason.PAGE_WRITE: "无页面写权限", Reason.ARTIFACT_WRITE: "无 artifact 写权限"}
VIEWER_REFUSED = [name for name in WRITES if TOOLS[name].permissions.refusal(Caller.VIEWER) is not None]
# The writes that declare a stale-revision conflict and show it by example.
STALE = {
    spec.name: case
    for spec in ALL_TOOLS
    for case in spec.errors
    if (case.code, case.reason) == (ErrorCode.CONFLICT, Reason.REVISION) and case.example is not None
}


def command_id_prefix(command: str) -> str:
    """The contract's commandId: the command name in snake case, the trace id, then a nonce."""
    return re.sub(r"(?<=[a-z])([A-Z])", r"_\1", command).replace(".", "_").lower() + "_trace_t_"


def _assert_envelope_keys(envelope: dict[str, Any], tool: str) -> None:
    assert list(envelope) == ["ok", "toolName", "toolCallId", "traceId", "result", "audit", "error"]
    assert envelope["toolName"] == tool
    assert envelope["toolCallId"] == "call_t" and envelope["traceId"] == "trace_t"


@pytest.mark.parametrize("mode", MODES)
async def test_page_get_success(db: Path, mode: str) -> None:
    async with connect(db, mode, actor="user_viewer") as client:
        envelope = await call(client, "mnote.page.get", **page_args())
    _assert_envelope_keys(envelope, "mnote.page.get")
    assert envelope["ok"] is True and envelope["error"] is None
    result = envelope["result"]
    assert {"documentId", "workspaceId", "title", "bodySummary", "pageOptions", "blocks", "revision"} <= set(
        result
    )
    assert result["documentId"] == "doc_1" and result["workspaceId"] == "ws_1"
    assert result["title"] == "Project plan"
    assert result["pageOptions"] == {"wideLayout": True}
    assert result["blocks"][0] == {
        "id": "heading_1",
        "type": "heading",
        "text": "Chapter one",
        "props": {"level": 1},
    }
    assert result["bodySummary"].startswith("Chapter one First paragraph.")
    assert envelope["audit"] == {
        "effect": "read",
        "commandId": None,
        "workspaceId": "ws_1",
        "documentId": "doc_1",
    }


@pytest.mark.parametrize("mode", MODES)
async def test_page_get_include_flags_leave_parts_out(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        envelope = await call(
            client,
            "mnote.page.get",
            **page_args(includeBody=False, includeOptions=False, includeBlocks=False),
        )
    assert set(envelope["result"]) == {"documentId", "workspaceId", "title", "revision"}


@pytest.mark.parametrize("mode", MODES)
async def test_page_get_permission_failure(db: Path, mode: str) -> None:
    async with connect(db, mode, actor="user_viewer", locale="zh-CN") as client:
        envelope = await call(client, "mnote.page.get", **page_args("doc_secret"))
    _assert_envelope_keys(envelope, "mnote.page.get")
    assert envelope["ok"] is False and envelope["result"] is None
    assert envelope["error"]["code"] == "mnote_tool_permission_denied"
    assert envelope["error"]["message"] == "无页面读取权限"
    assert envelope["audit"] == {"effect": "none", "workspaceId": "ws_1", "documentId": "doc_secret"}


@pytest.mark.parametrize("mode", MODES)
async def test_page_get_business_failure_not_found(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        envelope = await call(client, "mnote.page.get", **page_args("doc_missing"))
    assert envelope["ok"] is False
    assert envelope["error"]["code"] == "mnote_tool_not_found"
    assert envelope["error"]["retryable"] is False


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool", WRITES)
async def test_write_success(db: Path, mode: str, tool: str) -> None:
    spec = TOOLS[tool]
    assert spec.command is not None
    async with connect(db, mode, actor="user_editor") as client:
        envelope = await call_example(client, spec, DOC_1, "k_ok")
    _assert_envelope_keys(envelope, tool)
    assert envelope["ok"] is True and envelope["error"] is None
    assert envelope["result"]["commandName"] == spec.command.name
    assert isinstance(envelope["result"]["revision"], int)
    audit = envelope["audit"]
    assert audit["effect"] == "write"
    assert audit["commandId"].startswith(command_id_prefix(spec.command.name))
    assert (audit["workspaceId"], audit["documentId"]) == ("ws_1", "doc_1")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool", WRITES)
async def test_write_dry_run(db: Path, mode: str, tool: str) -> None:
    async with connect(db, mode, actor="user_editor") as client:
        envelope = await call_example(client, TOOLS[tool], DOC_1, "k_plan", dry_run=True)
    assert envelope["ok"] is True
    assert envelope["result"]["dryRun"] is True
    assert isinstance(envelope["result"]["diff"], list) and envelope["result"]["diff"]
    assert envelope["audit"] == {
        "effect": "dry_run",
        "commandId": None,
        "workspaceId": "ws_1",
        "documentId": "doc_1",
    }


@pytest.mark.parametrize("mode", MODES)
async def test_append_dry_run_diff_is_the_contracts(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        envelope = await call(
            client, "mnote.page.save", **write_args("k", dry_run=True, content=BLOCK, mode="append")
        )
    assert envelope["result"]["diff"] == [{"op": "append", "blocks": 1}]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool", VIEWER_REFUSED)
async def test_write_permission_failure(db: Path, mode: str, tool: str) -> None:
    spec = TOOLS[tool]
    refusal = spec.permissions.refusal(Caller.VIEWER)
    assert refusal is not None
    async with connect(db, mode, actor="user_viewer", locale="zh-CN") as client:
        envelope = await call(client, tool, **{**IDS, **arguments(spec, DOC_1, "k_denied")})
    _assert_envelope_keys(envelope, tool)
    assert envelope["ok"] is False and envelope["result"] is None
    assert envelope["error"]["code"] == "mnote_tool_permission_denied"
    assert envelope["error"]["message"] == CONTRACT_WORDS[refusal.reason]
    assert envelope["audit"]["effect"] == "none" and "commandId" not in envelope["audit"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool", list(STALE))
async def test_a_stale_revision_is_a_conflict(db: Path, mode: str, tool: str) -> None:
    """Every write that declares the conflict, with the contract's words, the revisions and a hint."""
    spec, case = TOOLS[tool], STALE[tool]
    assert case.example is not None
    stale = Example(overridden(spec.example.arguments, case.example))
    async with connect(db, mode, locale="zh-CN") as client:
        envelope = await call(client, tool, **{**IDS, **arguments(spec, DOC_1, "k_conflict", example=stale)})
    assert envelope["ok"] is False
    error = envelope["error"]
    assert error["code"] == "mnote_tool_conflict"
    assert error["message"] == "页面版本冲突，需要刷新后重试"
    assert error["details"] == {"currentRevision": 1, "baseRevision": case.example["baseRevision"]}
    assert "mnote.page.get" in error["hint"] and "1" in error["hint"]


def test_every_page_write_of_the_contract_declares_the_conflict() -> None:
    assert {"mnote.page.save", "mnote.page.update_title", "mnote.page.update_options"} <= set(STALE)


@pytest.mark.parametrize("mode", MODES)
async def test_summary_business_failure_is_an_idempotency_conflict(db: Path, mode: str) -> None:
    async with connect(db, mode, locale="zh-CN") as client:
        first = await call(client, "mnote.artifact.create_summary", **write_args("k_sum", summary="one"))
        second = await call(client, "mnote.artifact.create_summary", **write_args("k_sum", summary="two"))
    assert first["ok"] is True
    assert second["ok"] is False
    assert second["error"]["code"] == "mnote_tool_idempotency_conflict"
    assert second["error"]["message"] == "同一幂等键已用于不同 summary 内容"


@pytest.mark.parametrize("mode", MODES)
async def test_ai_note_business_failure_is_an_idempotency_conflict(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        await call(client, "mnote.artifact.create_ai_note", **write_args("k_note", content="one"))
        second = await call(client, "mnote.artifact.create_ai_note", **write_args("k_note", content="two"))
    assert second["error"]["code"] == "mnote_tool_idempotency_conflict"
    assert "hint" in second["error"]


@pytest.mark.parametrize("mode", MODES)
async def test_options_business_failure_is_not_wired(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        envelope = await call(
            client, "mnote.page.update_options", **write_args("k_wired", options={"protectEditing": True})
        )
    assert envelope["error"]["code"] == "mnote_tool_option_not_wired"
    assert envelope["error"]["details"]["options"] == ["protectEditing"]


@pytest.mark.parametrize("mode", MODES)
async def test_failures_are_results_not_protocol_errors(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        for arguments in ({}, {"workspaceId": 3}, {"content": "not json ["}, {"dryRun": "yes"}):
            result = await client.call_tool("mnote.page.save", arguments)
            assert result.is_error is True
            assert result.structured_content is not None
            assert result.structured_content["error"]["code"] == "mnote_tool_invalid_argument"


@pytest.mark.parametrize("mode", MODES)
async def test_unknown_tool_is_a_protocol_error(db: Path, mode: str) -> None:
    from mcp import MCPError

    async with connect(db, mode) as client:
        with pytest.raises(MCPError, match="Unknown tool"):
            await client.call_tool("mnote.page.delete_everything", {})


@pytest.mark.parametrize("mode", MODES)
async def test_english_locale(db: Path, mode: str) -> None:
    async with connect(db, mode, actor="user_viewer", locale="en") as client:
        envelope = await call(client, "mnote.page.save", **write_args("k", content=BLOCK))
    assert envelope["error"]["message"] == "no page write permission"
