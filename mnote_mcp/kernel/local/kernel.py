"""The async face of the embedded store, as the kernel port.

A call runs inline on the event loop first, told neither to wait for locks nor to do heavy work: a
read of a page or an uncontended block edit takes well under a millisecond, less than handing it to a
thread would. When SQLite would have to wait (another connection or process holds the write lock), or
the call has a long page to read, render, diff or replace, it raises `MoveToThread` before doing that
work and is run again on a worker thread, so neither a contended write nor a big page stalls the event
loop (pings and other calls are answered meanwhile). A threaded call whose caller gave up (the per-call
timeout) is abandoned, not interrupted: its transaction still commits or rolls back whole, and the
idempotency ledger makes the caller's retry safe.

Writes on SQLite commit in groups (`group.py`): the writes that reach the kernel together share one
transaction, each command in a savepoint of its own, every caller answered after its `COMMIT`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import anyio.to_thread
from anyio import CapacityLimiter

from mnote_mcp.kernel.limits import PageLimits
from mnote_mcp.kernel.local.connection import DEFAULT_BUSY_TIMEOUT, MoveToThread
from mnote_mcp.kernel.local.group import GroupCommit
from mnote_mcp.kernel.local.pool import POOL_SIZE
from mnote_mcp.kernel.local.store import LocalStore
from mnote_mcp.kernel.port import (
    AuditRecord,
    Command,
    CommandOutcome,
    HistoryQuery,
    HistoryView,
    PageKey,
    PageQuery,
    PageRef,
    PageView,
    SearchQuery,
    SearchResult,
)
from mnote_mcp.kernel.scopes import Scope

T = TypeVar("T")

logger = logging.getLogger(__name__)


class LocalKernel:
    def __init__(self, store: LocalStore, *, max_threads: int = POOL_SIZE) -> None:
        self.store = store
        self._max_threads = max_threads
        self._limiter: CapacityLimiter | None = None
        # PostgreSQL runs every call on a thread, each write in its own transaction
        self._group = GroupCommit(store) if store.db.dialect == "sqlite" else None

    @classmethod
    def open(
        cls, path: str | Path, *, limits: PageLimits | None = None, busy_timeout: float = DEFAULT_BUSY_TIMEOUT
    ) -> LocalKernel:
        """Raises `StoreUnavailableError` (one line: the file and the cause) if it cannot be opened."""
        from mnote_mcp.kernel.local.opening import open_store

        return cls(open_store(path, limits=limits, busy_timeout=busy_timeout))

    @classmethod
    def open_seeded(
        cls,
        path: str | Path,
        *,
        seed: Path | None = None,
        demo: bool = True,
        limits: PageLimits | None = None,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        **options: Any,
    ) -> LocalKernel:
        """Open a store, loading `seed` into it, or the demo workspace if the store is new.

        What `serve` and `runtime serve` both do, so a first run of either has something to show.
        `options` go to `open` (a subclass's own, such as the PostgreSQL pool size).
        """
        kernel = cls.open(path, limits=limits, busy_timeout=busy_timeout, **options)
        try:
            if seed is not None or (kernel.store.created and demo):
                # only then: the fixture loader and its schema validator are no part of serving
                from mnote_mcp.kernel.local.fixtures import demo_fixture, load_fixture, read_fixture
            if seed is not None:
                load_fixture(kernel.store, read_fixture(seed))
            elif kernel.store.created and demo:
                load_fixture(kernel.store, demo_fixture())
                logger.info("new store %s seeded with the demo workspace", kernel.store.location)
        except BaseException:
            kernel.store.close()
            raise
        return kernel

    async def _run(self, call: Callable[..., T]) -> T:
        try:
            return call(inline=True)
        except MoveToThread:
            return await self._threaded(call)

    async def _threaded(self, call: Callable[..., T]) -> T:
        if self._limiter is None:
            self._limiter = CapacityLimiter(self._max_threads)
        return await anyio.to_thread.run_sync(
            partial(call, inline=False), limiter=self._limiter, abandon_on_cancel=True
        )

    async def get_page(self, query: PageQuery) -> PageView:
        return await self._run(partial(self.store.get_page, query))

    async def execute(self, command: Command) -> CommandOutcome:
        if self._group is None or command.dry_run:  # a dry run only reads
            return await self._run(partial(self.store.execute, command))
        done = await self._group.submit(command)
        if isinstance(done, MoveToThread):
            return await self._threaded(partial(self.store.execute, command))
        if isinstance(done, Exception):
            raise done
        return done

    async def authorize(self, actor_id: str, workspace_id: str, document_id: str, scope: Scope) -> None:
        await self._run(partial(self.store.check_access, workspace_id, document_id, actor_id, scope))

    async def list_pages(self, actor_id: str) -> list[PageRef]:
        return await self._run(partial(self.store.list_pages, actor_id))

    async def page_revisions(self, actor_id: str, pages: Sequence[PageKey]) -> dict[PageKey, int]:
        return await self._run(partial(self.store.page_revisions, actor_id, list(pages)))

    async def page_history(self, query: HistoryQuery) -> HistoryView:
        return await self._run(partial(self.store.page_history, query))

    async def search_pages(self, query: SearchQuery) -> SearchResult:
        return await self._run(partial(self.store.search_pages, query))

    async def audit_trail(
        self, *, trace_id: str | None = None, command_id: str | None = None, limit: int = 100
    ) -> list[AuditRecord]:
        return await self._run(
            partial(self.store.audit_trail, trace_id=trace_id, command_id=command_id, limit=limit)
        )

    async def aclose(self) -> None:
        self.store.close()
