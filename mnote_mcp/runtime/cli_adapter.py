"""`mnote-mcp runtime cli`: a kernel behind the mnote-cli JSON protocol, one request per process.

Reads one JSON request from stdin, writes one JSON reply to stdout, exits 0. Stdout is this
program's protocol, so nothing else is ever printed there (logs go to stderr). A refusal, and a
request that breaks the protocol, are replies (`{"ok": false, "error": ...}`); only a failure to
answer at all (the store cannot be opened, a bug) exits non-zero, with the reason on stderr, which
the calling adapter reports as runtime_unavailable.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from typing import IO, Any

import anyio

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.port import Kernel
from mnote_mcp.kernel.protocol import (
    AUDIT_TRAIL,
    AUTHORIZE,
    CLI_REQUEST,
    EXECUTE,
    GET_PAGE,
    LIST_PAGES,
    PAGE_HISTORY,
    PAGE_REVISIONS,
    SEARCH_PAGES,
    check_request,
)
from mnote_mcp.runtime import faults, service
from mnote_mcp.tracecontext import trace_id_of

Op = Callable[[Kernel, dict[str, Any]], Awaitable[Any]]


async def _execute(kernel: Kernel, request: dict[str, Any]) -> Any:
    return await service.execute(
        kernel,
        request.get("command"),
        traceparent_trace_id=trace_id_of(request.get("traceparent")),
        where="/command",
    )


async def _get_page(kernel: Kernel, request: dict[str, Any]) -> Any:
    return await service.get_page(
        kernel,
        request.get("query"),
        traceparent_trace_id=trace_id_of(request.get("traceparent")),
        where="/query",
    )


async def _page_history(kernel: Kernel, request: dict[str, Any]) -> Any:
    return await service.page_history(
        kernel,
        request.get("query"),
        traceparent_trace_id=trace_id_of(request.get("traceparent")),
        where="/query",
    )


async def _search_pages(kernel: Kernel, request: dict[str, Any]) -> Any:
    return await service.search_pages(
        kernel,
        request.get("query"),
        traceparent_trace_id=trace_id_of(request.get("traceparent")),
        where="/query",
    )


async def _authorize(kernel: Kernel, request: dict[str, Any]) -> Any:
    return await service.authorize(kernel, request.get("query"), where="/query")


async def _list_pages(kernel: Kernel, request: dict[str, Any]) -> Any:
    return await service.list_pages(kernel, request.get("actorId"))


async def _page_revisions(kernel: Kernel, request: dict[str, Any]) -> Any:
    return await service.page_revisions(kernel, request.get("query"), where="/query")


async def _audit_trail(kernel: Kernel, request: dict[str, Any]) -> Any:
    query: dict[str, Any] = {k: request[k] for k in ("traceId", "commandId", "limit") if k in request}
    return await service.audit_trail(kernel, query)


OPS: dict[str, Op] = {
    EXECUTE.name: _execute,
    GET_PAGE.name: _get_page,
    AUTHORIZE.name: _authorize,
    LIST_PAGES.name: _list_pages,
    PAGE_REVISIONS.name: _page_revisions,
    PAGE_HISTORY.name: _page_history,
    SEARCH_PAGES.name: _search_pages,
    AUDIT_TRAIL.name: _audit_trail,
}


def parse_request(raw: bytes) -> tuple[Op, dict[str, Any]]:
    """The op and the request, or the protocol refusal (a reply, not a crash)."""
    try:
        request = json.loads(raw)
    except ValueError:
        raise MnoteError(
            ErrorCode.INVALID_ARGUMENT, Reason.ENVELOPE, {"pointer": "", "reason": "the request is not JSON"}
        ) from None
    check_request(CLI_REQUEST, request)
    op = OPS.get(request["op"])
    if op is None:
        raise MnoteError(
            ErrorCode.INVALID_ARGUMENT,
            Reason.ENVELOPE,
            {"pointer": "/op", "reason": f"unknown op; known: {', '.join(OPS)}"},
        )
    return op, request


def answer(open_kernel: Callable[[], Kernel], raw: bytes) -> dict[str, Any]:
    """The reply to one request. The kernel is opened only for a request worth answering."""
    try:
        op, request = parse_request(raw)
    except MnoteError as error:
        return {"ok": False, "error": error.to_wire()}
    kernel = open_kernel()

    async def run() -> dict[str, Any]:
        try:
            return {"ok": True, "value": await op(kernel, request)}
        except MnoteError as error:
            return {"ok": False, "error": error.to_wire()}
        finally:
            await kernel.aclose()

    return anyio.run(run)


def too_large(max_bytes: int) -> dict[str, Any]:
    """The reply to a request over `--max-body-bytes`: the caller's to fix (a smaller command, or a
    larger limit), so `invalid_argument`, as `runtime serve` answers a body over the same limit."""
    reason = f"the request is over {max_bytes} bytes (runtime cli --max-body-bytes)"
    error = MnoteError(ErrorCode.INVALID_ARGUMENT, Reason.ENVELOPE, {"pointer": "", "reason": reason})
    return {"ok": False, "error": error.to_wire()}


def main(
    open_kernel: Callable[[], Kernel],
    *,
    max_bytes: int,
    stdin: IO[bytes] | None = None,
    stdout: IO[str] | None = None,
) -> int:
    """Answer the request on stdin, read to at most `max_bytes` (one more byte tells a longer one)."""
    faults.warn_if_enabled()
    raw = (stdin or sys.stdin.buffer).read(max_bytes + 1)
    reply = too_large(max_bytes) if len(raw) > max_bytes else answer(open_kernel, raw)
    out = stdout or sys.stdout
    out.write(json.dumps(reply, ensure_ascii=False, separators=(",", ":")) + "\n")
    out.flush()
    return 0
