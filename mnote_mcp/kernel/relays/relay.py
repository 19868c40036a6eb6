"""The kernel port relayed to a runtime: each method is one row of `protocol.OPERATIONS`.

`HttpKernel` and `CliKernel` only say how one request travels and how its reply comes back (`call`);
what a port method sends, and how its answer is checked and read, is the operation's. So both relays
send exactly the same request bodies, and a port method added to the table is one line here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from mnote_mcp.kernel import port
from mnote_mcp.kernel.protocol import (
    AUDIT_TRAIL,
    AUTHORIZE,
    EXECUTE,
    GET_PAGE,
    LIST_PAGES,
    PAGE_HISTORY,
    PAGE_REVISIONS,
    RECORD_REFUSAL,
    SEARCH_PAGES,
    Ans,
    Operation,
    Req,
)
from mnote_mcp.kernel.scopes import Scope


class Relay(ABC):
    """The port, over some transport of the runtime protocol."""

    @abstractmethod
    async def call(self, op: Operation[Req, Ans], request: Req) -> Ans:
        """Send `request` as `op` says and return its checked answer, or raise the runtime's refusal
        (`MnoteError`) or `runtime_unavailable`; never a transport exception, never half an answer."""

    async def get_page(self, query: port.PageQuery) -> port.PageView:
        return await self.call(GET_PAGE, query)

    async def execute(self, command: port.Command) -> port.CommandOutcome:
        return await self.call(EXECUTE, command)

    async def authorize(self, actor_id: str, workspace_id: str, document_id: str, scope: Scope) -> None:
        await self.call(AUTHORIZE, port.AuthorizeQuery(actor_id, workspace_id, document_id, scope))

    async def list_pages(self, query: port.PagesQuery) -> list[port.PageRef]:
        return await self.call(LIST_PAGES, query)

    async def page_revisions(self, actor_id: str, pages: Sequence[port.PageKey]) -> dict[port.PageKey, int]:
        return await self.call(PAGE_REVISIONS, port.RevisionsQuery(actor_id, tuple(pages)))

    async def page_history(self, query: port.HistoryQuery) -> port.HistoryView:
        return await self.call(PAGE_HISTORY, query)

    async def search_pages(self, query: port.SearchQuery) -> port.SearchResult:
        return await self.call(SEARCH_PAGES, query)

    async def audit_trail(
        self, *, trace_id: str | None = None, command_id: str | None = None, limit: int = 100
    ) -> list[port.AuditRecord]:
        return await self.call(AUDIT_TRAIL, port.AuditQuery(trace_id, command_id, limit))

    async def record_refusal(self, refusal: port.Refusal) -> port.AuditRecord:
        return await self.call(RECORD_REFUSAL, refusal)
