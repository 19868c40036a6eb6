"""Ids that join up without `_meta` (Hermes sends none): a generated `toolCallId` is never repeated,
across connections and restarts; a generated `runId` is one per stdio connection and one per HTTP or
SSE session, so a run's calls are found together in the audit trail."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mnote_mcp.kernel.sqlite.opening import open_store
from tests.support.helpers import MODES, call, make_app, stdio_params
from tests.support.http_helpers import http_server, mcp_http, mcp_sse, write_tokens

pytestmark = pytest.mark.anyio

PAGE: dict[str, Any] = {"workspaceId": "ws_1", "documentId": "doc_1"}


def _note(key: str) -> dict[str, Any]:
    return {**PAGE, "content": f"note {key}", "idempotencyKey": key, "dryRun": False}


async def _three_calls(client: Client, prefix: str) -> list[str]:
    """A read and two writes with no ids at all; the toolCallIds the envelopes carry."""
    envelopes = [
        await call(client, "mnote.page.get", **PAGE),
        await call(client, "mnote.artifact.create_ai_note", **_note(f"{prefix}-1")),
        await call(client, "mnote.artifact.create_ai_note", **_note(f"{prefix}-2")),
    ]
    assert all(envelope["ok"] for envelope in envelopes)
    return [envelope["toolCallId"] for envelope in envelopes]


def _runs(db: Path) -> dict[str, set[str]]:
    """runId -> the idempotency keys of its audited writes."""
    store = open_store(db)
    try:
        records = store.audit_trail(limit=1000)
    finally:
        store.close()
    runs: dict[str, set[str]] = {}
    for record in records:
        runs.setdefault(record["runId"], set()).add(record["idempotencyKey"])
    return runs


@pytest.mark.parametrize("mode", MODES)
async def test_two_connections_to_one_server_never_share_an_id(db: Path, mode: str) -> None:
    app = make_app(db)
    try:
        async with Client(app.server(), mode=mode) as first:
            first_ids = await _three_calls(first, "a")
        async with Client(app.server(), mode=mode) as second:
            second_ids = await _three_calls(second, "b")
    finally:
        await app.kernel.aclose()
    assert len(set(first_ids + second_ids)) == 6
    assert all(tool_call_id.startswith("call_") for tool_call_id in first_ids + second_ids)
    runs = _runs(db)
    assert sorted(runs.values(), key=sorted) == [{"a-1", "a-2"}, {"b-1", "b-2"}]


async def test_two_stdio_processes_never_share_an_id(db: Path) -> None:
    """A restart is a new process: ids must not start over (`call_3` in both runs was the bug)."""
    seen: list[str] = []
    for prefix in ("x", "y"):
        async with Client(stdio_params(db, "--actor", "user_editor")) as client:
            seen += await _three_calls(client, prefix)
    assert len(set(seen)) == 6
    assert sorted(_runs(db).values(), key=sorted) == [{"x-1", "x-2"}, {"y-1", "y-2"}]


Connector = Callable[[str, str], AbstractAsyncContextManager[Client]]


@pytest.mark.e2e
@pytest.mark.parametrize(
    "connect_over",
    [lambda url, token: mcp_http(url, token), lambda url, token: mcp_sse(url, token)],
    ids=["streamable-http", "sse"],
)
async def test_one_http_session_is_one_run(tmp_path: Path, db: Path, connect_over: Connector) -> None:
    tokens = write_tokens(tmp_path / "tokens.json", {"tok": {"actorId": "user_editor"}})
    seen: list[str] = []
    with http_server(db, "--auth-file", str(tokens)) as server:
        for prefix in ("s1", "s2"):
            async with connect_over(server.url, "tok") as client:
                seen += await _three_calls(client, prefix)
    runs = _runs(db)
    assert sorted(runs.values(), key=sorted) == [{"s1-1", "s1-2"}, {"s2-1", "s2-2"}]
    assert all(run_id.startswith("run_") for run_id in runs)
    assert len(set(seen)) == 6
