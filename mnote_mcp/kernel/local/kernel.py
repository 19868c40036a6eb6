"""The async face of the embedded store, as the kernel port.

A call runs inline on the event loop first, told not to wait for locks: a read of a page or an
uncontended write takes well under a millisecond, less than handing it to a thread would. Only when
SQLite would have to wait (another connection or process holds the write lock) does the call move to
a worker thread that waits, so a contended write never stalls the event loop. A threaded call whose
caller gave up (the per-call timeout) is abandoned, not interrupted: its transaction still commits or
rolls back whole, and the idempotency ledger makes the caller's retry safe.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import anyio.to_thread
from anyio import CapacityLimiter

from mnote_mcp.kernel.local.store import LocalStore, StoreBusyError
from mnote_mcp.kernel.port import Command, CommandOutcome, PageKey, PageQuery, PageRef
from mnote_mcp.kernel.scopes import Scope

T = TypeVar("T")

logger = logging.getLogger(__name__)


class LocalKernel:
    def __init__(self, store: LocalStore, *, max_threads: int = 8) -> None:
        self.store = store
        self._max_threads = max_threads
        self._limiter: CapacityLimiter | None = None

    @classmethod
    def open(cls, path: str | Path) -> LocalKernel:
        """Raises `StoreUnavailableError` (one line: the file and the cause) if it cannot be opened."""
        from mnote_mcp.kernel.local.opening import open_store

        return cls(open_store(path))

    @classmethod
    def open_seeded(cls, path: str | Path, *, seed: Path | None = None, demo: bool = True) -> LocalKernel:
        """Open a store, loading `seed` into it, or the demo workspace if the store is new.

        What `serve` and `runtime serve` both do, so a first run of either has something to show.
        """
        from mnote_mcp.kernel.local.fixtures import demo_fixture, load_fixture, read_fixture

        kernel = cls.open(path)
        try:
            if seed is not None:
                load_fixture(kernel.store, read_fixture(seed))
            elif kernel.store.created and demo:
                load_fixture(kernel.store, demo_fixture())
                logger.info("new store %s seeded with the demo workspace", path)
        except BaseException:
            kernel.store.close()
            raise
        return kernel

    async def _run(self, call: Callable[..., T]) -> T:
        try:
            return call(wait=False)
        except StoreBusyError:
            if self._limiter is None:
                self._limiter = CapacityLimiter(self._max_threads)
            return await anyio.to_thread.run_sync(
                partial(call, wait=True), limiter=self._limiter, abandon_on_cancel=True
            )

    async def get_page(self, query: PageQuery) -> dict[str, Any]:
        return await self._run(partial(self.store.get_page, query))

    async def execute(self, command: Command) -> CommandOutcome:
        return await self._run(partial(self.store.execute, command))

    async def authorize(self, actor_id: str, workspace_id: str, document_id: str, scope: Scope) -> None:
        await self._run(partial(self.store.check_access, workspace_id, document_id, actor_id, scope))

    async def list_pages(self, actor_id: str) -> list[PageRef]:
        return await self._run(partial(self.store.list_pages, actor_id))

    async def page_revisions(self, actor_id: str, pages: Sequence[PageKey]) -> dict[PageKey, int]:
        return await self._run(partial(self.store.page_revisions, actor_id, list(pages)))

    async def audit_trail(
        self, *, trace_id: str | None = None, command_id: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        return await self._run(
            partial(self.store.audit_trail, trace_id=trace_id, command_id=command_id, limit=limit)
        )

    async def aclose(self) -> None:
        self.store.close()
