"""The async face of the store, as the kernel port: one class for every database.

Where a call runs is the dialect's to say (`Dialect.inline`). On SQLite a call runs inline on the event
loop first, told neither to wait for locks nor to do heavy work: a read of a page or an uncontended
block edit takes well under a millisecond, less than handing it to a thread would. When SQLite would
have to wait (another connection or process holds the write lock), or the call has a long page or a
heavy request to read, render, plan or diff (the rule is `bounds.py`'s, the same for every command),
it raises `MoveToThread` before doing that work and is run again on a worker thread, so neither a
contended write nor a big page stalls the event loop. Listings, searches, history and audit reads,
whose cost grows with what a caller may reach rather than with one page, always run on a worker
thread. On PostgreSQL every
call runs on a worker thread (a database round trip is I/O), at most `Dialect.threads` at once (as
many as its pool has connections, so a call never waits on the event loop for one); what expensive
calls (searches, listings, history) may hold of either is decided before they reach the kernel, by
one admission for every store (`mnote_mcp/calls/admission.py`). A threaded call whose caller gave up (the per-call timeout) is abandoned, not interrupted:
its transaction still commits or rolls back whole, and the idempotency ledger makes the retry safe.

Where the dialect says so (SQLite), writes commit in groups (`group.py`): the writes that reach the
kernel together share one transaction, each command in a savepoint of its own, every caller answered
after its `COMMIT`. Every store is a `PageChangeFeed` (`watch_changes`): the dialect's feed tells
listeners of page writes as they commit (SQLite: this process's, PostgreSQL: every replica's).

A process that answers one call and exits (`runtime cli`, started once per call of a `cli:` relay)
opens the kernel `one_call`: every call runs at once on the calling thread as it would on a worker
thread (`inline=False`: it may wait for locks and do heavy work), and a write is not grouped (there is
nothing to group it with). Its coroutines then never suspend, so they need no event loop
(`runtime/cli_adapter.py` drives them), and neither anyio nor the group commit is imported.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from mnote_mcp.kernel import port
from mnote_mcp.kernel.scopes import Scope
from mnote_mcp.kernel.store.dialect import MoveToThread
from mnote_mcp.kernel.store.figures import StoreFigures
from mnote_mcp.kernel.store.rows import FEW_IDS
from mnote_mcp.kernel.store.store import Store

if TYPE_CHECKING:  # (imported when first needed: a `one_call` kernel needs neither)
    from anyio import CapacityLimiter

    from mnote_mcp.kernel.store.group import GroupCommit

T = TypeVar("T")

logger = logging.getLogger(__name__)


class StoreKernel:
    """The kernel port over a `Store` (see the module)."""

    def __init__(self, store: Store, *, one_call: bool = False) -> None:
        self.store = store
        self._one_call = one_call
        self._inline = store.dialect.inline and not one_call
        self._max_threads = store.dialect.threads
        self._limiter: CapacityLimiter | None = None
        self._group: GroupCommit | None = None
        if store.dialect.group_commit and not one_call:
            from mnote_mcp.kernel.store.group import GroupCommit

            self._group = GroupCommit(store)

    async def _run(self, call: Callable[..., T]) -> T:
        if self._inline:
            try:
                return call(inline=True)
            except MoveToThread:
                pass
        return await self._threaded(call)

    async def _threaded(self, call: Callable[..., T]) -> T:
        if self._one_call:
            return call(inline=False)
        import anyio.to_thread

        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self._max_threads)
        return await anyio.to_thread.run_sync(
            partial(call, inline=False), limiter=self._limiter, abandon_on_cancel=True
        )

    async def get_page(self, query: port.PageQuery) -> port.PageView:
        return await self._run(partial(self.store.get_page, query))

    async def execute(self, command: port.Command) -> port.CommandOutcome:
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

    # Listings, searches, history and audit reads cost what the data a caller reaches costs (every
    # page it may read, every write of a run), not a small page: they never run on the event loop.

    async def list_pages(self, query: port.PagesQuery) -> list[port.PageRef]:
        return await self._threaded(partial(self.store.list_pages, query))

    async def page_revisions(self, actor_id: str, pages: Sequence[port.PageKey]) -> dict[port.PageKey, int]:
        asked = partial(self.store.page_revisions, actor_id, list(pages))
        return await (self._run(asked) if len(pages) <= FEW_IDS else self._threaded(asked))

    async def page_history(self, query: port.HistoryQuery) -> port.HistoryView:
        return await self._threaded(partial(self.store.page_history, query))

    async def search_pages(self, query: port.SearchQuery) -> port.SearchResult:
        return await self._threaded(partial(self.store.search_pages, query))

    async def audit_trail(
        self, *, trace_id: str | None = None, command_id: str | None = None, limit: int = 100
    ) -> list[port.AuditRecord]:
        return await self._threaded(
            partial(self.store.audit_trail, trace_id=trace_id, command_id=command_id, limit=limit)
        )

    async def record_refusal(self, refusal: port.Refusal) -> port.AuditRecord:
        """One audit record (a write transaction of its own, outside the group commit: it is rare)."""
        return await self._run(partial(self.store.record_refusal, refusal))

    def watch_changes(self, listener: port.PageChangeListener) -> Callable[[], None]:
        """`PageChangeFeed`: hear page writes as they commit (see the module)."""
        return self.store.dialect.feed.watch(listener)

    def store_figures(self) -> StoreFigures:
        """`figures.Measured`: the dialect's figures, for the metrics."""
        return self.store.dialect.figures()

    async def aclose(self) -> None:
        if self._inline or self._one_call:
            self.store.close()
        else:  # (closing a pool and a LISTEN connection waits for their threads)
            import anyio.to_thread

            await anyio.to_thread.run_sync(self.store.close)
