"""Kernel semantics, observed through the MCP client: revisions, idempotency, dry runs, artifacts, audit."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from mnote_mcp.kernel.sqlite.opening import open_store
from tests.support.helpers import IDS, MODES, call, connect, dump, page_args, write_args
from tests.support.timing import patience

pytestmark = pytest.mark.anyio
PARA = [{"type": "paragraph", "text": "new"}]


def _files(db: Path) -> str:
    """The bytes of the database and its write-ahead log: what a write would have to touch."""
    digest = hashlib.sha256()
    for path in (db, db.with_name(db.name + "-wal")):
        if path.exists():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _count(db: Path, sql: str, *params: Any) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute(sql, params).fetchone()[0])


async def _revision(client: Any, doc: str = "doc_1") -> int:
    return int((await call(client, "mnote.page.get", **page_args(doc)))["result"]["revision"])


@pytest.mark.parametrize("mode", MODES)
async def test_revision_rises_by_one_per_write(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        assert await _revision(client) == 1
        steps: list[tuple[str, dict[str, Any]]] = [
            ("mnote.page.save", {"content": PARA, "mode": "append"}),
            ("mnote.page.update_title", {"title": "Renamed"}),
            ("mnote.page.update_options", {"options": {"smallText": True}}),
            ("mnote.page.save", {"content": PARA}),
        ]
        for n, (tool, args) in enumerate(steps, start=2):
            envelope = await call(client, tool, **write_args(f"k{n}", **args))
            assert envelope["result"]["revision"] == n
            assert await _revision(client) == n


@pytest.mark.parametrize("mode", MODES)
async def test_stale_base_revision_is_refused_with_the_current_one(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        await call(client, "mnote.page.save", **write_args("k1", content=PARA, mode="append", baseRevision=1))
        before = dump(db)
        stale = await call(client, "mnote.page.update_title", **write_args("k2", title="T", baseRevision=1))
        assert stale["error"]["code"] == "mnote_tool_conflict"
        assert stale["error"]["details"]["currentRevision"] == 2
        assert dump(db) == before
        fresh = await call(client, "mnote.page.update_title", **write_args("k2", title="T", baseRevision=2))
        assert fresh["ok"] and fresh["result"]["revision"] == 3


@pytest.mark.parametrize("mode", MODES)
async def test_idempotent_retry_replays_and_writes_nothing(db: Path, mode: str) -> None:
    args = write_args("k_retry", content=PARA, mode="append")
    async with connect(db, mode) as client:
        first = await call(client, "mnote.page.save", **args)
        before = dump(db, audit=False)
        retry = await call(client, "mnote.page.save", **{**args, "toolCallId": "call_retry"})
        assert dump(db, audit=False) == before, "a replay writes nothing but its own audit record"
        assert await _revision(client) == 2
    assert retry["result"]["revision"] == first["result"]["revision"] == 2
    assert retry["audit"]["commandId"] == first["audit"]["commandId"]
    assert retry["result"]["idempotentReplay"] is True
    assert retry["toolCallId"] == "call_retry"


@pytest.mark.parametrize("mode", MODES)
async def test_same_key_different_arguments_is_an_idempotency_conflict(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        await call(client, "mnote.page.save", **write_args("k_same", content=PARA, mode="append"))
        before = dump(db)
        other = [{"type": "paragraph", "text": "different"}]
        envelope = await call(client, "mnote.page.save", **write_args("k_same", content=other, mode="append"))
        assert envelope["error"]["code"] == "mnote_tool_idempotency_conflict"
        assert dump(db) == before


DRY_RUNS: list[tuple[str, dict[str, Any]]] = [
    ("mnote.page.save", {"content": PARA, "mode": "append"}),
    ("mnote.page.save", {"content": []}),
    ("mnote.page.update_title", {"title": "Dry"}),
    ("mnote.page.update_options", {"options": {"protectEditing": True, "showToc": True}}),
    ("mnote.artifact.create_summary", {"summary": "dry"}),
    ("mnote.artifact.create_ai_note", {"content": "dry"}),
]


@pytest.mark.parametrize(("tool", "args"), DRY_RUNS)
async def test_dry_run_leaves_the_store_byte_for_byte_unchanged(
    db: Path, tool: str, args: dict[str, Any]
) -> None:
    async with connect(db) as client:
        await _revision(client)
        before, files = dump(db), _files(db)
        envelope = await call(client, tool, **write_args("k_dry", dry_run=True, **args))
        assert envelope["ok"] and envelope["result"]["dryRun"] is True
        assert dump(db) == before
        assert _files(db) == files
        real = await call(client, tool, **write_args("k_dry", **args))
    if real["ok"]:
        assert real["result"]["diff"] == envelope["result"]["diff"], "a dry run shows the real call's diff"


async def test_dry_run_consumes_no_key(db: Path) -> None:
    async with connect(db) as client:
        await call(client, "mnote.page.save", **write_args("k", dry_run=True, content=PARA, mode="append"))
        other = [{"type": "quote", "text": "other"}]
        real = await call(client, "mnote.page.save", **write_args("k", content=other, mode="append"))
    assert real["ok"] is True


async def test_dry_run_names_the_block_ids_the_real_call_creates(db: Path) -> None:
    async with connect(db) as client:
        plan = await call(
            client, "mnote.page.save", **write_args("k", dry_run=True, content=PARA * 2, mode="append")
        )
        real = await call(client, "mnote.page.save", **write_args("k", content=PARA * 2, mode="append"))
        page = await call(client, "mnote.page.get", **page_args())
    assert plan["result"]["blockIds"] == real["result"]["blockIds"]
    assert [b["id"] for b in page["result"]["blocks"][-2:]] == real["result"]["blockIds"]


@pytest.mark.parametrize("mode", MODES)
async def test_non_wired_option_fails_for_real_and_warns_on_dry_run(db: Path, mode: str) -> None:
    args: dict[str, Any] = {"options": {"protectEditing": True}}
    async with connect(db, mode) as client:
        before = dump(db)
        real = await call(client, "mnote.page.update_options", **write_args("k", **args))
        assert real["error"]["code"] == "mnote_tool_option_not_wired"
        assert dump(db) == before
        dry = await call(client, "mnote.page.update_options", **write_args("k", dry_run=True, **args))
    assert dry["ok"] is True
    assert [w["code"] for w in dry["result"]["warnings"]] == ["mnote_tool_option_not_wired"]
    assert dry["result"]["warnings"][0]["details"]["options"] == ["protectEditing"]


async def test_wired_options_are_merged(db: Path) -> None:
    async with connect(db) as client:
        await call(client, "mnote.page.update_options", **write_args("k", options={"showToc": True}))
        page = await call(client, "mnote.page.get", **page_args())
    assert page["result"]["pageOptions"] == {"wideLayout": True, "showToc": True}


async def test_one_summary_node_per_page(db: Path) -> None:
    async with connect(db) as client:
        first = await call(client, "mnote.artifact.create_summary", **write_args("s1", summary="first"))
        second = await call(client, "mnote.artifact.create_summary", **write_args("s2", summary="second"))
        revision = await _revision(client)
    assert first["result"]["artifactId"] == second["result"]["artifactId"]
    assert revision == 1, "artifacts never change the page's revision"
    summaries = "SELECT count(*) FROM artifacts WHERE page_id = ? AND kind = 'summary'"
    assert _count(db, summaries, "doc_1") == 1
    assert _count(db, "SELECT count(*) FROM edges WHERE to_page_id = ? AND kind = 'reference'", "doc_1") == 1
    assert _count(db, "SELECT count(*) FROM artifacts WHERE content = 'second'") == 1
    assert [op["op"] for op in second["result"]["diff"]] == ["update", "confirm"]


async def test_one_ai_note_per_distinct_key(db: Path) -> None:
    async with connect(db) as client:
        for key in ("n1", "n2", "n3", "n1", "n2"):
            envelope = await call(
                client, "mnote.artifact.create_ai_note", **write_args(key, content=f"note {key}")
            )
            assert envelope["ok"]
    assert _count(db, "SELECT count(*) FROM artifacts WHERE kind = 'ai_note'") == 3
    assert _count(db, "SELECT count(*) FROM edges WHERE kind = 'reference'") == 3


async def test_artifacts_record_their_provenance(db: Path) -> None:
    async with connect(db) as client:
        envelope = await call(client, "mnote.artifact.create_ai_note", **write_args("p", content="why"))
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT actor_id, session_id, run_id, tool_call_id, trace_id, source_revision, command_id"
            " FROM artifacts WHERE id = ?",
            (envelope["result"]["artifactId"],),
        ).fetchone()
    assert row == ("user_editor", *IDS.values(), 1, envelope["audit"]["commandId"])


async def test_every_write_command_id_finds_its_audit_record(db: Path) -> None:
    async with connect(db) as client:
        envelopes = [
            await call(client, "mnote.page.save", **write_args("a1", content=PARA, mode="append")),
            await call(client, "mnote.page.update_title", **write_args("a2", title="Audited")),
            await call(client, "mnote.page.update_options", **write_args("a3", options={"showToc": True})),
            await call(client, "mnote.artifact.create_summary", **write_args("a4", summary="s")),
            await call(client, "mnote.artifact.create_ai_note", **write_args("a5", content="n")),
        ]
    store = open_store(db)
    try:
        for envelope in envelopes:
            command_id = envelope["audit"]["commandId"]
            (record,) = store.audit_trail(command_id=command_id)
            assert record["commandName"] == envelope["result"]["commandName"]
            assert {k: v for k, v in record.items() if k in IDS} == IDS
            assert record["actorId"] == "user_editor"
            assert record["effect"] == "write"
        assert len(store.audit_trail(trace_id="trace_t")) == 5
    finally:
        store.close()


async def test_audit_log_is_append_only(db: Path) -> None:
    async with connect(db) as client:
        await call(client, "mnote.page.update_title", **write_args("a", title="x"))
    with sqlite3.connect(db) as conn, pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("DELETE FROM audit")


async def test_replace_diff_names_blocks_by_id(db: Path) -> None:
    content = [
        {"id": "p_2", "type": "paragraph", "text": "Second paragraph."},
        {"id": "heading_1", "type": "heading", "text": "Chapter 1", "props": {"level": 1}},
        {"type": "quote", "text": "brand new"},
    ]
    async with connect(db) as client:
        envelope = await call(client, "mnote.page.save", **write_args("r", dry_run=True, content=content))
    diff = envelope["result"]["diff"]
    by_op = {(op["op"], op["blockId"]) for op in diff}
    assert ("delete", "p_1") in by_op
    assert ("update", "heading_1") in by_op
    assert ("move", "p_2") in by_op or ("move", "heading_1") in by_op
    inserts = [op for op in diff if op["op"] == "insert"]
    assert len(inserts) == 1 and inserts[0]["after"] == "heading_1"
    assert "textDiff" in envelope["result"]


async def test_unchanged_save_says_so_and_keeps_the_revision(db: Path) -> None:
    async with connect(db) as client:
        page = await call(client, "mnote.page.get", **page_args())
        envelope = await call(
            client, "mnote.page.save", **write_args("same", content=page["result"]["blocks"])
        )
    assert envelope["ok"] and envelope["result"]["changed"] is False
    assert envelope["result"]["diff"] == [] and envelope["result"]["revision"] == 1


@pytest.mark.parametrize(
    ("content", "pointer"),
    [
        ([{"type": "table", "text": "x"}], "/content/0/type"),
        ([{"type": "heading", "text": "x", "props": {"level": 9}}], "/content/0/props/level"),
        ([{"type": "paragraph", "children": [{"type": "paragraph"}]}], "/content/0/children"),
        ([{"id": "a", "type": "paragraph"}, {"id": "a", "type": "paragraph"}], "/content/1/id"),
        ([{"type": "divider", "text": "not empty"}], "/content/0/text"),
    ],
)
async def test_bad_blocks_are_refused_with_a_pointer_and_nothing_is_written(
    db: Path, content: list[dict[str, Any]], pointer: str
) -> None:
    before = dump(db)
    async with connect(db) as client:
        envelope = await call(client, "mnote.page.save", **write_args("bad", content=content))
    assert envelope["error"]["code"] == "mnote_tool_invalid_argument"
    assert envelope["error"]["details"]["pointer"] == pointer
    assert dump(db) == before


async def test_unknown_block_type_names_the_supported_ones(db: Path) -> None:
    async with connect(db) as client:
        envelope = await call(client, "mnote.page.save", **write_args("bad", content=[{"type": "video"}]))
    assert "paragraph" in envelope["error"]["message"]


async def test_arguments_sent_as_json_text_are_decoded_once(db: Path) -> None:
    async with connect(db) as client:
        envelope = await call(
            client, "mnote.page.save", **write_args("json", content=json.dumps(PARA), mode="append")
        )
        options = await call(
            client, "mnote.page.update_options", **write_args("json2", options=json.dumps({"showToc": True}))
        )
        nested = await call(
            client,
            "mnote.page.save",
            **write_args("json3", content=json.dumps(json.dumps(PARA)), mode="append"),
        )
    assert envelope["ok"] and options["ok"]
    assert nested["error"]["code"] == "mnote_tool_invalid_argument", "decoded once, not twice"


async def test_empty_append_and_blank_texts_are_refused(db: Path) -> None:
    async with connect(db) as client:
        cases: list[tuple[str, dict[str, Any]]] = [
            ("mnote.page.save", {"content": [], "mode": "append"}),
            ("mnote.page.update_title", {"title": "   "}),
            ("mnote.page.update_options", {"options": {}}),
            ("mnote.artifact.create_summary", {"summary": " "}),
            ("mnote.artifact.create_ai_note", {"content": ""}),
            ("mnote.page.save", {"content": PARA, "mode": "merge"}),
        ]
        for tool, args in cases:
            envelope = await call(client, tool, **write_args("blank", **args))
            assert envelope["error"]["code"] == "mnote_tool_invalid_argument", (tool, args)
        empty_key = await call(client, "mnote.page.update_title", **write_args("", title="x"))
        assert empty_key["error"]["details"]["pointer"] == "/idempotencyKey"


async def test_a_write_waiting_for_a_lock_does_not_stall_the_event_loop(db: Path) -> None:
    """Another process holds the write lock: the call waits on a worker thread, the loop keeps going.

    The lock is released by the loop itself, after 20 turns of it and half a second while the write
    waits, so the count does not depend on how fast a loaded machine turns it; a write that blocked
    the loop would never see it released and fail as store_busy (a thread lets the lock go at last, so
    nothing hangs)."""
    import threading

    import anyio

    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    lock = threading.Lock()
    ticks_at_release: list[int] = []

    def release(ticks: int) -> None:
        with lock:
            if not ticks_at_release:
                ticks_at_release.append(ticks)
                holder.execute("COMMIT")

    async def ticker() -> None:
        started, ticks = anyio.current_time(), 0
        while ticks < 20 or anyio.current_time() - started < 0.5:  # the write has begun to wait by then
            await anyio.sleep(0.01)
            ticks += 1
        release(ticks)

    fallback = threading.Timer(patience(40), release, (0,))
    fallback.start()
    try:
        async with connect(db, store_busy_timeout=patience(30)) as client, anyio.create_task_group() as group:
            group.start_soon(ticker)
            envelope = await call(
                client, "mnote.page.update_title", **write_args("locked", title="After the lock")
            )
    finally:
        fallback.cancel()
        release(0)
        holder.close()
    assert ticks_at_release and ticks_at_release[0] >= 20, (
        "the event loop kept running while the write waited"
    )
    assert envelope["ok"] and envelope["result"]["revision"] == 2, envelope
