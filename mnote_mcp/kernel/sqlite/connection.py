"""Connections and transactions on the store file: connections lent from a pool, one transaction per call.

A call made on the event loop runs *inline*: it must neither wait for another connection's lock nor do
heavy work, so it raises `MoveToThread` instead and the async kernel repeats it on a worker thread,
where waiting is fine. A lock still held when the busy timeout runs out is the store being unavailable
(`mnote_tool_runtime_unavailable`, retryable), never an internal error.

Checkpoints (copying the write-ahead log back into the database file, and syncing both) are kept off
the event loop: SQLite runs one inside the `COMMIT` that crosses its threshold, about every hundredth
small write, and its two `fsync`s took 5-15 ms, during which no call in flight was answered. The
connection used on the event loop does not checkpoint (`wal_autocheckpoint = 0`); once its writes
have changed `CHECKPOINT_ROWS` rows it wakes the store's checkpointer thread, which runs a passive
checkpoint on a connection of its own (it waits for no reader or writer; the loop keeps writing).
The next write on the loop then copies the few pages written meanwhile (a small checkpoint of its
own, small `fsync`s), so the log is wholly copied and the write after it starts the log over
instead of growing it. Connections of worker threads keep SQLite's automatic checkpoint. Durability
is SQLite's, unchanged: a write is answered after its `COMMIT`, and a checkpoint only moves
committed pages.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mnote_mcp.kernel.sqlite.pool import (
    POOL_SIZE,
    ConnectionPool,
    cannot_open,
    cannot_open_file,
    interrupt,
    store_busy,
    store_closing,
)
from mnote_mcp.kernel.store.dialect import DEFAULT_BUSY_TIMEOUT, MoveToThread
from mnote_mcp.kernel.store.figures import StoreFigures

logger = logging.getLogger(__name__)

_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
# Rows the event loop's writes change between two wakings of the checkpointer: a small write changes
# four to ten rows and adds about ten pages to the log, a bulk one more rows than pages, so the log
# is copied back every five thousand pages or so (a log of 20-30 MB). Fewer, larger checkpoints cost
# less per write: most of a checkpoint is two fsyncs, and pages written many times are copied once
# (measured, 32 writes in flight: 1,000 rows 1,974 writes/s, 2,000 rows 2,043, 4,000 rows 2,062).
CHECKPOINT_ROWS = 2_000
# Passes of the checkpointer per waking at most, and the pages a pass copies below which it stops.
CHECKPOINT_PASSES = 4
CATCH_UP_FRAMES = 100
_AUTOCHECKPOINT = 1_000  # SQLite's default, for connections of worker threads
# How long a transaction on a worker thread lets SQLite wait for a lock before it looks whether the
# store is closing (then waits again, up to the busy timeout).
BUSY_SLICE = 0.1
# SQLite's own `lower` folds only ASCII: the page listing's prefix is folded by Python's (`Dialect.fold`).
FOLD = "casefold"


def _casefold(text: str | None) -> str | None:
    return text.casefold() if text is not None else None


class StoreBusyError(MoveToThread):
    """The inline call would have to wait for another connection's lock."""


def is_busy(exc: BaseException) -> bool:
    # the primary code: an extended one (SQLITE_BUSY_SNAPSHOT, 517) is a lock held elsewhere too
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, sqlite3.OperationalError) and code is not None and code & 0xFF in _BUSY_CODES


def dump(conn: sqlite3.Connection) -> str:
    """Every row of every table as SQL text (the schema, then `INSERT INTO "t" VALUES(...)` per row in
    rowid or key order). Like `iterdump`, but a virtual table (the contentless search index, which
    cannot be scanned) is left out: its shadow tables, which hold its content, are dumped."""
    lines = ["BEGIN TRANSACTION;"]
    tables = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
    ).fetchall()
    for name, sql in tables:
        lines.append(f"{sql};")
        if sql.upper().startswith("CREATE VIRTUAL TABLE"):
            continue
        ident = name.replace('"', '""')
        columns = [row[1] for row in conn.execute(f'PRAGMA table_info("{ident}")')]
        quoted = ",".join("'||quote(\"" + column.replace('"', '""') + "\")||'" for column in columns)
        lines += [
            row[0]
            for row in conn.execute(f"""SELECT 'INSERT INTO "{ident}" VALUES({quoted})' FROM "{ident}" """)
        ]
    lines += [
        f"{sql};"
        for (sql,) in conn.execute(
            "SELECT sql FROM sqlite_master WHERE type IN ('index', 'trigger', 'view') AND sql IS NOT NULL"
            " ORDER BY type, name"
        )
    ]
    lines.append("COMMIT;")
    return "\n".join(lines)


class Checkpointer:
    """A thread that checkpoints the store's write-ahead log when woken (see the module's text)."""

    def __init__(self, path: Path, busy_timeout: float) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self.runs = 0  # checkpoints done (what tests and the metrics look at)
        self.catch_ups = 0  # checkpoints by a write on the loop after one of those
        self.frames = 0  # log frames the last checkpoint found copied
        self.seconds = 0.0  # how long the last checkpoint took
        self.catch_up = False  # set when a checkpoint is done: the next write on the loop catches up
        self._wake = threading.Event()
        self._closing = False
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def wake(self) -> None:
        with self._lock:
            if self._closing:
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="mnote-checkpoint", daemon=True)
                self._thread.start()
        self._wake.set()

    def close(self) -> None:
        with self._lock:
            self._closing = True
            thread = self._thread
        self._wake.set()
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        conn = sqlite3.connect(
            self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._closing:
                    return
                self.checkpoint(conn)
        finally:
            conn.close()

    def checkpoint(self, conn: sqlite3.Connection) -> None:
        started = time.perf_counter()
        try:
            # Again while the last pass had much to copy: what was written during a long pass is
            # copied by a shorter one, so what is left for the loop's catch-up is small.
            copied = 0
            for _ in range(CHECKPOINT_PASSES):
                _, _, done = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                self.frames = done
                if done - copied < CATCH_UP_FRAMES:
                    break
                copied = done
        except sqlite3.Error:  # the store closing: the next waking retries
            logger.debug("checkpoint of %s skipped", self.path, exc_info=True)
        self.seconds = time.perf_counter() - started
        self.catch_up = True
        self.runs += 1  # after: who sees the run sees the catch-up due (or done by a write already)

    def catch_up_on(self, conn: sqlite3.Connection) -> None:
        """After the bulk: the few pages written meanwhile, copied by the writer (small fsyncs), so
        the log is wholly copied and the next write starts it over instead of growing it."""
        self.catch_up = False
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error:
            logger.debug("checkpoint of %s skipped", self.path, exc_info=True)
        self.catch_ups += 1


class Database:
    """The store file: connections (WAL, `synchronous=NORMAL`) and transactions (`dialect.py` makes
    it the SQLite dialect: a write transaction, `BEGIN IMMEDIATE`, holds the whole file).

    A transaction on the event loop (`inline`) uses the loop's own connection: it never waits for a
    lock (`busy_timeout = 0`) nor checkpoints (see the module's text). One on a worker thread borrows a
    connection from the pool (`pool.py`) for its duration. It waits for another connection's lock up
    to the busy timeout, a slice at a time (`BUSY_SLICE`, SQLite's own wait in between), so that
    closing the store ends the wait at once: SQLite's busy wait cannot be interrupted.
    """

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        uri: str | None = None,
        pool_size: int = POOL_SIZE,
    ) -> None:
        self.path = path
        self.uri = uri  # a read-only store is opened through a SQLite URI (`opening.read_only_uri`)
        self.busy_timeout = busy_timeout
        self.pool = ConnectionPool(self._connect, pool_size, busy_timeout)
        # The event loop's connection: used by one thread at a time (the lock is never waited for).
        self._inline: sqlite3.Connection | None = None
        self._inline_lock = threading.Lock()
        self._woken_at = 0  # the inline connection's total_changes when it last woke the checkpointer
        self.checkpointer = Checkpointer(path, busy_timeout)

    def _connect(self, inline: bool = False) -> sqlite3.Connection:
        # A connection is used by one thread at a time, not always the one that opened it.
        conn = sqlite3.connect(
            self.uri or self.path,
            timeout=0 if inline else min(BUSY_SLICE, self.busy_timeout),
            isolation_level=None,
            check_same_thread=False,
            uri=self.uri is not None,
        )
        try:
            conn.create_function(FOLD, 1, _casefold, deterministic=True)
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute(f"PRAGMA wal_autocheckpoint = {0 if inline else _AUTOCHECKPOINT}")
        except sqlite3.Error:
            conn.close()
            raise
        return conn

    @contextmanager
    def connection(self, deadline: float | None = None) -> Iterator[sqlite3.Connection]:
        """A pooled connection outside any transaction (opening the schema), for the block's duration;
        waited for until `deadline` (`time.monotonic()`, default: the busy timeout from now)."""
        conn = self.pool.lend(deadline)
        try:
            yield conn
        finally:
            self.pool.give_back(conn)

    @contextmanager
    def _lent(self, inline: bool, deadline: float) -> Iterator[sqlite3.Connection]:
        if not inline:
            try:
                conn = self.pool.lend(deadline)
            except sqlite3.OperationalError as exc:
                raise self._translate(exc, inline) from None
            try:
                yield conn
            finally:
                self.pool.give_back(conn)
            return
        if not self._inline_lock.acquire(blocking=False):
            raise StoreBusyError  # used on another thread (a second event loop): run this on a thread
        try:
            if self.pool.closing:
                raise store_closing()
            if self._inline is None:
                try:
                    self._inline = self._connect(inline=True)
                except sqlite3.Error:
                    raise StoreBusyError from None  # a thread answers, with a pooled connection or why not
            yield self._inline
        finally:
            if self.pool.closing and self._inline is not None:
                self._inline.close()
                self._inline = None
            self._inline_lock.release()

    def wait_for(self, conn: sqlite3.Connection, statement: str, deadline: float) -> None:
        """Run `statement`, waiting for another connection's lock until `deadline` (a slice at a time,
        each SQLite's own busy wait) unless the store closes meanwhile."""
        while True:
            try:
                conn.execute(statement)
                return
            except sqlite3.OperationalError as exc:
                if not is_busy(exc):
                    raise
                if self.pool.closing:
                    raise store_closing() from None
                if time.monotonic() >= deadline:
                    raise store_busy(self.busy_timeout) from None

    @contextmanager
    def transaction(self, *, write: bool, inline: bool = False) -> Iterator[sqlite3.Connection]:
        """One transaction, committed when the block ends and rolled back if it raises.

        Inline, a lock held elsewhere raises `StoreBusyError` at once; otherwise SQLite waits up to the
        busy timeout and then the call fails as `store_busy` (retryable).
        """
        deadline = time.monotonic() + self.busy_timeout
        with self._lent(inline, deadline) as conn:
            try:
                if inline:
                    conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                else:
                    self.wait_for(conn, "BEGIN IMMEDIATE" if write else "BEGIN", deadline)
            except sqlite3.OperationalError as exc:
                raise self._translate(exc, inline) from None
            try:
                yield conn
            except BaseException as exc:
                if conn.in_transaction:  # (an interrupted or failed write may have rolled back already)
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.OperationalError):
                    raise self._translate(exc, inline) from None
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise self._translate(exc, inline) from None
            if write and inline:
                if self.checkpointer.catch_up:
                    self.checkpointer.catch_up_on(conn)
                changed = conn.total_changes
                if changed - self._woken_at >= CHECKPOINT_ROWS:
                    self._woken_at = changed
                    self.checkpointer.wake()

    def dump(self) -> str:
        with self.transaction(write=False) as conn:
            return dump(conn)

    def figures(self) -> StoreFigures:
        """The pool's counts and the checkpoints' (the automatic checkpoints of worker threads'
        connections are SQLite's own and not counted), read without touching the store."""
        idle, lent, waiting = self.pool.counts()
        try:
            wal_bytes = os.stat(f"{self.path}-wal").st_size
        except OSError:  # no log (yet, or the store is closed)
            wal_bytes = 0
        checkpointer = self.checkpointer
        return StoreFigures(
            database="sqlite",
            pool_size=self.pool.size,
            pool_idle=idle,
            pool_in_use=lent,
            pool_waiting=waiting,
            pool_timeouts=self.pool.timeouts,
            checkpoints=checkpointer.runs,
            catch_ups=checkpointer.catch_ups,
            checkpoint_frames=checkpointer.frames,
            checkpoint_seconds=checkpointer.seconds,
            wal_bytes=wal_bytes,
        )

    def _translate(self, exc: sqlite3.OperationalError, inline: bool) -> Exception:
        """A lock held elsewhere, the store closing, a file that cannot be opened (out of file
        descriptors): retryable refusals, not internal errors. Anything else stands."""
        if is_busy(exc):
            return StoreBusyError() if inline else store_busy(self.busy_timeout)
        if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_INTERRUPT and self.pool.closing:
            return store_closing()
        if cannot_open_file(exc):
            if inline:
                return StoreBusyError()
            self.pool.warn_cannot_open(exc)
            return cannot_open()
        return exc

    def close(self) -> None:
        """Close every connection; a transaction still running stops (see `pool.py`)."""
        self.checkpointer.close()
        self.pool.close()
        if self._inline_lock.acquire(blocking=False):
            try:
                if self._inline is not None:
                    self._inline.close()
                    self._inline = None
            finally:
                self._inline_lock.release()
        elif (inline := self._inline) is not None:
            interrupt(inline)  # in use on another thread, which closes it when done
