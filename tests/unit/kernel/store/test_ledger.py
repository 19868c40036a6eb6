"""Idempotency as an agent relies on it (issue 11, items 1-3): a dry run tells what the real call will
do, a replay leaves a trace of the retry, and one key is one operation for its actor, across tools."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mnote_mcp.kernel.databases.stores import open_store
from tests.support.helpers import FIXTURE, MODES, call, connect, dump, write_args
from tests.support.postgres import STORES, store_fixture

pytestmark = pytest.mark.anyio


@pytest.fixture(params=STORES)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """Every test here runs on SQLite and on PostgreSQL (the MCP end-to-end slice on both stores)."""
    return store_fixture(request, tmp_path, FIXTURE)


APPEND: dict[str, Any] = {"content": [{"type": "paragraph", "text": "once"}], "mode": "append"}


@pytest.mark.parametrize("mode", MODES)
async def test_a_dry_run_with_a_used_key_reports_the_replay_not_a_second_write(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        first = await call(client, "mnote.page.save", **write_args("k_used", **APPEND))
        before = dump(db)
        plan = await call(client, "mnote.page.save", **write_args("k_used", dry_run=True, **APPEND))
        assert dump(db) == before
        retry = await call(client, "mnote.page.save", **write_args("k_used", **APPEND))
    assert first["ok"] and plan["ok"] and retry["ok"]
    result = plan["result"]
    assert result["dryRun"] is True and result["idempotentReplay"] is True
    assert result["diff"] == [] and result["changed"] is False and "textDiff" not in result
    assert result["commandId"] == first["audit"]["commandId"] == retry["audit"]["commandId"]
    assert "blockIds" not in result, "a replay creates no blocks; the plan must not name new ones"
    assert retry["result"]["idempotentReplay"] is True


async def test_a_dry_run_with_a_key_used_for_other_arguments_is_the_conflict(db: Path) -> None:
    async with connect(db) as client:
        await call(client, "mnote.page.save", **write_args("k_other", **APPEND))
        other = {**APPEND, "content": [{"type": "paragraph", "text": "something else"}]}
        plan = await call(client, "mnote.page.save", **write_args("k_other", dry_run=True, **other))
    assert plan["error"]["code"] == "mnote_tool_idempotency_conflict"


async def test_a_replay_is_audited_with_the_retrys_own_ids_and_found_by_either_trace(db: Path) -> None:
    async with connect(db) as client:
        first = await call(
            client,
            "mnote.page.save",
            **write_args("k_retry", **APPEND, traceId="trace_first", toolCallId="c1"),
        )
        retry = await call(
            client,
            "mnote.page.save",
            **write_args("k_retry", **APPEND, traceId="trace_retry", toolCallId="c2"),
        )
    original = first["audit"]["commandId"]
    assert retry["audit"]["commandId"] == original and retry["traceId"] == "trace_retry"
    store = open_store(db)
    try:
        by_retry = store.audit_trail(trace_id="trace_retry")
        by_first = store.audit_trail(trace_id="trace_first")
        by_command = store.audit_trail(command_id=original)
    finally:
        store.close()
    (replay,) = by_retry
    assert replay["replayOf"] == original and replay["effect"] == "replay"
    assert (replay["traceId"], replay["toolCallId"]) == ("trace_retry", "c2")
    assert [r["commandId"] for r in by_first] == [original, replay["commandId"]], (
        "found by the first trace too"
    )
    assert [r["commandId"] for r in by_command] == [original, replay["commandId"]]


async def test_one_key_is_one_operation_for_its_actor_across_tools(db: Path) -> None:
    async with connect(db) as client:
        saved = await call(client, "mnote.page.save", **write_args("K1", **APPEND))
        before = dump(db)
        renamed = await call(client, "mnote.page.update_title", **write_args("K1", title="Another tool"))
        planned = await call(client, "mnote.page.update_title", **write_args("K1", dry_run=True, title="x"))
        noted = await call(client, "mnote.artifact.create_ai_note", **write_args("K1", content="note"))
    assert saved["ok"]
    for refused in (renamed, planned, noted):
        assert refused["error"]["code"] == "mnote_tool_idempotency_conflict", refused["error"]
    assert dump(db) == before


async def test_keys_belong_to_their_actor(db: Path) -> None:
    """Another actor using the same key string is a different operation, not a conflict or a replay."""
    async with connect(db, actor="user_editor") as client:
        mine = await call(client, "mnote.page.save", **write_args("shared_key", **APPEND))
    async with connect(db, actor="user_owner") as client:
        theirs = await call(client, "mnote.page.save", **write_args("shared_key", **APPEND))
    assert mine["ok"] and theirs["ok"] and not theirs["result"].get("idempotentReplay")
    assert theirs["result"]["revision"] == mine["result"]["revision"] + 1
