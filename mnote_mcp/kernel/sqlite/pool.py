"""The store's connections for worker threads: a bounded pool, each connection lent to one transaction
at a time and given back when it ends.

Worker threads come and go: anyio ends one after ten idle seconds, and every event loop has threads of
its own. A connection kept per thread (a thread-local) was neither closed nor used again once its
thread ended: two files and up to 2 MB of page cache lost per thread, until the process ran out of file
descriptors and every call run on a thread failed, for good (issue 26: fds 32 -> 94 in a ten-minute
soak). Here at most `size` connections are open, whatever the threads; the idle ones wait for the next
transaction, newest first (its pages are the warmest).

A transaction that finds every connection lent waits for one to come back, within its busy timeout (it
would wait as long for the store's lock anyway); then it is `store_busy`, retryable. A connection that
cannot be opened (the process is out of file descriptors) fails that transaction as `store_unavailable`,
retryable (`Database`), and frees its slot: the next transaction tries again, so the store recovers
once descriptors are free.
`close` ends the pool: idle connections are closed at once, a lent one is interrupted (a running
statement stops and its transaction rolls back) and closed when given back; a transaction still
waiting for a connection or a lock answers `shutting_down` instead of waiting out its busy timeout,
so a stopping server never waits for another process's lock.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason

logger = logging.getLogger(__name__)

# Connections open at most: as many as the async kernel's worker threads (`StoreKernel`).
POOL_SIZE = 8
# At most one warning this often when connections cannot be opened (an attack must not flood the log).
_WARN_EVERY = 10.0


def store_busy(timeout: float) -> MnoteError:
    return MnoteError(
        ErrorCode.RUNTIME_UNAVAILABLE,
        Reason.STORE_BUSY,
        {"adapter": "local", "cause": "store_busy", "busyTimeoutSeconds": timeout},
    )


def store_closing() -> MnoteError:
    return MnoteError(
        ErrorCode.RUNTIME_UNAVAILABLE, Reason.SHUTTING_DOWN, {"adapter": "local", "cause": "shutting_down"}
    )


def cannot_open_file(exc: sqlite3.Error) -> bool:
    """SQLite could not open a file (the store, its log, a temporary file): out of file descriptors,
    most likely, on a store that did open before."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == sqlite3.SQLITE_CANTOPEN


def cannot_open() -> MnoteError:
    return MnoteError(
        ErrorCode.RUNTIME_UNAVAILABLE,
        Reason.STORE_UNAVAILABLE,
        {"adapter": "local", "cause": "cannot_open"},
    )


class ConnectionPool:
    """At most `size` connections made by `connect`, each lent to one caller at a time (thread-safe)."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], size: int, busy_timeout: float) -> None:
        self.size = size
        self.busy_timeout = busy_timeout
        self.closing = False
        self._connect = connect
        self._idle: list[sqlite3.Connection] = []
        self._lent: set[sqlite3.Connection] = set()
        self._opening = 0  # slots taken by connections being opened
        self._waiting = 0  # callers waiting for a connection to come back
        self.timeouts = 0  # waits that ran out (`store_busy`)
        self._changed = threading.Condition()
        self._warned = -_WARN_EVERY

    @property
    def open(self) -> int:
        """Connections open (idle or lent)."""
        with self._changed:
            return len(self._idle) + len(self._lent)

    @property
    def idle(self) -> int:
        with self._changed:
            return len(self._idle)

    @property
    def lent(self) -> int:
        with self._changed:
            return len(self._lent)

    def counts(self) -> tuple[int, int, int]:
        """(idle, lent, waiting) at one moment, for the metrics."""
        with self._changed:
            return len(self._idle), len(self._lent), self._waiting

    def lend(self, deadline: float | None = None) -> sqlite3.Connection:
        """An idle connection, or a new one while fewer than `size` are open; else wait for one to
        come back until `deadline` (`time.monotonic()`; default: the busy timeout from now)."""
        if deadline is None:
            deadline = time.monotonic() + self.busy_timeout
        with self._changed:
            while True:
                if self.closing:
                    raise store_closing()
                if self._idle:
                    conn = self._idle.pop()
                    self._lent.add(conn)
                    return conn
                if len(self._lent) + self._opening < self.size:
                    self._opening += 1
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    self.timeouts += 1
                    raise store_busy(self.busy_timeout)
                self._waiting += 1
                try:
                    self._changed.wait(left)
                finally:
                    self._waiting -= 1
        try:  # (what SQLite raises goes up: `Database` says what it means, in a call or at opening)
            conn = self._connect()
        finally:
            with self._changed:
                self._opening -= 1
                self._changed.notify()
        return self._take(conn)

    def _take(self, conn: sqlite3.Connection) -> sqlite3.Connection:
        """A connection just opened, lent (unless the pool closed meanwhile)."""
        with self._changed:
            if not self.closing:
                self._lent.add(conn)
                return conn
        conn.close()
        raise store_closing()

    def give_back(self, conn: sqlite3.Connection) -> None:
        usable = not conn.in_transaction or _rolled_back(conn)
        with self._changed:
            self._lent.discard(conn)
            keep = usable and not self.closing
            if keep:
                self._idle.append(conn)
            self._changed.notify()
        if not keep:
            conn.close()

    def close(self) -> None:
        with self._changed:
            self.closing = True
            idle, self._idle = self._idle, []
            lent = list(self._lent)
            self._changed.notify_all()
        for conn in lent:
            interrupt(conn)  # a running statement stops; the thread closes it when it gives it back
        for conn in idle:
            conn.close()

    def warn_cannot_open(self, exc: sqlite3.Error) -> None:
        """One warning line for the operator, at most every ten seconds."""
        now = time.monotonic()
        if now - self._warned >= _WARN_EVERY:
            self._warned = now
            logger.warning(
                "cannot open a connection to the store (%s): out of file descriptors? (ulimit -n)", exc
            )


def interrupt(conn: sqlite3.Connection) -> None:
    """Stop what `conn` runs on another thread (which may have closed it just now)."""
    with contextlib.suppress(sqlite3.ProgrammingError):
        conn.interrupt()


def _rolled_back(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("ROLLBACK")
        return True
    except sqlite3.Error:
        return False
