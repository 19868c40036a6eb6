"""`mnote-mcp runtime cli`: a kernel behind the mnote-cli JSON protocol, one request per process.

Reads one JSON request from stdin, writes one JSON reply to stdout, exits 0. Stdout is this
program's protocol, so nothing else is ever printed there (logs go to stderr). A refusal, and a
request that breaks the protocol, are replies (`{"ok": false, "error": ...}`); only a failure to
answer at all (the store cannot be opened, a bug) exits non-zero, with the reason on stderr, which
the calling adapter reports as runtime_unavailable.

The process answers one call, so it opens its kernel `one_call` (`kernel.store.kernel`): every call
runs at once on this thread, and the request's coroutine ends without ever suspending. It is driven
to its end here (`_to_the_end`) rather than on an event loop: `asyncio` and anyio, a large part of
what the process cost to start, are never imported (docs/runtime-protocol.md, "The reference runtime").
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Coroutine
from typing import IO, TYPE_CHECKING, Any, TypeVar

from mnote_mcp.base.tracecontext import trace_id_of
from mnote_mcp.kernel.errors import MnoteError
from mnote_mcp.kernel.port import JSONObject, Kernel
from mnote_mcp.kernel.protocol import CLI_REQUEST, OPERATIONS, Operation, check_request
from mnote_mcp.runtime import faults, service

if TYPE_CHECKING:
    from pydantic import JsonValue

T = TypeVar("T")


def parse_request(raw: bytes) -> tuple[Operation[Any, Any], JSONObject]:
    """The op and the request, or the protocol refusal (a reply, not a crash)."""
    try:
        request = json.loads(raw)
    except ValueError:
        raise service.invalid("", "the request is not JSON") from None
    check_request(CLI_REQUEST.validator, request)
    op = OPERATIONS.get(request["op"])
    if op is None:
        raise service.invalid("/op", f"unknown op; known: {', '.join(OPERATIONS)}")
    return op, request


async def _run(op: Operation[Any, Any], kernel: Kernel, request: JSONObject) -> JsonValue:
    """One request: the operation's part of it (under `op.carrier`, or its own fields), answered."""
    if op.carrier is None:
        return await service.answer(op, kernel, service.flat_fields(op, request))
    traceparent = request.get("traceparent")
    return await service.answer(
        op,
        kernel,
        request.get(op.carrier),
        where=f"/{op.carrier}",
        traceparent_trace_id=trace_id_of(traceparent if isinstance(traceparent, str) else None),
    )


def _to_the_end(coroutine: Coroutine[Any, Any, T]) -> T:
    """What `coroutine` returns, run without an event loop: it must never suspend (a `one_call`
    kernel's calls do not), and one that does is a bug, not a reply."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    coroutine.close()
    raise RuntimeError("the kernel suspended a call: runtime cli needs a kernel opened one_call")


def answer(open_kernel: Callable[[], Kernel], raw: bytes) -> JSONObject:
    """The reply to one request. The kernel is opened only for a request worth answering, by
    `open_kernel`, whose calls must answer at once (`open_kernel(..., one_call=True)`)."""
    try:
        op, request = parse_request(raw)
    except MnoteError as error:
        return {"ok": False, "error": error.to_wire()}
    kernel = open_kernel()

    async def run() -> JSONObject:
        try:
            return {"ok": True, "value": await _run(op, kernel, request)}
        except MnoteError as error:
            return {"ok": False, "error": error.to_wire()}
        finally:
            await kernel.aclose()

    return _to_the_end(run())


def too_large(max_bytes: int) -> JSONObject:
    """The reply to a request over `--max-body-bytes`: the caller's to fix (a smaller command, or a
    larger limit), so `invalid_argument`, as `runtime serve` answers a body over the same limit."""
    error = service.invalid("", f"the request is over {max_bytes} bytes (runtime cli --max-body-bytes)")
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
