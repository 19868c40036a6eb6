"""SQLite connections do not leak with thread churn (issue 26, finding 2): worker threads come and go
(anyio's die after idling), and the store's connections are a bounded pool lent to one transaction at
a time, so open files stay flat; a process out of file descriptors answers a clean, retryable
`mnote_tool_runtime_unavailable` and recovers once descriptors are free; closing the store ends a
call waiting for another connection's lock instead of waiting out the busy timeout."""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.port import Command, Correlation, PagesQuery, SearchQuery
from mnote_mcp.kernel.sqlite.opening import open_store
from mnote_mcp.kernel.store.kernel import StoreKernel
from tests.support.helpers import ROOT, dump
from tests.support.timing import patience

IDS = Correlation("sess_t", "run_t", "call_t", "trace_t")
PROC_FD = Path("/proc/self/fd")
# What the pool may still open after a warm-up: its eight connections, two files each (the database and
# its write-ahead log; the shared-memory file is shared by the process).
MORE_FILES = 2 * 8
needs_proc = pytest.mark.skipif(not PROC_FD.is_dir(), reason="counts open files through /proc")


def open_files() -> int:
    return len(os.listdir(PROC_FD))


def search(text: str = "plan") -> SearchQuery:
    return SearchQuery("user_editor", IDS, query=text)


def note(key: str) -> Command:
    return Command(
        "artifact.aiNote.create", "ws_1", "doc_1", "user_editor", IDS, key, False, {"content": f"note {key}"}
    )


def in_threads(count: int, work: Callable[[int], object]) -> None:
    """`work(0..count-1)`, each on a thread of its own that ends when its call does."""
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            work(index)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=patience(60))
    assert not errors, errors


@needs_proc
def test_threads_that_come_and_go_leave_no_connections_open(db: Path) -> None:
    """Two hundred threads, eight at a time, each searching and writing once and then ending: the
    files open afterwards are at most those of the pool (on the old code: a connection, two files, per
    thread, never closed: 384 more files)."""
    store = open_store(db)
    try:

        def burst(round_: int) -> None:
            def work(index: int) -> None:
                store.search_pages(search(), inline=False)
                store.execute(note(f"k{round_}_{index}"), inline=False)

            in_threads(8, work)

        burst(0)
        warm = open_files()
        for round_ in range(1, 25):
            burst(round_)
        assert open_files() <= warm + MORE_FILES, f"{open_files() - warm} more files after 192 threads"
    finally:
        store.close()


@needs_proc
def test_event_loops_whose_worker_threads_end_leave_no_connections_open(db: Path) -> None:
    """Through the async kernel: each `anyio.run` has worker threads of its own, ended with it (as
    anyio ends idle ones), and each round's threaded searches find the connections already open (on the
    old code: 360 more files after 30 rounds)."""
    store = open_store(db)

    async def round_() -> None:
        kernel = StoreKernel(store)  # (its thread limiter belongs to one event loop)
        async with anyio.create_task_group() as group:
            for _ in range(6):
                group.start_soon(kernel.search_pages, search())

    try:
        anyio.run(round_)
        warm = open_files()
        for _ in range(30):
            anyio.run(round_)
        assert open_files() <= warm + MORE_FILES, f"{open_files() - warm} more files after 30 event loops"
    finally:
        store.close()


def test_the_pool_lends_at_most_its_size_and_keeps_the_inline_connection_apart(db: Path) -> None:
    store = open_store(db)
    pool = store.dialect.database.pool  # type: ignore[attr-defined]
    try:
        in_threads(3 * pool.size, lambda index: store.search_pages(search(), inline=False))
        assert pool.open <= pool.size
        assert pool.lent == 0
        for inline, busy_ms in (
            (True, 0),
            (False, 100),
        ):  # (checkpoints: tests/unit/kernel/sqlite/test_connection.py)
            with store.transaction(write=False, inline=inline) as conn:
                assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == busy_ms
                assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    finally:
        store.close()
    assert pool.open == 0


def test_a_full_pool_makes_a_threaded_call_wait_for_a_connection_then_busy(db: Path) -> None:
    """Every connection lent: the next threaded transaction waits for one to come back, at most the
    busy timeout, then answers `store_busy` (retryable); the inline one is never waited for."""
    store = open_store(db, busy_timeout=0.3)
    pool = store.dialect.database.pool  # type: ignore[attr-defined]
    lent = [pool.lend() for _ in range(pool.size)]
    try:
        started = time.monotonic()
        with pytest.raises(MnoteError) as refused:
            store.search_pages(search(), inline=False)
        assert refused.value.reason is Reason.STORE_BUSY and refused.value.retryable
        assert time.monotonic() - started >= 0.25
        assert store.list_pages(PagesQuery("user_editor"), inline=True)  # the event loop's own connection
        back = threading.Timer(0.2, pool.give_back, args=(lent.pop(),))
        back.start()
        assert store.search_pages(search(), inline=False)["hits"] is not None  # waited for it
        back.join()
    finally:
        for conn in lent:
            pool.give_back(conn)
        store.close()


def test_closing_the_store_ends_a_call_waiting_for_the_lock(db: Path) -> None:
    """Another connection holds the write lock; a threaded write waits (busy timeout 30 s). Closing the
    store (the server stopping) ends the wait at once: the call answers `shutting_down`
    (retryable), its transaction never began, and the thread ends (an exit does not wait for it)."""
    before = dump(db)
    store = open_store(db, busy_timeout=30)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    outcome: list[BaseException | object] = []
    waiting = threading.Thread(target=lambda: _capture(outcome, lambda: store.execute(note("w"))))
    try:
        waiting.start()
        deadline = time.monotonic() + 10
        while store.dialect.database.pool.lent == 0 and time.monotonic() < deadline:  # type: ignore[attr-defined]
            time.sleep(0.01)  # the write has its connection: it is in BEGIN IMMEDIATE, waiting
        closed = time.monotonic()
        store.close()
        waiting.join(timeout=patience(10))
        assert not waiting.is_alive(), "the call still waits for the lock after the store closed"
        assert time.monotonic() - closed < 5
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    (error,) = outcome
    assert isinstance(error, MnoteError), error
    assert error.code is ErrorCode.RUNTIME_UNAVAILABLE and error.reason is Reason.SHUTTING_DOWN
    assert error.retryable
    assert dump(db) == before


def _capture(into: list[BaseException | object], work: Callable[[], object]) -> None:
    try:
        into.append(work())
    except BaseException as exc:
        into.append(exc)


@pytest.mark.slow
@needs_proc
def test_out_of_file_descriptors_searches_answer_retryable_and_recover(db: Path) -> None:
    """In a process limited to 64 files (`RLIMIT_NOFILE`), through the dispatcher: 40 event loops
    whose worker threads end (thread churn) all search fine; with every descriptor taken, a search that
    needs a new connection answers `mnote_tool_runtime_unavailable` (retryable, not internal); once
    descriptors are free, every search answers again. On the old code the churn itself ran the process
    out of descriptors, and every search after that answered `mnote_tool_internal`."""
    limit = 64

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    done = subprocess.run(
        [sys.executable, "-m", "tests.support.fd_limit", str(db), "40"],
        capture_output=True,
        text=True,
        timeout=patience(300),
        cwd=ROOT,
        preexec_fn=limited,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    phases = {}
    for line in done.stdout.splitlines():
        name, codes = json.loads(line)
        phases[name] = codes
    assert "churn" in phases, done.stderr[-3000:]
    assert set(phases["churn"]) == {"ok"}, phases["churn"]
    assert done.returncode == 0, done.stderr[-3000:]
    exhausted = phases["exhausted"]
    assert exhausted and set(exhausted) <= {"ok", "mnote_tool_runtime_unavailable:retryable"}, exhausted
    assert "mnote_tool_runtime_unavailable:retryable" in exhausted, "no search needed a new connection"
    assert set(phases["recovered"]) == {"ok"}, phases["recovered"]
