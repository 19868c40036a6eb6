"""PostgreSQL's connections for the store: a psycopg 3 connection pool, transactions, the SQL dialect.

The kernel's commands are synchronous code that talks to its connection many times per call (rows by
id, neighbours, ancestors, the ledger, the history), so they run unchanged on worker threads over a
*synchronous* `psycopg_pool.ConnectionPool`, one pooled connection per transaction (see
docs/decisions.md). A connection is a `PgConnection`: the kernel's `?` placeholders become psycopg's
`%s`, and everything else of the SQL is already portable. `dialect.py` makes this the store's
PostgreSQL dialect (page locks, what to retry, the index, notifications).

Transactions: a write is READ COMMITTED and first locks its page's row (`SELECT ... FOR UPDATE`), so
writers of one page run one after the other and each reads what the previous one committed (the
revision, the blocks, the ledger); writers of different pages run side by side. A read (and a dry
run) is one REPEATABLE READ READ ONLY snapshot, so the page row and its blocks agree (a whole-page read
is the exception: statements of their own, `autocommit`, `Store.get_page`). The ledger's
primary key makes a key one operation across replicas: a write that collides with another replica's
concurrent commit of the same key fails on the key and is run again whole (`retryable`), and then the
ledger answers it (the replay, or the conflict). A lock still held after `busy_timeout` (PostgreSQL's
`lock_timeout`), a pool with no free connection for as long, or a database that cannot be reached are
`mnote_tool_runtime_unavailable` (retryable), never an internal error.

A write runs in psycopg's pipeline mode: a statement whose result nobody reads is sent and not waited
for, so `BEGIN`, the page lock and the checkpoints' query travel together, and the row, page, history,
search, notification, audit and ledger writes travel with the `COMMIT` (a one-block edit: 5 round trips,
not 14). A failed statement aborts the rest of the transaction as it always did; its error is raised at
the next result read or at the `COMMIT`, and the transaction is rolled back. A read stays outside the
pipeline (`BEGIN`, its queries, `COMMIT`): measured, the pipeline's own bookkeeping costs a 4-statement
read more than the one round trip it saves (docs/performance.md).
"""

from __future__ import annotations

import functools
import logging
import math
import re
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext, suppress
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool, PoolTimeout

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.store.dialect import DEFAULT_CONNECT_TIMEOUT
from mnote_mcp.kernel.store.sql import Cursor

logger = logging.getLogger(__name__)
DEFAULT_POOL_SIZE = 8
# A pooled connection idle longer than this is checked (one empty query) before it is lent: after a
# database restart every idle connection is dead, and the call that got one would fail.
CHECK_IDLE = 1.0
_TOKENS = re.compile(r"'(?:[^']|'')*'|\?|%|(?<![:\w]):([A-Za-z_]\w*)")
# A write that failed with one of these runs again whole (`PostgresDialect.retryable`).
RETRYABLE = (pg_errors.UniqueViolation, pg_errors.SerializationFailure, pg_errors.DeadlockDetected)
_BUSY = (pg_errors.LockNotAvailable, pg_errors.QueryCanceled)


def redact(url: str) -> str:
    """The URL without its password, for logs and messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))


@functools.lru_cache(maxsize=1024)
def translate(sql: str) -> str:
    """The kernel's SQL with psycopg's placeholders: `?` becomes `%s` and `:name` becomes `%(name)s`
    (not inside a string literal, and not a `::` cast), and every `%` becomes `%%` (psycopg reads `%`
    as a placeholder everywhere, literals included)."""

    def one(match: re.Match[str]) -> str:
        token = match.group(0)
        if match.group(1) is not None:
            return f"%({match.group(1)})s"
        return "%s" if token == "?" else token.replace("%", "%%")

    return _TOKENS.sub(one, sql)


class PgConnection:
    """A psycopg connection as the kernel's `sql.Connection`."""

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw

    def execute(self, sql: str, parameters: Sequence[Any] | Mapping[str, Any] = (), /) -> Cursor:
        params = parameters if isinstance(parameters, Mapping) else tuple(parameters)
        return self.raw.execute(translate(sql), params)

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> None:
        rows = [tuple(row) for row in parameters]
        if len(rows) == 1:  # (a one-block edit's: one statement costs less than psycopg's batch)
            self.raw.execute(translate(sql), rows[0])
        elif rows:
            with self.raw.cursor() as cursor:
                cursor.executemany(translate(sql), rows)


def unavailable(cause: Literal["store_busy", "store_unreachable"], timeout: float) -> MnoteError:
    """Retryable; the reason is the cause, so what counts answers by reason (`mnote_tool_calls_total`)
    tells a database that is down from a busy one."""
    return MnoteError(
        ErrorCode.RUNTIME_UNAVAILABLE,
        Reason(cause),
        {"adapter": "postgres", "cause": cause, "busyTimeoutSeconds": timeout},
    )


class Outage:
    """Whether the database can be reached, known from the last connection that failed and a direct
    connection attempt (`reachable`, bounded by `timeout`): one at a time, and the calls that asked
    while it was made share its answer (no answer older than the question is reused)."""

    def __init__(self, url: str, timeout: float) -> None:
        self.url = url
        self.timeout = timeout
        self.down_since: float | None = None  # when a connection to it last failed, until one works
        self._lock = threading.Lock()
        self._probe_started = -math.inf
        self._probe_ok = True

    def failed(self) -> None:
        if self.down_since is None:
            self.down_since = time.monotonic()
            logger.warning("PostgreSQL cannot be reached: calls answer store_unreachable until it can")

    def reachable(self) -> bool:
        asked = time.monotonic()
        with self._lock:
            if self._probe_started < asked:  # no attempt began since this question: make one
                self._probe_started = time.monotonic()
                try:
                    psycopg.connect(self.url, connect_timeout=_libpq_timeout(self.timeout)).close()
                    self._probe_ok = True
                except psycopg.Error:
                    self._probe_ok = False
            if self._probe_ok:
                self.down_since = None
            else:
                self.failed()
            return self._probe_ok


def _libpq_timeout(seconds: float) -> int:
    """libpq's `connect_timeout` is whole seconds, and less than 2 means 2."""
    return max(2, math.ceil(seconds))


class PgDatabase:
    """One PostgreSQL database behind a pool of `pool_size` connections.

    A database that cannot be reached is answered `store_unreachable` within about `connect_timeout`
    (a direct connection attempt decides, `Outage`), never after the busy timeout; a database that is
    back is used at once: idle connections are checked before they are lent, and all of them once one
    is found dead (after a restart none of them works); the pool's own reconnection gives up after
    `connect_timeout` rather than backing off for minutes, so the next call opens a connection now."""

    dialect = "postgresql"

    def __init__(
        self,
        url: str,
        *,
        busy_timeout: float = 30.0,
        pool_size: int = DEFAULT_POOL_SIZE,
        open_timeout: float = 10.0,
        read_only: bool = False,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
        self.url = url
        self.busy_timeout = busy_timeout
        self.read_only = read_only
        self.connect_timeout = connect_timeout
        self.outage = Outage(url, connect_timeout)
        # When each pooled connection was last given back (worker threads share it: under a lock).
        self._returned: weakref.WeakKeyDictionary[psycopg.Connection[Any], float] = (
            weakref.WeakKeyDictionary()
        )
        self._returned_lock = threading.Lock()
        # One plain connection first: a database that cannot be reached fails here, at once, with
        # PostgreSQL's own reason (the pool would only retry quietly until its timeout).
        psycopg.connect(url, connect_timeout=int(open_timeout), autocommit=True).close()
        self.pool = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True, "connect_timeout": _libpq_timeout(connect_timeout)},
            configure=self._configure,
            timeout=busy_timeout,
            reconnect_timeout=connect_timeout,
            open=False,
            name="mnote",
        )
        self.pool.open(wait=True, timeout=open_timeout)

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(f"SET lock_timeout = {int(self.busy_timeout * 1000)}")
        conn.execute("SET application_name = 'mnote-mcp'")
        if self.read_only:  # every transaction READ ONLY: PostgreSQL refuses a write or DDL
            conn.execute("SET default_transaction_read_only = on")

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection (autocommit: transactions are opened explicitly)."""
        raw = self._lend()
        try:
            yield raw
        except psycopg.OperationalError as exc:
            raise self._translate(exc) from None
        finally:
            with self._returned_lock:
                self._returned[raw] = time.monotonic()
            self.pool.putconn(raw)

    def _lend(self) -> psycopg.Connection[Any]:
        """A connection that works, within the busy timeout while the pool is busy, or
        `store_unreachable` within about `connect_timeout` while the database cannot be reached."""
        deadline = time.monotonic() + self.busy_timeout
        while True:
            if self.outage.down_since is not None and not self._back():
                raise unavailable("store_unreachable", self.busy_timeout)
            wait = min(self.connect_timeout, deadline - time.monotonic())
            try:
                raw = self.pool.getconn(timeout=max(wait, 0.001))
            except PoolTimeout:
                if time.monotonic() >= deadline:
                    raise unavailable("store_busy", self.busy_timeout) from None
                if not self.outage.reachable():
                    raise unavailable("store_unreachable", self.busy_timeout) from None
                continue  # it answers: the pool is busy, wait on
            with self._returned_lock:
                returned = self._returned.get(raw, math.inf)
            if time.monotonic() - returned <= CHECK_IDLE or self._works(raw):
                return raw
            self.pool.putconn(raw)  # dead: discarded and replaced by the pool
            self.outage.failed()

    def _back(self) -> bool:
        """The database answers again (after a failure): drop the pooled connections that died."""
        if not self.outage.reachable():
            return False
        logger.info("PostgreSQL answers again")
        self.pool.check()
        return True

    @staticmethod
    def _works(raw: psycopg.Connection[Any]) -> bool:
        try:
            raw.execute("")
        except psycopg.Error:
            return False
        return True

    @contextmanager
    def transaction(self, *, write: bool, inline: bool = False) -> Iterator[PgConnection]:
        with self.connection() as raw:
            try:  # (a write pipelined: see the module)
                with raw.pipeline() if write else nullcontext() as pipeline:
                    try:
                        raw.execute("BEGIN" if write else "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                        yield PgConnection(raw)
                        raw.execute("COMMIT")
                    except psycopg.Error:
                        if pipeline is not None and not raw.broken:
                            # the statements queued after the failed one were skipped: collect their
                            # results here, so the pipeline ends clean (else psycopg logs them)
                            with suppress(psycopg.Error):
                                pipeline.sync()
                        raise
            except BaseException:
                if not raw.broken and raw.info.transaction_status != TransactionStatus.IDLE:
                    raw.execute("ROLLBACK")
                raise

    @contextmanager
    def autocommit(self) -> Iterator[PgConnection]:
        """A connection outside any transaction block: every statement runs in a snapshot of its own,
        taken when it starts (READ COMMITTED). Statements that must agree belong in `transaction`."""
        with self.connection() as raw:
            yield PgConnection(raw)

    def _translate(self, exc: psycopg.OperationalError) -> Exception:
        if isinstance(exc, _BUSY):
            return unavailable("store_busy", self.busy_timeout)
        if isinstance(exc, RETRYABLE):
            return exc
        self.outage.failed()
        return unavailable("store_unreachable", self.busy_timeout)

    def dump(self) -> str:
        """Every row of every table of the store, in a stable order (tests compare two dumps)."""
        lines: list[str] = []
        with self.transaction(write=False) as conn:
            tables = conn.execute(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name"
            ).fetchall()
            for (table,) in tables:
                rows = conn.execute(f'SELECT t::text FROM "{table}" t ORDER BY 1').fetchall()
                lines += [f'INSERT INTO "{table}" VALUES{row[0]};' for row in rows]
        return "\n".join(lines)

    def close(self) -> None:
        self.pool.close()
