"""PostgreSQL as the store's database (`--db postgresql://…`): the `Dialect` of `kernel/store` over a
psycopg 3 pool, for any number of replicas on one database.

A write is READ COMMITTED and first locks its page's row (`lock_page`: writers of one page queue,
writers of different pages run side by side); a write that collides with another replica's commit of
the same idempotency key, a serialization failure or a deadlock runs again whole (`retryable`). A
whole-page read is statements of their own, not one snapshot (`statements`, `snapshot_reads` False:
the store checks the page's stamp again). Every call runs on a worker thread, at most as many at once
as the pool has connections (what expensive calls may hold of them is the admission's:
`mnote_mcp/calls/admission.py`). The index is
the folded-text table (`search.py`), notifications are LISTEN/NOTIFY (`notify.py`). Opening migrates
the schema under an advisory lock (`schema.py`), or, read-only, checks it and makes every transaction
READ ONLY, so PostgreSQL itself refuses any write or DDL sent through the store.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager

from mnote_mcp.kernel.postgres.bounds import SearchBounds
from mnote_mcp.kernel.postgres.database import DEFAULT_POOL_SIZE, RETRYABLE, PgDatabase, redact
from mnote_mcp.kernel.postgres.notify import NotifyFeed
from mnote_mcp.kernel.postgres.schema import Migration, check, migrate
from mnote_mcp.kernel.postgres.search import TextIndex
from mnote_mcp.kernel.store.dialect import DEFAULT_BUSY_TIMEOUT, DEFAULT_CONNECT_TIMEOUT
from mnote_mcp.kernel.store.figures import StoreFigures
from mnote_mcp.kernel.store.sql import Connection

logger = logging.getLogger(__name__)


class PostgresDialect:
    """The database at `url`, migrated (with `read_only`, checked: see the module); `search` bounds
    a search statement's time (`bounds.py`)."""

    name = "postgresql"
    inline = False
    group_commit = False
    snapshot_reads = False
    fold = "lower"  # folds by the database's locale (LC_CTYPE): Unicode in a UTF-8 one

    def __init__(
        self,
        url: str,
        *,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        pool_size: int = DEFAULT_POOL_SIZE,
        read_only: bool = False,
        search: SearchBounds | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
        self.url = url
        self.location = redact(url)
        self.threads = pool_size
        bounds = search or SearchBounds()
        self.index = TextIndex(bounds.timeout)
        self.feed = NotifyFeed(url)
        self.database = PgDatabase(
            url,
            busy_timeout=busy_timeout,
            pool_size=pool_size,
            read_only=read_only,
            connect_timeout=connect_timeout,
        )
        try:
            opening = check if read_only else migrate
            self.migration: Migration = opening(self.database, location=self.location)
        except BaseException:
            self.database.close()
            raise
        if self.migration.applied:
            logger.info(
                "migrated %s to schema version %s (steps %s)",
                self.location,
                self.migration.after,
                self.migration.applied,
            )
        self.created = self.migration.created

    def transaction(self, *, write: bool, inline: bool = False) -> AbstractContextManager[Connection]:
        return self.database.transaction(write=write)

    def statements(self, *, inline: bool = False) -> AbstractContextManager[Connection]:
        """Statements of their own, outside any transaction (each its own snapshot)."""
        return self.database.autocommit()

    def lock_page(self, conn: Connection, workspace_id: str, page_id: str) -> None:
        """Writers of one page wait for each other here, for at most the busy timeout."""
        conn.execute(
            "SELECT 1 FROM pages WHERE workspace_id = ? AND id = ? FOR UPDATE", (workspace_id, page_id)
        )

    def serialize(self, conn: Connection, name: str) -> None:
        """Transactions that serialize on `name` run one at a time (a transaction-scoped advisory lock)."""
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (f"mnote:{name}",))

    def retryable(self, exc: BaseException) -> bool:
        return isinstance(exc, RETRYABLE)

    def dump(self) -> str:
        return self.database.dump()

    def figures(self) -> StoreFigures:
        """The pool's (psycopg_pool's `get_stats`) and the outage's."""
        stats = self.database.pool.get_stats()
        return StoreFigures(
            database="postgresql",
            pool_size=stats["pool_max"],
            pool_idle=stats["pool_available"],
            pool_in_use=stats["pool_size"] - stats["pool_available"],
            pool_waiting=stats.get("requests_waiting", 0),
            pool_timeouts=stats.get("requests_errors", 0),
            connection_errors=stats.get("connections_errors", 0),
            connections_lost=stats.get("connections_lost", 0),
            unreachable=self.database.outage.down_since is not None,
        )

    def close(self) -> None:
        self.database.close()
