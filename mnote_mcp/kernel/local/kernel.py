"""The async face of the embedded store, as the kernel port.

SQLite calls run on worker threads so that a write waiting for another process's lock never stalls
the event loop (and with it every other call on the connection).
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path
from typing import Any

import anyio.to_thread
from anyio import CapacityLimiter

from mnote_mcp.kernel.local.store import LocalStore
from mnote_mcp.kernel.port import Command, CommandOutcome, PageQuery, PageRef

logger = logging.getLogger(__name__)


class LocalKernel:
    def __init__(self, store: LocalStore, *, max_threads: int = 8) -> None:
        self.store = store
        self._limiter = CapacityLimiter(max_threads)

    @classmethod
    def open(cls, path: str | Path) -> LocalKernel:
        return cls(LocalStore(path))

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

    async def get_page(self, query: PageQuery) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(self.store.get_page, query, limiter=self._limiter)

    async def execute(self, command: Command) -> CommandOutcome:
        return await anyio.to_thread.run_sync(self.store.execute, command, limiter=self._limiter)

    async def list_pages(self, actor_id: str) -> list[PageRef]:
        return await anyio.to_thread.run_sync(self.store.list_pages, actor_id, limiter=self._limiter)

    async def audit_trail(
        self, *, trace_id: str | None = None, command_id: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        call = partial(self.store.audit_trail, trace_id=trace_id, command_id=command_id, limit=limit)
        return await anyio.to_thread.run_sync(call, limiter=self._limiter)

    async def aclose(self) -> None:
        self.store.close()
