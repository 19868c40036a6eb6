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
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext, suppress
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool, PoolTimeout

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.store.sql import Cursor

DEFAULT_POOL_SIZE = 8
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


def unavailable(cause: str, timeout: float) -> MnoteError:
    return MnoteError(
        ErrorCode.RUNTIME_UNAVAILABLE,
        Reason.STORE_BUSY,
        {"adapter": "postgres", "cause": cause, "busyTimeoutSeconds": timeout},
    )


class PgDatabase:
    """One PostgreSQL database behind a pool of `pool_size` connections."""

    dialect = "postgresql"

    def __init__(
        self,
        url: str,
        *,
        busy_timeout: float = 30.0,
        pool_size: int = DEFAULT_POOL_SIZE,
        open_timeout: float = 10.0,
        read_only: bool = False,
    ) -> None:
        self.url = url
        self.busy_timeout = busy_timeout
        self.read_only = read_only
        # One plain connection first: a database that cannot be reached fails here, at once, with
        # PostgreSQL's own reason (the pool would only retry quietly until its timeout).
        psycopg.connect(url, connect_timeout=int(open_timeout), autocommit=True).close()
        self.pool = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            configure=self._configure,
            timeout=busy_timeout,
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
        try:
            with self.pool.connection() as raw:
                yield raw
        except PoolTimeout:
            raise unavailable("store_busy", self.busy_timeout) from None
        except psycopg.OperationalError as exc:
            raise self._translate(exc) from None

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
