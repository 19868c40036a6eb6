"""The meaningful request of each operation the kit knows: what `differential.<op>` asks.

Each probe asks one ordinary question (on pages no scenario writes, or the `probe` page, which only
these write) and leaves the judging to the comparison with the embedded kernel. An operation that is
not here gets a request filled in from its schema (`checks.filled_probe`).
"""

from __future__ import annotations

from mnote_mcp.conformance.checks import Probe
from mnote_mcp.conformance.seed import OTHER_PAGE, READ_PAGE, SECRET_PAGE
from mnote_mcp.conformance.session import Session
from mnote_mcp.kernel.port import (
    AuditQuery,
    AuditRecord,
    AuthorizeQuery,
    Command,
    CommandName,
    CommandOutcome,
    HistoryQuery,
    HistoryView,
    PageKey,
    PageQuery,
    PageRef,
    PageRevision,
    PagesQuery,
    PageView,
    Refusal,
    RevisionsQuery,
    SearchQuery,
    SearchResult,
)
from mnote_mcp.kernel.protocol import Operation
from mnote_mcp.kernel.scopes import Scope

PROBE_PAGE = "probe"


def _trace(s: Session) -> str:
    return f"kit_{s.scratch.tag}_{s.nonce}_probe"


async def execute(s: Session, op: Operation[Command, CommandOutcome]) -> str | None:
    command = s.command(
        CommandName.PAGE_BLOCK_INSERT,
        {"blocks": [{"type": "paragraph", "text": "Probed."}], "afterBlockId": "p_1"},
        PROBE_PAGE,
        "insert",
    )
    command = s.variant(command, correlation=s.correlation("call_probe", trace=_trace(s)))
    await s.call(op, command)
    return "a block inserted"


async def get_page(s: Session, op: Operation[PageQuery, PageView]) -> str | None:
    await s.call(op, s.query(READ_PAGE))
    return "a page read whole"


async def authorize(s: Session, op: Operation[AuthorizeQuery, None]) -> str | None:
    await s.call(op, AuthorizeQuery(s.actor("editor"), s.ws, READ_PAGE, Scope.PAGE_WRITE))
    return "an editor may write"


async def list_pages(s: Session, op: Operation[PagesQuery, list[PageRef]]) -> str | None:
    await s.call(op, PagesQuery(s.actor("stranger")))
    return "the pages of the other workspace"


async def page_revisions(s: Session, op: Operation[RevisionsQuery, list[PageRevision]]) -> str | None:
    pages = tuple(PageKey(s.ws, page) for page in (READ_PAGE, SECRET_PAGE, "missing"))
    await s.call(op, RevisionsQuery(s.actor("editor"), (*pages, PageKey(s.scratch.other_ws, OTHER_PAGE))))
    return "a readable page's revision; restricted, missing and foreign pages left out"


async def page_history(s: Session, op: Operation[HistoryQuery, HistoryView]) -> str | None:
    await s.call(op, HistoryQuery(s.ws, PROBE_PAGE, s.actor("editor"), s.correlation()))
    return "the probe page's history"


async def search_pages(s: Session, op: Operation[SearchQuery, SearchResult]) -> str | None:
    await s.call(op, SearchQuery(s.actor("stranger"), s.correlation(), "aurora"))
    return "a word in the other workspace"


async def audit_trail(s: Session, op: Operation[AuditQuery, list[AuditRecord]]) -> str | None:
    await s.call(op, AuditQuery(trace_id=_trace(s), limit=10))
    return "the probe's trace"


async def record_refusal(s: Session, op: Operation[Refusal, AuditRecord]) -> str | None:
    await s.call(op, s.refusal(PROBE_PAGE, "refused", trace=_trace(s)))
    return "a declined write audited"


PROBES: dict[str, Probe] = {
    "execute": execute,
    "get_page": get_page,
    "authorize": authorize,
    "list_pages": list_pages,
    "page_revisions": page_revisions,
    "page_history": page_history,
    "search_pages": search_pages,
    "audit_trail": audit_trail,
    "record_refusal": record_refusal,
}
