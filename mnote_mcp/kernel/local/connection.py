"""Connections and transactions on the store file: one connection per thread, one transaction per call.

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
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.local.sql import Connection
from mnote_mcp.kernel.search import index_tokens

logger = logging.getLogger(__name__)

DEFAULT_BUSY_TIMEOUT = 30.0
# Above this many blocks, whole-page work (reading, rendering, diffing, replacing) moves off the event loop.
INLINE_BLOCKS = 2_000
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


class MoveToThread(Exception):  # noqa: N818 - a signal to the caller, not a failure
    """An inline call would have to wait for a lock, or has heavy work to do: run it on a thread."""


class StoreBusyError(MoveToThread):
    """The inline call would have to wait for another connection's lock."""


def is_busy(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and getattr(exc, "sqlite_errorcode", None) in _BUSY_CODES


def store_busy(timeout: float) -> MnoteError:
    return MnoteError(
        ErrorCode.RUNTIME_UNAVAILABLE,
        Reason.STORE_BUSY,
        {"adapter": "local", "cause": "store_busy", "busyTimeoutSeconds": timeout},
    )


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
        self.runs = 0  # checkpoints done (what tests look at)
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
        try:
            # Again while the last pass had much to copy: what was written during a long pass is
            # copied by a shorter one, so what is left for the loop's catch-up is small.
            copied = 0
            for _ in range(CHECKPOINT_PASSES):
                _, _, done = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                if done - copied < CATCH_UP_FRAMES:
                    break
                copied = done
        except sqlite3.Error:  # the store closing: the next waking retries
            logger.debug("checkpoint of %s skipped", self.path, exc_info=True)
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


class Database:
    """The store file: per-thread connections (WAL, `synchronous=NORMAL`) and transactions.

    One implementation of the `sql.Database` seam: a write transaction (`BEGIN IMMEDIATE`) holds the
    whole file, so page locks and seeding locks are already taken and nothing needs a retry.
    """

    dialect = "sqlite"

    def __init__(
        self, path: Path, *, busy_timeout: float = DEFAULT_BUSY_TIMEOUT, uri: str | None = None
    ) -> None:
        self.path = path
        self.uri = uri  # a read-only store is opened through a SQLite URI (`opening.read_only_uri`)
        self.busy_timeout = busy_timeout
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        # The search index's chunk -> page map, filled as searches meet chunks: a chunk never changes
        # page (chunk numbers only grow), so what is known stays true, whichever process wrote it.
        self.chunk_pages: dict[int, int] = {}
        self._lock = threading.Lock()
        self.checkpointer = Checkpointer(path, busy_timeout)

    def connection(self, inline: bool = False) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            # Each connection is only used by the thread that made it; close() may run elsewhere.
            conn = sqlite3.connect(
                self.uri or self.path,
                timeout=self.busy_timeout,
                isolation_level=None,
                check_same_thread=False,
                uri=self.uri is not None,
            )
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA synchronous = NORMAL")
            # the search index's triggers tokenize every title and block text they index
            conn.create_function("mnote_search_tokens", 1, index_tokens, deterministic=True)
            self._local.conn = conn
            self._local.inline = None
            self._local.woken_at = 0
            with self._lock:
                self._connections.append(conn)
        if self._local.inline != inline:
            conn.execute(f"PRAGMA busy_timeout = {0 if inline else int(self.busy_timeout * 1000)}")
            conn.execute(f"PRAGMA wal_autocheckpoint = {0 if inline else _AUTOCHECKPOINT}")
            self._local.inline = inline
        return conn

    @contextmanager
    def transaction(self, *, write: bool, inline: bool = False) -> Iterator[sqlite3.Connection]:
        """One transaction, committed when the block ends and rolled back if it raises.

        Inline, a lock held elsewhere raises `StoreBusyError` at once; otherwise SQLite waits up to the
        busy timeout and then the call fails as `store_busy` (retryable).
        """
        conn = self.connection(inline)
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        except sqlite3.OperationalError as exc:
            raise self._translate(exc, inline) from None
        try:
            yield conn
        except BaseException as exc:
            conn.execute("ROLLBACK")
            if is_busy(exc):
                raise self._translate(exc, inline) from None  # type: ignore[arg-type]
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
            if changed - self._local.woken_at >= CHECKPOINT_ROWS:
                self._local.woken_at = changed
                self.checkpointer.wake()

    def lock_page(self, conn: Connection, workspace_id: str, page_id: str) -> None:
        """Nothing to do: `BEGIN IMMEDIATE` keeps every other writer out already."""

    def serialize(self, conn: Connection, name: str) -> None:
        """Nothing to do: `BEGIN IMMEDIATE` keeps every other writer out already."""

    def retryable(self, exc: BaseException) -> bool:
        return False

    def dump(self) -> str:
        with self.transaction(write=False) as conn:
            return dump(conn)

    def _translate(self, exc: sqlite3.OperationalError, inline: bool) -> Exception:
        if not is_busy(exc):
            return exc
        return StoreBusyError() if inline else store_busy(self.busy_timeout)

    def close(self) -> None:
        self.checkpointer.close()
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()
