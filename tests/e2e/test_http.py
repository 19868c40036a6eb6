"""Both HTTP transports end to end on 127.0.0.1 with a free port, through the SDK client: the same
envelopes as stdio, both protocol eras, stateless mode, and two replicas sharing one store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from mnote_mcp.kernel.sqlite.opening import open_store
from tests.support.helpers import (
    basic_path,
    call,
    comparable,
    connect,
    envelope_in,
    envelope_of,
    inspector,
    page_args,
    seeded_store,
    write_args,
)
from tests.support.http_helpers import RunningServer, http_server, mcp_http, mcp_sse, write_tokens

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
TOKENS: dict[str, dict[str, Any]] = {
    "tok-editor": {"actorId": "user_editor"},
    "tok-viewer": {"actorId": "user_viewer", "scopes": ["page.read"]},
}


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    return write_tokens(tmp_path / "tokens.json", TOKENS)


async def _reference(tmp_path: Path) -> list[dict[str, Any]]:
    async with connect(seeded_store(tmp_path / "reference.db")) as client:
        return [comparable(e) for e in await basic_path(client)]


@pytest.mark.parametrize(
    ("mode", "stateless"), [("legacy", False), ("auto", False), ("legacy", True), ("auto", True)]
)
async def test_streamable_http_gives_the_stdio_envelopes(
    tmp_path: Path, tokens: Path, mode: str, stateless: bool
) -> None:
    expected = await _reference(tmp_path)
    extra = ["--stateless"] if stateless else []
    with http_server(seeded_store(tmp_path / "http.db"), "--auth-file", str(tokens), *extra) as server:
        async with mcp_http(server.url, "tok-editor", mode) as client:
            got = [comparable(e) for e in await basic_path(client)]
    assert got == expected
    assert got[3]["result"]["idempotentReplay"] is True


async def test_sse_gives_the_stdio_envelopes(tmp_path: Path, tokens: Path) -> None:
    expected = await _reference(tmp_path)
    with http_server(
        seeded_store(tmp_path / "sse.db"), "--transport", "sse", "--auth-file", str(tokens)
    ) as server:
        async with mcp_sse(server.url, "tok-editor") as client:
            got = [comparable(e) for e in await basic_path(client)]
    assert got == expected


async def test_two_replicas_on_one_store_write_once_and_see_each_others_writes(
    db: Path, tokens: Path
) -> None:
    args = write_args("k_race", content=[{"type": "paragraph", "text": "once"}], mode="append")
    with (
        http_server(db, "--auth-file", str(tokens), "--stateless") as a,
        http_server(db, "--auth-file", str(tokens), "--stateless") as b,
    ):
        async with mcp_http(a.url, "tok-editor") as first, mcp_http(b.url, "tok-editor") as second:
            envelopes: list[dict[str, Any]] = []

            async def fire(client: Client) -> None:
                envelopes.append(envelope_of(await client.call_tool("mnote.page.save", args)))

            async with anyio.create_task_group() as group:
                for n in range(20):
                    group.start_soon(fire, first if n % 2 else second)
            assert all(e["ok"] for e in envelopes) and len(envelopes) == 20
            assert len({e["audit"]["commandId"] for e in envelopes}) == 1
            assert {e["result"]["revision"] for e in envelopes} == {2}
            fresh = await call(
                first, "mnote.page.update_title", **write_args("t1", title="A", baseRevision=2)
            )
            stale = await call(
                second, "mnote.page.update_title", **write_args("t2", title="B", baseRevision=2)
            )
    assert fresh["ok"]
    assert stale["error"]["code"] == "mnote_tool_conflict"
    assert stale["error"]["details"]["currentRevision"] == 3
    store = open_store(db)
    try:
        written = [r["commandName"] for r in store.audit_trail() if r["effect"] == "write"]
        assert written == ["page.body.save", "page.head.updateTitle"]
    finally:
        store.close()


async def test_correlation_ids_from_headers(db: Path, tokens: Path) -> None:
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    headers = {"X-Mnote-Session-Id": "hdr_session", "X-Mnote-Run-Id": "hdr_run", "traceparent": parent}
    with http_server(db, "--auth-file", str(tokens)) as server:
        async with mcp_http(server.url, "tok-editor", **headers) as client:
            envelope = await call(
                client,
                "mnote.page.update_title",
                workspaceId="ws_1",
                documentId="doc_1",
                title="hdr",
                idempotencyKey="h",
                dryRun=False,
            )
            overridden = await call(client, "mnote.page.get", meta={"mnote/runId": "meta_run"}, **page_args())
    assert envelope["traceId"] == "0af7651916cd43dd8448eb211c80319c"
    store = open_store(db)
    try:
        (record,) = store.audit_trail(command_id=envelope["audit"]["commandId"])
    finally:
        store.close()
    assert (record["sessionId"], record["runId"]) == ("hdr_session", "hdr_run")
    assert overridden["traceId"] == "trace_t", "arguments win over headers"


async def test_calls_are_logged_one_json_line_each(db: Path, tokens: Path) -> None:
    with http_server(db, "--auth-file", str(tokens), "--log-format", "json") as server:
        async with mcp_http(server.url, "tok-viewer") as client:
            await call(client, "mnote.page.get", **page_args())
            await call(client, "mnote.page.update_title", **write_args("x", title="x"))
        log = server.log
    calls = [json.loads(line) for line in log.splitlines() if '"mnote_mcp.calls"' in line]
    assert [(c["tool"], c["outcome"]) for c in calls] == [
        ("mnote.page.get", "ok"),
        ("mnote.page.update_title", "mnote_tool_permission_denied"),
    ]
    assert all(c["actor"] == "user_viewer" and c["traceId"] == "trace_t" and "latencyMs" in c for c in calls)


@pytest.fixture(scope="module")
def inspected(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """The server the Inspector is pointed at over each endpoint, made once: it only lists and reads."""
    base = tmp_path_factory.mktemp("inspected")
    tokens = write_tokens(base / "tokens.json", TOKENS)
    with http_server(seeded_store(base / "mnote.db"), "--auth-file", str(tokens)) as server:
        yield server


@pytest.mark.inspector
@pytest.mark.parametrize("endpoint", ["/mcp", "/sse"])
def test_inspector_lists_and_calls_tools_over_http(
    inspected: RunningServer, tmp_path: Path, endpoint: str
) -> None:
    server = inspected
    target = [f"{server.url}{endpoint}", "--header", "Authorization: Bearer tok-editor"]
    listed = inspector(*target, "--method", "tools/list", home=tmp_path)
    called = inspector(
        *target,
        "--method",
        "tools/call",
        "--tool-name",
        "mnote.page.get",
        "--tool-args-json",
        json.dumps({"workspaceId": "ws_1", "documentId": "doc_1"}),
        "--format",
        "json",
        home=tmp_path,
    )
    refused = inspector(f"{server.url}{endpoint}", "--method", "tools/list", home=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "mnote.artifact.create_ai_note" in [t["name"] for t in json.loads(listed.stdout)["tools"]]
    assert called.returncode == 0, called.stderr
    assert envelope_in(json.loads(called.stdout)["result"])["result"]["title"] == "Project plan"
    assert refused.returncode != 0, "no token, no tools"
