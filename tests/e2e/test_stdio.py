"""End to end over stdio: real `mnote-mcp` subprocesses, the SDK client, and the MCP Inspector CLI."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from mnote_mcp.demo import tour
from mnote_mcp.kernel.sqlite.opening import open_store
from mnote_mcp.tools.catalog import ALL_TOOLS
from tests.support.helpers import (
    RAW_INITIALIZE,
    ROOT,
    envelope_in,
    envelope_of,
    inspector,
    stdio_params,
    write_args,
)
from tests.support.timing import patience

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
TIMEOUT = patience(30)


def console_script() -> str:
    script = Path(sys.executable).with_name("mnote-mcp")
    return str(script) if script.exists() else (shutil.which("mnote-mcp") or "mnote-mcp")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_demo_path_over_stdio(tmp_path: Path, mode: str) -> None:
    db = tmp_path / "fresh.db"  # new store: the server seeds the demo workspace itself (asked: --demo)
    async with Client(stdio_params(db, "--demo"), mode=mode, read_timeout_seconds=TIMEOUT) as client:
        envelopes = await tour(client, db)
    outcomes = [(e["toolName"], e["ok"], (e["error"] or {}).get("code")) for e in envelopes]
    assert outcomes == [
        ("mnote.page.get", True, None),
        ("mnote.page.save", True, None),
        ("mnote.page.save", True, None),
        ("mnote.page.save", True, None),
        ("mnote.page.update_title", False, "mnote_tool_conflict"),
        ("mnote.page.update_options", True, None),
        ("mnote.artifact.create_summary", True, None),
        ("mnote.artifact.create_ai_note", True, None),
        ("mnote.block.insert", True, None),
        ("mnote.block.update", True, None),
        ("mnote.block.move", True, None),
        ("mnote.block.delete", True, None),
        ("mnote.page.get", True, None),
        ("mnote.page.search", True, None),
        ("mnote.page.edit_text", True, None),  # the page named by its title
        ("mnote.page.history", True, None),
        ("mnote.page.revert", True, None),  # a dry run
        ("mnote.page.get", False, "mnote_tool_permission_denied"),
    ]
    plan, save, retry = envelopes[1], envelopes[2], envelopes[3]
    assert plan["result"]["diff"] == [{"op": "append", "blocks": 1}]
    assert retry["audit"]["commandId"] == save["audit"]["commandId"]
    assert retry["result"]["revision"] == save["result"]["revision"] == 2
    deletion, markdown = envelopes[11], envelopes[12]
    assert deletion["result"]["blockIds"] == ["list_1", "list_1_1"] and deletion["result"]["dryRun"] is True
    assert "<!-- list_1_1 -->" in markdown["result"]["markdown"], "the moved list, still with its child"
    store = open_store(db)
    try:
        record, *replays = store.audit_trail(command_id=save["audit"]["commandId"])
    finally:
        store.close()
    assert record["traceId"] == "trace_demo" and record["sessionId"] == "demo_session"
    assert [r["replayOf"] for r in replays] == [save["audit"]["commandId"]], "the demo's retry, audited"


def test_stdout_carries_nothing_but_the_protocol(tmp_path: Path) -> None:
    requests = [
        RAW_INITIALIZE,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "mnote.page.get", "arguments": {"workspaceId": "ws_1", "documentId": "doc_1"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "mnote.page.save", "arguments": {}},
        },
    ]
    stdin = "".join(json.dumps(r) + "\n" for r in requests)
    proc = subprocess.run(
        [console_script(), "--db", str(tmp_path / "raw.db"), "--log-level", "debug"],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=ROOT,
    )
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert lines, proc.stderr
    messages = [json.loads(line) for line in lines]
    assert all(m.get("jsonrpc") == "2.0" for m in messages)
    assert {m["id"] for m in messages} == {1, 2, 3, 4}
    assert "mnote-mcp 0.1.0 on stdio" in proc.stderr, "the banner goes to stderr"
    assert "call tool=mnote.page.get" in proc.stderr


async def test_twenty_concurrent_identical_calls_from_two_processes_write_once(db: Path) -> None:
    args = write_args("k_race", content=[{"type": "paragraph", "text": "once"}], mode="append")
    envelopes: list[dict[str, Any]] = []
    async with (
        Client(stdio_params(db, "--actor", "user_editor"), read_timeout_seconds=TIMEOUT) as first,
        Client(stdio_params(db, "--actor", "user_editor"), read_timeout_seconds=TIMEOUT) as second,
    ):
        await first.list_tools()
        await second.list_tools()

        async def fire(client: Client) -> None:
            envelopes.append(envelope_of(await client.call_tool("mnote.page.save", args)))

        async with anyio.create_task_group() as group:
            for n in range(20):
                group.start_soon(fire, first if n % 2 else second)
    assert len(envelopes) == 20 and all(e["ok"] for e in envelopes)
    assert len({e["audit"]["commandId"] for e in envelopes}) == 1
    assert {e["result"]["revision"] for e in envelopes} == {2}
    assert sum(1 for e in envelopes if not e["result"].get("idempotentReplay")) == 1
    store = open_store(db)
    try:
        trail = store.audit_trail(trace_id="trace_t")
        assert [r["effect"] for r in trail].count("write") == 1 and len(trail) == 20, "1 write, 19 replays"
        with store.transaction(write=False) as conn:
            (written,) = conn.execute("SELECT count(*) FROM blocks WHERE text = 'once'").fetchone()
    finally:
        store.close()
    assert written == 1


@pytest.mark.inspector
def test_inspector_lists_and_calls_tools_over_stdio(tmp_path: Path) -> None:
    server = [console_script(), "--db", str(tmp_path / "inspector.db"), "--demo"]
    listed = inspector(*server, "--method", "tools/list", "--strict", home=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "Warning" not in listed.stderr, "schemas pass the Inspector's portability lint"
    names = [tool["name"] for tool in json.loads(listed.stdout)["tools"]]
    default = [spec.name for spec in ALL_TOOLS if spec.by_default]
    assert names == default, "the default selection, in declaration order"
    called = inspector(
        *server,
        "--method",
        "tools/call",
        "--tool-name",
        "mnote.page.get",
        "--tool-args-json",
        json.dumps({"workspaceId": "ws_1", "documentId": "doc_1"}),
        "--tool-metadata",
        "mnote/traceId=trace_inspector",
        "--format",
        "json",
        home=tmp_path,
    )
    assert called.returncode == 0, called.stderr
    envelope = envelope_in(json.loads(called.stdout)["result"])
    assert envelope["ok"] is True and envelope["traceId"] == "trace_inspector"
    assert envelope["result"]["title"] == "Project plan"
    refusal = [
        "--method",
        "tools/call",
        "--tool-name",
        "mnote.page.get",
        "--tool-args-json",
        json.dumps({"workspaceId": "ws_2", "documentId": "doc_9"}),
        "--format",
        "json",
    ]
    refused = inspector(*server, *refusal, home=tmp_path)
    assert refused.returncode == 0, "by default a refusal is an ok:false result, not isError"
    assert (
        envelope_in(json.loads(refused.stdout)["result"])["error"]["code"] == "mnote_tool_permission_denied"
    )
    as_error = inspector(*server, "--refusals", "error", *refusal, home=tmp_path)
    assert as_error.returncode == 5, "with --refusals error, an isError result exits 5"


@pytest.mark.inspector
def test_inspector_reads_a_page_resource_over_stdio(tmp_path: Path) -> None:
    server = [console_script(), "--db", str(tmp_path / "inspector.db"), "--demo"]
    uri = "mnote://workspaces/ws_1/pages/doc_1"
    read = inspector(*server, "--method", "resources/read", "--uri", uri, home=tmp_path)
    assert read.returncode == 0, read.stderr
    (content,) = json.loads(read.stdout)["contents"]
    assert content["uri"] == uri and content["mimeType"] == "text/markdown"
    assert 'title: "Project plan"' in content["text"] and "<!-- heading_1 -->" in content["text"]
