"""What one HTTP client may hold of a server: connections, time to send its headers and body, bytes.

Shared by both HTTP servers of the project, the MCP transport (`transports/http.py`, `serve
--transport http|sse`) and the reference runtime (`runtime/http_app.py`, `runtime serve`); each
declares the flags in `config.py` (docs/security.md lists them with their defaults):

- `--max-connections`: the server accepts no more connections than this (`base/httplisten.py`); at the
  cap, the connections that have waited longest for a request's headers (half-sent, never sent, or
  idle between requests) are closed to make room; if every connection is busy with a request, new
  ones wait in the kernel's accept queue until one ends. Half-sent requests and connection floods can
  neither use up file descriptors nor starve clients that do send requests.
- `--header-timeout`: from the moment a connection is accepted (or its previous response is
  complete) the client has this long to finish a request's headers; then it gets `408` and is closed.
  A request's line and headers are bounded (16 KiB, `400`) with either parser.
- `--body-timeout` and `--max-body-bytes`: an authenticated request's body is read whole, within
  this time and size, before anything else happens (`408` / `413`). Authentication comes first, from
  the headers alone: an unauthenticated request is refused without its body being read.
- Every refusal of a request whose body was not read closes the connection (`Connection: close`), so
  a client cannot keep trickling a body nobody will read.

The connection-level parts live in the protocol uvicorn runs for each connection (uvicorn has a
keep-alive timeout but no header timeout, and its `limit_concurrency` answers only once the headers
have arrived) and in the server that accepts them (`httplisten.GuardedServer`); the request-level
parts are ASGI middleware. Nothing here knows MCP.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from mnote_mcp.base.httplisten import Gate, unread_bytes

logger = logging.getLogger("mnote_mcp")

_TOO_SLOW = b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
CLOSE = (b"connection", b"close")


@dataclass(frozen=True, slots=True)
class ClientLimits:
    """A server's limits on one client (its flags and their defaults are declared in config.py)."""

    max_connections: int
    header_timeout: float
    max_body_bytes: int
    body_timeout: float
    http_parser: str = "httptools"


HEADER_BYTES = 16 * 1024  # h11's limit on a request's line and headers; the httptools guard keeps it


RefusalHook = Callable[[int, str], None]


def guarded_protocol(
    max_connections: int,
    header_timeout: float,
    parser: str = "httptools",
    on_refused: RefusalHook | None = None,
) -> type[Any]:
    """uvicorn's protocol for `parser` (httptools or h11) with a deadline for the headers and, with
    httptools, h11's 16 KiB bound on them; its `gate` caps the connections of the server that
    accepts them (`httplisten.GuardedServer`: uvicorn's own would accept without a cap).
    `on_refused(status, reason)` hears of each connection refused before a request was made of it:
    `header_timeout` (a request's headers, or a new connection's first, not sent in time; an idle
    keep-alive connection closed at its deadline is no refusal), `evicted` (closed to make room at the
    cap), `headers_too_large`."""
    base: type[_Guard] = _GuardedH11
    if parser == "httptools":
        try:
            base = _guarded_httptools()
        except ImportError:  # a dependency since issue 14; an environment installed before may lack it
            logger.warning("httptools is not installed: parsing HTTP with h11 (pip install httptools)")
    attributes = {
        "gate": Gate(max_connections),
        "header_timeout": header_timeout,
        "on_refused": staticmethod(on_refused) if on_refused is not None else None,
    }
    return type("GuardedProtocol", (base,), attributes)


class _Guard(asyncio.Protocol):
    """What both parsers' protocols get. A request's headers are complete when uvicorn has made its
    request-response cycle (both parsers do so then, and only then). The connection is counted by
    the server's `gate` from start to end, and waits in it (may be closed to make room) while its
    next request's headers are due."""

    gate: Gate
    header_timeout: float
    on_refused: RefusalHook | None
    # uvicorn's protocol attributes this relies on
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    cycle: Any

    _header_timer: asyncio.TimerHandle | None = None
    _armed_cycle: Any = None
    _fd = -1
    _started = False  # some of the awaited request's bytes have arrived

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        self._fd = sock.fileno() if sock is not None else -1
        self.gate.started(self, self._fd)
        super().connection_made(transport)
        self._arm(fresh=True)

    def unread(self) -> int:
        return unread_bytes(self._fd) if self._fd >= 0 else 0

    def evict(self) -> None:
        self._headers_too_slow("evicted")

    def _arm(self, *, fresh: bool = False) -> None:
        self._disarm()
        self._armed_cycle = self.cycle
        self._started = False
        self._header_timer = self.loop.call_later(self.header_timeout, self._headers_too_slow)
        self.gate.wait(self, fresh=fresh)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
            self.gate.busy(self)

    def _headers_too_slow(self, reason: str = "header_timeout") -> None:
        idle = self._armed_cycle is not None and not self._started  # between two requests
        self._disarm()
        if not self.transport.is_closing():
            self.transport.write(_TOO_SLOW)
            self.transport.close()
            if self.on_refused is not None and (reason == "evicted" or not idle):
                self.on_refused(408, reason)

    def _check_headers(self) -> None:
        """Disarm once a request's headers are complete: a cycle made since the deadline was set, or
        one still being answered (httptools parses a pipelined request's headers ahead)."""
        cycle = self.cycle
        if (
            self._header_timer is not None
            and cycle is not None
            and (cycle is not self._armed_cycle or not cycle.response_complete)
        ):
            self._disarm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._check_headers()
        if self._header_timer is not None:
            self._started = True

    def _response_complete(self, then: Callable[[], None]) -> None:
        if not self.transport.is_closing():
            self._arm()  # the next request's headers get the same deadline
        then()
        self._check_headers()  # a pipelined request may be under way now

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)
        self.gate.ended(self)


class _GuardedH11(_Guard, H11Protocol):
    def on_response_complete(self) -> None:
        self._response_complete(super().on_response_complete)


class _HeadersTooLargeError(Exception):
    pass


def _guarded_httptools() -> type[_Guard]:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class _GuardedHttpTools(_Guard, HttpToolsProtocol):
        """h11 bounds a request's line and headers (16 KiB, answered 400 and closed); httptools does
        not, so the guard counts them: raising in a parser callback makes uvicorn answer 400 and close."""

        _header_bytes = 0

        def on_message_begin(self) -> None:
            self._header_bytes = 0
            super().on_message_begin()

        def _count(self, size: int) -> None:
            self._header_bytes += size
            if self._header_bytes > HEADER_BYTES:
                if self.on_refused is not None:
                    self.on_refused(400, "headers_too_large")
                raise _HeadersTooLargeError

        def on_url(self, url: bytes) -> None:
            self._count(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._count(len(name) + len(value) + 4)
            super().on_header(name, value)

        def on_response_complete(self) -> None:
            self._response_complete(super().on_response_complete)

    return _GuardedHttpTools


class CloseUnreadBodies:
    """Outermost: a response of status 400 or more to a request whose body was not read whole says
    `Connection: close`, so the connection ends with the refusal instead of waiting for the body."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        read = [b"content-length" not in headers and b"transfer-encoding" not in headers]

        async def receiving() -> Message:
            message = await receive()
            if message["type"] == "http.request" and not message.get("more_body", False):
                read[0] = True
            return message

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] >= 400 and not read[0]:
                message = {**message, "headers": [*message.get("headers", []), CLOSE]}
            await send(message)

        await self.app(scope, receiving, sending)


class ReadBody:
    """Reads a request's body whole, within `timeout` seconds and `max_bytes`, before the endpoint
    runs (`408` / `413` otherwise), then hands it on. Placed after authentication. `too_large`
    answers a body over the limit when a protocol has its own error form (plain text otherwise)."""

    def __init__(
        self, app: ASGIApp, *, max_bytes: int, timeout: float, too_large: ASGIApp | None = None
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.too_large = too_large

    async def _refuse_too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.too_large is None:
            await plain(send, 413, "Request body too large")
        else:
            await self.too_large(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "DELETE", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"0")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse_too_large(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        with anyio.move_on_after(self.timeout) as deadline:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                body = message.get("body", b"")
                size += len(body)
                if size > self.max_bytes:
                    await self._refuse_too_large(scope, receive, send)
                    return
                chunks.append(body)
                if not message.get("more_body", False):
                    break
        if deadline.cancelled_caught:
            await plain(send, 408, "Request body too slow")
            return
        pending: deque[Message] = deque(
            [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]
        )

        async def replay() -> Message:
            return pending.popleft() if pending else await receive()

        await self.app(scope, replay, send)


async def respond(
    send: Send, status: int, content_type: bytes, body: bytes, *headers: tuple[bytes, bytes]
) -> None:
    """A whole short answer that no app wrote (a refusal before or instead of the app): one place
    that sets its type and length, so none of them can leave either out."""
    start = [(b"content-type", content_type), (b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": body})


async def plain(send: Send, status: int, text: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await respond(send, status, b"text/plain; charset=utf-8", text.encode(), CLOSE, *(headers or []))
