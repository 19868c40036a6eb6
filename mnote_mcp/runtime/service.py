"""Wire values in, kernel calls, wire values out: the part both reference runtimes share.

The HTTP app and the CLI adapter only differ in how a request arrives (a route and headers, or one
JSON document on stdin); what a request means is decided here, once, over any `Kernel`, by the
request's row of `protocol.OPERATIONS`.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, cast

from mnote_mcp.base.tracecontext import w3c_trace_id
from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.port import DEFAULT_AUDIT_LIMIT, MAX_INT64, AuditQuery, Command, CommandOutcome, Kernel
from mnote_mcp.kernel.protocol import Ans, Operation, Req, check_request
from mnote_mcp.runtime import faults

if TYPE_CHECKING:
    from pydantic import JsonValue

logger = logging.getLogger(__name__)


def invalid(pointer: str, reason: str) -> MnoteError:
    """A request that breaks the protocol, and where."""
    return MnoteError(ErrorCode.INVALID_ARGUMENT, Reason.ENVELOPE, {"pointer": pointer, "reason": reason})


def _check_trace(traceparent_trace_id: str | None, trace_id: str) -> None:
    """Tracing never refuses a command; a traceparent that disagrees with the envelope is logged."""
    if traceparent_trace_id is not None and traceparent_trace_id != w3c_trace_id(trace_id):
        logger.warning(
            "traceparent trace %s does not match envelope trace %s", traceparent_trace_id, trace_id
        )


def flat_fields(op: Operation[Req, Ans], source: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """The fields a flat request (`op.carrier` None) declares, from a CLI request or a query string;
    a required one that is missing is refused at its own pointer."""
    properties = op.request.schema.get("properties")
    names = list(properties) if isinstance(properties, dict) else []
    required = op.request.schema.get("required")
    for name in required if isinstance(required, list) else []:
        if name not in source:
            raise invalid(f"/{name}", "required")
    return {name: source[name] for name in names if name in source}


async def answer(
    op: Operation[Req, Ans],
    kernel: Kernel,
    value: JsonValue,
    *,
    where: str = "",
    idempotency_key: str | None = None,
    traceparent_trace_id: str | None = None,
    max_audit_records: int | None = None,
) -> JsonValue:
    """The wire answer to one request: checked against the operation's schema (refused with the
    pointer of the first problem, prefixed by `where`, the request's place in what arrived), read,
    run on `kernel`, written. `idempotency_key` is what an `Idempotency-Key` header said."""
    check_request(op.request.validator, value, where)
    request = op.request.decode(value)
    if op.key is not None and idempotency_key is not None and idempotency_key != op.key(request):
        raise invalid("/idempotencyKey", "differs from the Idempotency-Key header")
    if op.trace is not None:
        _check_trace(traceparent_trace_id, op.trace(request))
    request = _bounded(request, "limit" in value if isinstance(value, dict) else False, max_audit_records)
    result = await op.run(kernel, request)
    wrote = isinstance(result, CommandOutcome) and not result.replayed
    if wrote and isinstance(request, Command) and not request.dry_run:
        faults.after_commit(request.name)
    return op.answer.encode(result)


def _bounded(request: Req, asked: bool, max_records: int | None) -> Req:
    """An audit query asks for the newest `limit` records (100, or `max_records` if lower, when it
    does not say, `asked`); a `limit` over `max_records` is refused. Every other request is as it came."""
    if not isinstance(request, AuditQuery):
        return request
    most = max_records if max_records is not None else MAX_INT64
    if not asked:
        return cast(Req, replace(request, limit=min(DEFAULT_AUDIT_LIMIT, most)))
    if request.limit > most:
        raise invalid("/limit", f"at most {most} records (runtime serve --max-audit-records)")
    return request
