"""Wire values in, kernel calls, wire values out: the part both reference runtimes share.

The HTTP app and the CLI adapter only differ in how a request arrives (a route and headers, or one
JSON document on stdin); what a request means is decided here, once, over any `Kernel`.
"""

from __future__ import annotations

import logging
from typing import Any

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.port import (
    Command,
    HistoryQuery,
    Kernel,
    PageKey,
    PageQuery,
    SearchQuery,
    revisions_to_wire,
)
from mnote_mcp.kernel.protocol import (
    AUDIT_QUERY,
    AUTHORIZE_QUERY,
    COMMAND,
    HISTORY_QUERY,
    PAGE_QUERY,
    PAGE_REVISIONS_QUERY,
    SEARCH_QUERY,
    check_request,
)
from mnote_mcp.kernel.scopes import Scope
from mnote_mcp.runtime import faults
from mnote_mcp.tracecontext import w3c_trace_id

logger = logging.getLogger(__name__)


def _check_trace(traceparent_trace_id: str | None, trace_id: str) -> None:
    """Tracing never refuses a command; a traceparent that disagrees with the envelope is logged."""
    if traceparent_trace_id is not None and traceparent_trace_id != w3c_trace_id(trace_id):
        logger.warning(
            "traceparent trace %s does not match envelope trace %s", traceparent_trace_id, trace_id
        )


async def execute(
    kernel: Kernel,
    envelope: Any,
    *,
    idempotency_key: str | None = None,
    traceparent_trace_id: str | None = None,
    where: str = "",
) -> dict[str, Any]:
    """`where` is the JSON pointer of the envelope in the request, for the refusal's pointer."""
    check_request(COMMAND, envelope, where)
    command = Command.from_wire(envelope)
    if idempotency_key is not None and idempotency_key != command.idempotency_key:
        raise MnoteError(
            ErrorCode.INVALID_ARGUMENT,
            Reason.ENVELOPE,
            {"pointer": "/idempotencyKey", "reason": "differs from the Idempotency-Key header"},
        )
    _check_trace(traceparent_trace_id, command.correlation.trace_id)
    outcome = await kernel.execute(command)
    if not command.dry_run and not outcome.replayed:
        faults.after_commit(command.name)
    return outcome.to_wire()


async def get_page(
    kernel: Kernel, query: Any, *, traceparent_trace_id: str | None = None, where: str = ""
) -> dict[str, Any]:
    check_request(PAGE_QUERY, query, where)
    page_query = PageQuery.from_wire(query)
    _check_trace(traceparent_trace_id, page_query.correlation.trace_id)
    return await kernel.get_page(page_query)


async def page_history(
    kernel: Kernel, query: Any, *, traceparent_trace_id: str | None = None, where: str = ""
) -> dict[str, Any]:
    check_request(HISTORY_QUERY, query, where)
    history_query = HistoryQuery.from_wire(query)
    _check_trace(traceparent_trace_id, history_query.correlation.trace_id)
    return await kernel.page_history(history_query)


async def search_pages(
    kernel: Kernel, query: Any, *, traceparent_trace_id: str | None = None, where: str = ""
) -> dict[str, Any]:
    check_request(SEARCH_QUERY, query, where)
    search_query = SearchQuery.from_wire(query)
    _check_trace(traceparent_trace_id, search_query.correlation.trace_id)
    return await kernel.search_pages(search_query)


async def authorize(kernel: Kernel, query: Any, *, where: str = "") -> bool:
    """True, or the refusal of the first checkpoint that fails."""
    check_request(AUTHORIZE_QUERY, query, where)
    await kernel.authorize(query["actorId"], query["workspaceId"], query["documentId"], Scope(query["scope"]))
    return True


async def list_pages(kernel: Kernel, actor_id: Any) -> list[dict[str, Any]]:
    if not isinstance(actor_id, str):
        raise MnoteError(
            ErrorCode.INVALID_ARGUMENT, Reason.ENVELOPE, {"pointer": "/actorId", "reason": "required"}
        )
    return [ref.to_wire() for ref in await kernel.list_pages(actor_id)]


async def page_revisions(kernel: Kernel, query: Any, *, where: str = "") -> list[dict[str, Any]]:
    check_request(PAGE_REVISIONS_QUERY, query, where)
    keys = [PageKey.from_wire(item) for item in query["pages"]]
    return revisions_to_wire(await kernel.page_revisions(query["actorId"], keys))


async def audit_trail(
    kernel: Kernel, query: dict[str, Any], *, max_records: int | None = None
) -> list[dict[str, Any]]:
    """The newest `limit` records (100, or `max_records` if lower, by default); a `limit` over
    `max_records` is refused."""
    check_request(AUDIT_QUERY, query)
    most = max_records if max_records is not None else 2**63 - 1
    limit = query.get("limit", min(100, most))
    if limit > most:
        reason = f"at most {most} records (runtime serve --max-audit-records)"
        raise MnoteError(ErrorCode.INVALID_ARGUMENT, Reason.ENVELOPE, {"pointer": "/limit", "reason": reason})
    return await kernel.audit_trail(
        trace_id=query.get("traceId"), command_id=query.get("commandId"), limit=limit
    )
