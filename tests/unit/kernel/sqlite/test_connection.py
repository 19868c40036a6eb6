"""Checkpoints of the SQLite store run off the event loop (issue 14, writes): the connection used on
the loop never checkpoints inside a `COMMIT`; the store's checkpointer thread copies the log back,
the next write on the loop catches up what was written meanwhile, so the log starts over instead of
growing; every write stays committed and readable, by this store and by another on the same file."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from mnote_mcp.kernel.port import Command, Correlation
from mnote_mcp.kernel.sqlite.connection import CHECKPOINT_ROWS
from mnote_mcp.kernel.sqlite.opening import open_store

IDS = Correlation("sess_t", "run_t", "call_t", "trace_t")


def note(key: str) -> Command:
    return Command(
        "artifact.aiNote.create", "ws_1", "doc_1", "user_editor", IDS, key, False, {"content": f"note {key}"}
    )


def wal_frames(db: Path) -> int:
    """Pages in the log now (a passive checkpoint on a connection of its own reports them)."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        log: int = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
        return log
    finally:
        conn.close()


def wait_for(condition: object, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the checkpointer did not run"
        time.sleep(0.01)


def test_the_event_loop_connection_never_checkpoints_and_worker_threads_do(db: Path) -> None:
    store = open_store(db)
    try:
        with store.transaction(write=False, inline=True) as conn:
            assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        with store.transaction(write=False, inline=False) as conn:
            assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    finally:
        store.close()


def test_writes_on_the_loop_wake_the_checkpointer_and_the_log_starts_over(db: Path) -> None:
    store = open_store(db)
    checkpointer = store.dialect.database.checkpointer  # type: ignore[attr-defined]
    try:
        writes = 0
        while checkpointer.runs == 0:
            store.execute(note(f"k{writes}"), inline=True)
            writes += 1
            assert writes <= CHECKPOINT_ROWS, "no checkpoint after as many rows changed on the loop"
            if writes % 50 == 0:
                time.sleep(0.01)  # the thread's turn
        assert writes >= CHECKPOINT_ROWS // 10, "woken too early: fewer rows changed than the threshold"
        # the next write on the loop copies what was written meanwhile (unless the last one did)
        store.execute(note("catch_up"), inline=True)
        assert not checkpointer.catch_up
        store.execute(note("after"), inline=True)  # starts the log over
        assert wal_frames(db) < 50, "the log grew on instead of starting over"
    finally:
        store.close()
    assert checkpointer.runs >= 1


@pytest.mark.slow
def test_the_log_stays_bounded_under_sustained_writes_and_nothing_is_lost(db: Path) -> None:
    store = open_store(db)
    total = CHECKPOINT_ROWS * 2
    try:
        for n in range(total):
            store.execute(note(f"s{n}"), inline=True)
        # SQLite's own autocheckpoint would keep it near 1,000 pages; ours, every CHECKPOINT_ROWS changed
        # (four per note), about 5,000 pages plus what is written while a checkpoint runs; a log that
        # never started over would hold about ten pages per note
        assert wal_frames(db) < total * 5
    finally:
        store.close()
    other = sqlite3.connect(db)
    try:
        count = other.execute("SELECT count(*) FROM artifacts WHERE kind = 'ai_note'").fetchone()[0]
        audited = other.execute("SELECT count(*) FROM audit WHERE command_name = 'artifact.aiNote.create'")
        assert count == total and audited.fetchone()[0] == total
    finally:
        other.close()


def test_closing_the_store_ends_the_checkpointer_thread(db: Path) -> None:
    store = open_store(db)
    checkpointer = store.dialect.database.checkpointer  # type: ignore[attr-defined]
    checkpointer.wake()
    wait_for(lambda: checkpointer.runs >= 1)
    thread = checkpointer._thread
    store.close()
    assert thread is not None and not thread.is_alive()
    checkpointer.wake()  # after close: nothing starts again
    assert checkpointer._thread is thread and not thread.is_alive()
