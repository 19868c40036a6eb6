"""Upgrading a store written by mnote-mcp 0.1.0 (schema version 1) in place, on first open.

`tests/fixtures/store_v1.sql` is a real version-1 store: made by that release's code (commit b2dd504,
its schema taken from git history as it was) and dumped as SQL. The upgrade must keep every page,
revision, artifact, edge, ledger and audit row; run in one transaction (a failure leaves version 1
untouched); record the schema version; and happen once when two processes open the old store at once.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mnote_mcp.kernel.blocks import walk
from mnote_mcp.kernel.limits import block_bytes
from mnote_mcp.kernel.sqlite import migrate
from mnote_mcp.kernel.sqlite.opening import open_store
from mnote_mcp.kernel.sqlite.schema import SCHEMA_VERSION
from mnote_mcp.kernel.store.rows import read_tree
from tests.support.helpers import FIXTURES, ROOT, call, connect, page_args, write_args
from tests.support.timing import patience

pytestmark = pytest.mark.anyio
V1_DUMP = FIXTURES / "store_v1.sql"
TABLES = ("workspaces", "members", "page_access", "option_registry", "artifacts", "edges")


def v1_store(path: Path, extra_pages: int = 0, blocks_per_page: int = 0) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript(V1_DUMP.read_text(encoding="utf-8"))
    body = json.dumps(
        [{"id": f"b{n}", "type": "paragraph", "text": f"line {n} ✓"} for n in range(blocks_per_page)],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    conn.executemany(
        "INSERT INTO pages (workspace_id, id, title, options, blocks, revision, restricted, updated_at)"
        " VALUES ('ws_1', ?, 'bulk', '{}', ?, 3, 0, '2026-01-01T00:00:00.000Z')",
        [(f"bulk_{n}", body) for n in range(extra_pages)],
    )
    conn.commit()
    conn.execute("PRAGMA user_version = 1")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    return path


def rows_of(path: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def snapshot(path: Path) -> dict[str, Any]:
    return {
        **{table: sorted(rows_of(path, f"SELECT * FROM {table}")) for table in TABLES},
        "idempotency": sorted(
            rows_of(
                path,
                "SELECT workspace_id, actor_id, command_name, idem_key, fingerprint, command_id, outcome,"
                " created_at FROM idempotency",
            )
        ),
        "audit": rows_of(
            path,
            "SELECT seq, command_id, command_name, workspace_id, document_id, actor_id, session_id, run_id,"
            " tool_call_id, trace_id, idempotency_key, revision_before, revision_after, effect, outcome, detail,"
            " created_at FROM audit ORDER BY seq",
        ),
        "pages": sorted(
            rows_of(
                path, "SELECT workspace_id, id, title, options, revision, restricted, updated_at FROM pages"
            )
        ),
    }


def test_every_row_survives_the_upgrade(tmp_path: Path) -> None:
    db = v1_store(tmp_path / "old.db")
    before = snapshot(db)
    bodies = {
        (ws, doc): json.loads(body)
        for ws, doc, body in rows_of(db, "SELECT workspace_id, id, blocks FROM pages")
    }
    assert len(bodies) == 7 and len(before["audit"]) == 13 and len(before["idempotency"]) == 13
    total = sum(1 for body in bodies.values() for _ in walk(body))
    store = open_store(db)
    try:
        assert not store.created
        with store.transaction(write=False) as conn:
            trees = {key: read_tree(conn, *key) for key in bodies}
    finally:
        store.close()
    assert snapshot(db) == before, (
        "pages, revisions, members, access, artifacts, edges, ledger, audit: all kept"
    )
    assert trees == bodies, "every page's body, block for block"
    assert rows_of(db, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    migration, search, cursors, path = rows_of(
        db, "SELECT version, detail FROM schema_migrations ORDER BY version"
    )
    assert migration == (2, f"blocks as rows: 7 pages, {total} blocks")
    assert search == (3, f"search index: 7 titles, {total} blocks")
    assert cursors == (4, "search cursors: page_changes")
    assert path == (5, "search index kept by the page-change path, not triggers")
    assert rows_of(db, "SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name") == [
        ("audit_is_append_only_delete",),
        ("audit_is_append_only_update",),
    ], "the search index's triggers are gone: the page-change path keeps it"
    assert rows_of(db, "SELECT count(*) FROM audit WHERE replay_of IS NOT NULL") == [(0,)]
    pages = {
        (ws, doc): rest
        for ws, doc, *rest in rows_of(
            db, "SELECT workspace_id, id, revision, block_count, byte_size, history_from FROM pages"
        )
    }
    for key, body in bodies.items():
        revision, count, size, history_from = pages[key]
        blocks = [block for block, _, _ in walk(body)]
        assert count == len(blocks) and history_from == revision
        assert size == sum(block_bytes(b["id"], b["type"], b["text"], b.get("props")) for b in blocks)
        revisions = rows_of(
            db,
            f"SELECT DISTINCT revision FROM blocks WHERE workspace_id = '{key[0]}' AND page_id = '{key[1]}'",
        )
        assert revisions in ([(revision,)], []), "a block's last change is unknown: the page's revision"
    assert "blocks" not in {row[1] for row in rows_of(db, "PRAGMA table_info(pages)")}


async def test_the_upgraded_store_serves_and_keeps_its_keys(tmp_path: Path) -> None:
    db = v1_store(tmp_path / "old.db")
    async with connect(db, actor="user_editor") as client:
        page = await call(client, "mnote.page.get", **page_args())
        assert page["ok"] and page["result"]["title"] == "Plan ✓" and page["result"]["revision"] == 9
        # A key the v1 ledger holds replays; under the same key another command is a conflict.
        replay = await call(client, "mnote.page.update_title", **write_args("k_title", title="Plan ✓"))
        other = await call(client, "mnote.page.update_title", **write_args("k_title", title="Other"))
        edit = await call(
            client,
            "mnote.block.update",
            **write_args("k_v2", blockId="p_1", text="edited after the upgrade", baseRevision=9),
        )
        history = await call(client, "mnote.page.history", **page_args())
        too_old = await call(client, "mnote.page.revert", **write_args("k_rev", toRevision=3))
    assert replay["ok"] and replay["result"]["idempotentReplay"] is True
    assert other["error"]["code"] == "mnote_tool_idempotency_conflict"
    assert edit["ok"] and edit["result"]["revision"] == 10
    assert history["result"]["historyFrom"] == 9
    assert [entry["revision"] for entry in history["result"]["entries"]] == [10]
    assert too_old["error"]["code"] == "mnote_tool_invalid_argument"
    assert too_old["error"]["details"]["historyFrom"] == 9


def test_a_failed_upgrade_leaves_the_old_store_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = v1_store(tmp_path / "old.db")
    before = rows_of(db, "SELECT sql FROM sqlite_master ORDER BY name"), snapshot(db)
    real = migrate.MIGRATIONS[2]

    def fails_at_the_end(tx: sqlite3.Connection) -> str:
        real(tx)
        raise RuntimeError("disk full, say")

    monkeypatch.setitem(migrate.MIGRATIONS, 2, fails_at_the_end)
    with pytest.raises(RuntimeError, match="disk full"):
        open_store(db)
    assert (rows_of(db, "SELECT sql FROM sqlite_master ORDER BY name"), snapshot(db)) == before
    assert rows_of(db, "PRAGMA user_version") == [(1,)]


@pytest.mark.slow
def test_two_processes_opening_an_old_store_at_once_migrate_it_once(tmp_path: Path) -> None:
    v1_blocks = sum(
        1
        for (body,) in rows_of(v1_store(tmp_path / "probe.db"), "SELECT blocks FROM pages")
        for _ in walk(json.loads(body))
    )
    db = v1_store(tmp_path / "old.db", extra_pages=300, blocks_per_page=200)  # slow enough to overlap
    go = tmp_path / "go"
    script = (
        "import sys, time, pathlib\n"
        "from mnote_mcp.kernel.sqlite.opening import open_store\n"
        "go = pathlib.Path(sys.argv[2])\n"
        "while not go.exists(): time.sleep(0.001)\n"
        "open_store(sys.argv[1]).close()\n"
    )
    processes = [
        subprocess.Popen([sys.executable, "-c", script, str(db), str(go)], cwd=ROOT, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    time.sleep(1.0)  # both imported and waiting
    go.touch()
    errors = [process.communicate(timeout=patience(120))[1].decode() for process in processes]
    assert [process.returncode for process in processes] == [0, 0], errors
    assert rows_of(db, "SELECT version FROM schema_migrations") == [(2,), (3,), (4,), (5,)], (
        "migrated exactly once"
    )
    assert rows_of(db, "SELECT count(*) FROM blocks") == [(v1_blocks + 300 * 200,)]
