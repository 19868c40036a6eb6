"""What an operator sees of an HTTP server from outside: every refusal counted and logged, `/readyz`,
and the `/metrics` listener.

- `Refusals` watches every response of status 400 or more: it counts it (`mnote_http_refused_total`
  by status and reason, when metrics are served) and logs it, at most `burst` lines per reason a
  minute (`logs.Throttle`: a client retrying a bad token in a loop must not flood the log), saying the
  method, the path, the client's address and, for a 401 or 403, the reason the challenge gives (never
  the token: the challenge is ours and names none). Refusals made before a request exists (a header
  deadline, a connection closed to make room, headers too large) are reported by the connection's
  protocol to `refused` (`httpguard.guarded_protocol`'s `on_refused`).
- `Readiness` answers `/readyz`: the store's round trip (`Kernel.ready`), bounded by `--ready-timeout`,
  its answer kept `--ready-cache` seconds, at most one round trip in flight whatever the number of
  probes, so an unauthenticated probe costs almost nothing. Not ready while the server stops.
- `metrics_app` is the `/metrics` endpoint of the separate `--metrics-listen` listener, with the
  bearer token of `--metrics-token-file` when one is set (docs/decisions.md: why a listener of its own).
"""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
from anyio.abc import TaskGroup
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mnote_mcp.base.httpguard import plain
from mnote_mcp.base.logs import Throttle
from mnote_mcp.kernel.errors import MnoteError
from mnote_mcp.kernel.port import Kernel
from mnote_mcp.transports.limits import REFUSAL_REASON

logger = logging.getLogger("mnote_mcp")

# The reason word of a refusal, by status (a 404 of /mcp or /messages/ is a session the server does
# not hold: ended, timed out, or another replica's).
_REASONS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    405: "method_not_allowed",
    406: "not_acceptable",
    408: "body_timeout",
    413: "body_too_large",
    415: "unsupported_media_type",
    421: "misdirected",
    429: "too_many_for_token",
    503: "too_many",
}
# Logged at INFO (a client that reconnects after a restart meets it), every other refusal at WARNING.
_ROUTINE = frozenset({"unknown_session"})
# Paths whose status is their answer, not a refusal (`/readyz` says 503 while the store cannot serve).
_ANSWERS = frozenset({"/readyz", "/healthz"})
_CHALLENGE_REASON = re.compile(rb'error_description="([^"]{0,200})"')
_PATH_SHOWN = 120

RefusalCounter = Callable[[int, str], None]


def refusal_reason(status: int, path: str) -> str:
    if status == 404:
        return "unknown_session" if path == "/mcp" or path.startswith("/messages/") else "not_found"
    if status >= 500 and status != 503:
        return "server_error"
    return _REASONS.get(status, "other")


class Refusals:
    """Outermost ASGI middleware: every response of status 400 or more is counted and logged."""

    def __init__(self, app: ASGIApp, count: RefusalCounter | None = None, throttle: Throttle | None = None):
        self.app = app
        self.count = count
        self.throttle = throttle or Throttle()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in _ANSWERS:
            await self.app(scope, receive, send)
            return

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] >= 400:
                self.refused(scope, message)
            await send(message)

        await self.app(scope, receive, watched)

    def refused(self, scope: Scope, message: Message) -> None:
        status: int = message["status"]
        path: str = scope.get("path", "")
        reason = scope.get(REFUSAL_REASON) or refusal_reason(status, path)
        if self.count is not None:
            self.count(status, reason)
        logged, left_out = self.throttle.allow(reason)
        if not logged:
            return
        why = ""
        for name, value in message.get("headers", ()):
            if name.lower() == b"www-authenticate" and (found := _CHALLENGE_REASON.search(value)):
                why = ": " + found.group(1).decode("latin-1")
        client = scope.get("client")
        level = logging.INFO if reason in _ROUTINE else logging.WARNING
        logger.log(
            level,
            "refused %d %s: %s %s from %s%s%s",
            status,
            reason,
            scope.get("method", "?"),
            path[:_PATH_SHOWN] + ("..." if len(path) > _PATH_SHOWN else ""),
            client[0] if client else "?",
            why,
            f" ({left_out} more of these in the minute before, not logged)" if left_out else "",
        )


class ConnectionRefusals:
    """Refusals of a connection before any request (`httpguard`'s `on_refused`): counted and logged
    like `Refusals`' (a connection has no method or path yet)."""

    def __init__(self, count: RefusalCounter | None = None, throttle: Throttle | None = None):
        self.count = count
        self.throttle = throttle or Throttle()

    def __call__(self, status: int, reason: str) -> None:
        if self.count is not None:
            self.count(status, reason)
        logged, left_out = self.throttle.allow(reason)
        if logged:
            more = f" ({left_out} more of these in the minute before, not logged)" if left_out else ""
            logger.warning("refused %d %s: a connection closed before its request%s", status, reason, more)


class Readiness:
    """Whether the server can serve calls now: the store answers a round trip, and the server is not
    stopping. `check` raises `MnoteError` (or anything) when the store cannot serve."""

    def __init__(
        self,
        check: Callable[[], Awaitable[None]],
        *,
        timeout: float,
        cache: float,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.check = check
        self.timeout = timeout
        self.cache = cache
        self.stopping = stopping
        self.reason: str | None = "not_checked"  # why not ready at the last check, None when ready
        self.checked_at = -float("inf")
        self.check_seconds = 0.0
        self._done: anyio.Event | None = None  # set when the round trip in flight ends
        self._group: TaskGroup | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """While the app runs: round trips run as tasks of their own, so a probe that gives up (at
        `timeout`) leaves the one in flight to finish, and no second one starts meanwhile."""
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                yield
            finally:
                self._group = None
                group.cancel_scope.cancel()

    async def answer(self) -> str | None:
        """None when ready, else the reason (`shutting_down`, `timeout`, the store's cause)."""
        if self.stopping():
            return "shutting_down"
        if anyio.current_time() - self.checked_at < self.cache:
            return self.reason
        done = self._done
        if done is None:
            done = self._done = anyio.Event()
            if self._group is not None:
                self._group.start_soon(self._round_trip, done)
            else:  # (an app run without its lifespan: the probe runs it)
                await self._round_trip(done)
        with anyio.move_on_after(self.timeout):
            await done.wait()
            return self.reason
        self._record("timeout")  # the round trip goes on; its answer replaces this one
        return self.reason

    async def _round_trip(self, done: anyio.Event) -> None:
        started = anyio.current_time()
        reason: str | None = None
        try:
            with anyio.fail_after(self.timeout):
                await self.check()
        except TimeoutError:
            reason = "timeout"
        except MnoteError as error:
            reason = str(error.details.get("cause") or error.reason.value)
        except anyio.get_cancelled_exc_class():
            self._done = None  # the server stops: no answer
            done.set()
            raise
        except Exception:
            logger.exception("readiness check failed unexpectedly")
            reason = "error"
        self.check_seconds = anyio.current_time() - started
        self._done = None
        self._record(reason)
        done.set()

    def _record(self, reason: str | None) -> None:
        self.checked_at = anyio.current_time()
        if reason != self.reason:
            if reason is None:
                logger.info("ready: the store answers")
            else:
                logger.warning("not ready: %s (the store's round trip, %.2fs)", reason, self.check_seconds)
        self.reason = reason

    async def endpoint(self, request: Request) -> JSONResponse:
        reason = await self.answer()
        headers = {"Cache-Control": "no-store"}
        if reason is None:
            return JSONResponse({"status": "ready"}, headers=headers)
        return JSONResponse({"status": "unready", "reason": reason}, status_code=503, headers=headers)


async def store_round_trip(kernel: Kernel) -> None:
    """One round trip to the store through the kernel port: an indexed lookup that finds nothing."""
    await kernel.audit_trail(command_id="readiness-check", limit=1)


def metrics_app(metrics: ASGIApp, token: str | None) -> ASGIApp:
    """`/metrics` (prometheus_client's app: text or OpenMetrics as asked, gzip), nothing else; with a
    token, only for a request bearing it (compared in constant time)."""
    expected = f"Bearer {token}".encode() if token else None

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] != "/metrics" or scope["method"] not in ("GET", "HEAD"):
            await plain(send, 404, "Not Found")
            return
        if expected is not None:
            presented = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(presented, expected):
                await plain(send, 401, "A bearer token is needed", [(b"www-authenticate", b"Bearer")])
                return
        await metrics(scope, receive, send)

    return app
