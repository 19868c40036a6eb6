"""The kernel port on PostgreSQL: the embedded kernel's store and commands over a `PgDatabase`.

`PostgresStore` is a `LocalStore` whose database is PostgreSQL: every read, command, history query,
revert, ledger and audit record runs the same code as on SQLite (`kernel/local`), through the
`sql.Database` seam. `PostgresKernel` is the async port over it: every call runs on a worker thread
(a database round trip is I/O; nothing is ever run inline on the event loop), at most as many at
once as the pool has connections, so a call never waits on the event loop for a connection. A search
also takes one of fewer places, and an actor may have only so many searches in flight (`gate.py`),
so broad searches never hold every connection.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import TypeVar, cast

import anyio.to_thread
import psycopg
from anyio import CapacityLimiter

from mnote_mcp.kernel.blocks import body_summary
from mnote_mcp.kernel.errors import StoreUnavailableError
from mnote_mcp.kernel.limits import PageLimits
from mnote_mcp.kernel.local import access, rows
from mnote_mcp.kernel.local import search as local_search
from mnote_mcp.kernel.local.connection import DEFAULT_BUSY_TIMEOUT
from mnote_mcp.kernel.local.kernel import LocalKernel
from mnote_mcp.kernel.local.migrate import SchemaNotCurrentError
from mnote_mcp.kernel.local.pagecache import PageCache, stamp_of
from mnote_mcp.kernel.local.rows import WriteHook
from mnote_mcp.kernel.local.store import LocalStore
from mnote_mcp.kernel.policy import Scope
from mnote_mcp.kernel.port import PageChangeListener, PageQuery, PageView, SearchQuery, SearchResult
from mnote_mcp.kernel.postgres import search as pg_search
from mnote_mcp.kernel.postgres.database import DEFAULT_POOL_SIZE, PgDatabase, redact
from mnote_mcp.kernel.postgres.gate import SearchBounds, SearchGate, search_timeout
from mnote_mcp.kernel.postgres.notify import ChangeHub, notify_hook
from mnote_mcp.kernel.postgres.schema import Migration, SchemaTooNewError, check, migrate
from mnote_mcp.kernel.postgres.search import index_hook
from mnote_mcp.kernel.view import check_query, page_view

T = TypeVar("T")
logger = logging.getLogger(__name__)


class PostgresStore(LocalStore):
    """The kernel's synchronous core on one PostgreSQL database (see `LocalStore`).

    `read_only` (`audit`): the schema is checked, never created nor migrated (`schema.check`), and
    every connection's transactions are READ ONLY (`default_transaction_read_only`), so PostgreSQL
    itself refuses any write or DDL sent through this store. `search`: the bounds of searches
    (`gate.py`); the store applies the statement timeout, the kernel the places."""

    def __init__(
        self,
        url: str,
        *,
        limits: PageLimits | None = None,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        hooks: Iterable[WriteHook] = (),
        pool_size: int = DEFAULT_POOL_SIZE,
        read_only: bool = False,
        search: SearchBounds | None = None,
    ) -> None:
        self.url = url
        self.search = search or SearchBounds()
        self.location = redact(url)
        self.path = Path(self.location)
        self.limits = limits or PageLimits()
        self.page_cache = PageCache()
        # Every write that makes a revision keeps the search rows and tells the other replicas when it
        # commits (LISTEN/NOTIFY).
        self.write_hooks: list[WriteHook] = [*hooks, index_hook, notify_hook]
        self.pool_size = pool_size
        database = PgDatabase(url, busy_timeout=busy_timeout, pool_size=pool_size, read_only=read_only)
        try:
            opening = check if read_only else migrate
            self.migration: Migration = opening(database, location=self.location)
        except BaseException:
            database.close()
            raise
        if self.migration.applied:
            logger.info(
                "migrated %s to schema version %s (steps %s)",
                self.location,
                self.migration.after,
                self.migration.applied,
            )
        self.created = self.migration.created
        self.pg = database
        self.db = database

    def get_page(self, query: PageQuery, *, inline: bool = False) -> PageView:
        """A whole-page read in statements of their own, not a transaction (no `BEGIN`, no `COMMIT`):
        the checkpoints' query, and when the page cache holds the tree for the stamp its row carries
        (revision, block count, size), that is all: one statement. Otherwise the tree query, then the
        page's stamp again: unchanged, no write to the page committed between the first statement
        and the last (every write of a block makes a new revision, and revisions only grow), so the
        tree is that revision's; changed, the read runs again whole in one snapshot (as on SQLite)."""
        if not (query.include_blocks and query.block_ids is None):
            return super().get_page(query, inline=inline)
        check_query(query)
        with self.pg.autocommit() as conn:
            page = access.authorize(
                conn, query.workspace_id, query.document_id, query.actor_id, Scope.PAGE_READ
            )
            stamp = stamp_of(page)
            cached = self.page_cache.get(page.workspace_id, page.id, stamp)
            if cached is None:
                roots = rows.read_tree(conn, page.workspace_id, page.id)
                again = conn.execute(
                    "SELECT revision, block_count, byte_size FROM pages WHERE workspace_id = ? AND id = ?",
                    (page.workspace_id, page.id),
                ).fetchone()
                if again is not None and tuple(again) == stamp:
                    cached = roots, body_summary(roots)
                    self.page_cache.put(page.workspace_id, page.id, stamp, *cached)
        if cached is None:  # a write came between (its connection back in the pool first)
            return super().get_page(query, inline=inline)
        roots, summary = cached
        return page_view(
            query,
            title=page.title,
            options=page.options,
            revision=page.revision,
            roots=roots,
            summary=summary,
        )

    def search_pages(self, query: SearchQuery, *, inline: bool = False) -> SearchResult:
        """Search or list the pages the actor may read (`kernel/postgres/search.py`)."""
        segments = local_search.check(query)
        with self.transaction(write=False, inline=inline) as conn:
            # each statement of this transaction stops after the search timeout (until its COMMIT)
            milliseconds = max(1, round(self.search.timeout * 1000))
            conn.execute("SELECT set_config('statement_timeout', ?, true)", (str(milliseconds),))
            try:
                return cast(SearchResult, pg_search.search(conn, query, segments))
            except psycopg.errors.QueryCanceled:
                raise search_timeout(self.search.timeout) from None


def open_postgres_store(url: str, **options: object) -> PostgresStore:
    """The store in that database, migrated (unless `read_only`: see `PostgresStore`); raises
    `StoreUnavailableError` naming the cause."""
    try:
        return PostgresStore(url, **options)  # type: ignore[arg-type]
    except (SchemaTooNewError, SchemaNotCurrentError) as exc:
        raise StoreUnavailableError(redact(url), str(exc)) from None
    except Exception as exc:  # psycopg's connection failures, a pool that cannot open
        cause = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StoreUnavailableError(redact(url), cause) from None


class PostgresKernel(LocalKernel):
    """The kernel port over `PostgresStore`: every call on a worker thread."""

    store: PostgresStore

    def __init__(self, store: PostgresStore) -> None:
        super().__init__(store, max_threads=store.pool_size)
        self._hub: ChangeHub | None = None
        self.searches = SearchGate(store.search, store.pool_size)

    async def search_pages(self, query: SearchQuery) -> SearchResult:
        """A search holds a search place (fewer than the pool) besides its thread and connection,
        and waits for its actor's turn; one over the actor's bound is refused at once (`gate.py`)."""
        async with self.searches.admit(query.actor_id):
            return await super().search_pages(query)

    def watch_changes(self, listener: PageChangeListener) -> Callable[[], None]:
        """`PageChangeFeed`: hear every page write committed on the database, by any replica."""
        if self._hub is None:
            self._hub = ChangeHub(self.store.url)
        return self._hub.add(listener)

    async def aclose(self) -> None:
        if self._hub is not None:
            hub, self._hub = self._hub, None
            await anyio.to_thread.run_sync(hub.close)
        await super().aclose()

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        limits: PageLimits | None = None,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        pool_size: int = DEFAULT_POOL_SIZE,
        search: SearchBounds | None = None,
    ) -> PostgresKernel:
        return cls(
            open_postgres_store(
                str(path), limits=limits, busy_timeout=busy_timeout, pool_size=pool_size, search=search
            )
        )

    async def _run(self, call: Callable[..., T]) -> T:
        if self._limiter is None:
            self._limiter = CapacityLimiter(self._max_threads)
        return await anyio.to_thread.run_sync(
            partial(call, inline=False), limiter=self._limiter, abandon_on_cancel=True
        )
