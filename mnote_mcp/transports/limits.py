"""How many sessions and listen streams one token, and everyone together, may hold on the MCP HTTP
transport, and how many requests one actor may send.

- `--max-sessions-per-token` (`429`) and `--max-sessions` (`503`): how many stateful sessions (a
  streamable-HTTP session or a legacy SSE stream) one token, and everyone together, may hold open.
- `--max-listen-streams-per-token` (`429`): how many 2026-era `subscriptions/listen` streams one token
  may hold open (everyone's together are bounded by the connection cap: each holds a connection).
- `--request-limit` (`429` with `Retry-After`, `RequestLimit`): how many requests one actor may send,
  counted from the headers once the token is accepted, before any body is read (issue 32); a body
  announced counts one request more per 16 KiB (parsing it is the cost). Above
  what the call limits let through (`mnote_mcp/calls/fairshare.py`), so only a client that keeps sending
  after being told to wait meets it.

What a connection may hold below the session (connections, header and body deadlines, body size) is
`mnote_mcp/base/httpguard.py`, shared with the reference runtime's server.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Hashable

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from starlette.types import ASGIApp, Receive, Scope, Send

from mnote_mcp.base.httpguard import CLOSE, respond
from mnote_mcp.calls.fairshare import FairShare
from mnote_mcp.transports.auth.bearer import CallerToken

# Where a refusal made here names its reason for `observe.Refusals` (a 429 is otherwise a session cap's).
REFUSAL_REASON = "mnote.refusal_reason"
# A request body counts as one request more per this many bytes announced (`RequestLimit`), at most
# `MAX_BODY_WEIGHT` more: a whole 4 MiB page saved weighs a quarter of the default burst, not all of it.
REQUEST_BYTES = 16 * 1024
MAX_BODY_WEIGHT = 24


def owner_of(scope: Scope) -> Hashable:
    """Who a session belongs to: the token's digest (the SDK's session owner), or None without auth."""
    user = scope.get("user")
    return user.access_token.subject if isinstance(user, AuthenticatedUser) else None


class SessionCaps:
    """How many sessions one token (`per_token`, else `429`) and everyone (`total`, else `503`) hold.

    `open_sessions()` counts the streamable-HTTP sessions by owner (the SDK's own registry, which
    forgets a session when it ends, is deleted or times out idle); legacy SSE streams are counted
    here while they last; and a session being opened counts from the moment its request is let in.
    The same caps count listen streams (`what`), each while its request runs.
    """

    def __init__(
        self,
        *,
        per_token: int,
        total: int | None,
        open_sessions: Callable[[], Counter[Hashable]] = Counter,
        what: str = "sessions",
    ) -> None:
        self.per_token = per_token
        self.total = total
        self.what = what
        self._open_sessions = open_sessions
        self._held: Counter[Hashable] = Counter()

    def counts(self) -> Counter[Hashable]:
        counts = self._open_sessions()
        counts.update(self._held)
        return counts

    async def refuse(self, owner: Hashable, send: Send) -> bool:
        """Answer `429`/`503` and return True if `owner` may not open one more now (counted and logged
        with every refusal: `transports/observe.Refusals`)."""
        counts = self.counts()
        if counts[owner] >= self.per_token:
            await _jsonrpc_error(send, 429, f"Too many open {self.what} for this token", retry_after=5)
            return True
        if self.total is not None and sum(counts.values()) >= self.total:
            await _jsonrpc_error(send, 503, f"Too many open {self.what}", retry_after=5)
            return True
        return False

    async def opening(
        self, app: ASGIApp, owner: Hashable, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """Run `app` for a request that opens (or is) a session or stream, counted while it runs."""
        self._held[owner] += 1
        try:
            await app(scope, receive, send)
        finally:
            self._held[owner] -= 1
            if self._held[owner] <= 0:
                del self._held[owner]


def actor_of(scope: Scope) -> str | None:
    """The actor an accepted token acts as, or None (no authentication: the configured actor's)."""
    user = scope.get("user")
    token = user.access_token if isinstance(user, AuthenticatedUser) else None
    return token.actor_id if isinstance(token, CallerToken) else None


class RequestLimit:
    """`--request-limit`: an actor's requests over it are answered 429 with `Retry-After` (whole seconds,
    rounded up) from the headers, the connection closed with the body unread."""

    def __init__(self, fair: FairShare, fallback_actor: str | None) -> None:
        self.fair = fair
        self.fallback_actor = fallback_actor

    def __call__(self, endpoint: ASGIApp) -> ASGIApp:
        async def limited(scope: Scope, receive: Receive, send: Send) -> None:
            refused = self.fair.request(
                actor_of(scope) or self.fallback_actor,
                1 + min(MAX_BODY_WEIGHT, _announced(scope) // REQUEST_BYTES),
            )
            if refused is None:
                await endpoint(scope, receive, send)
                return
            scope[REFUSAL_REASON] = "rate_limited"
            wait = math.ceil(refused.retry_after)
            words = f"Too many requests for this actor ({refused.limit}): retry after {wait} s"
            await _jsonrpc_error(send, 429, words, retry_after=wait)

        return limited


def _announced(scope: Scope) -> int:
    """The body's size its `Content-Length` announces (0 when it announces none: chunked bodies are
    bounded by `--max-body-bytes` as they arrive)."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            return int(value) if value.isdigit() else 0
    return 0


async def _jsonrpc_error(send: Send, status: int, message: str, *, retry_after: int | None) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": message}}).encode()
    wait = [] if retry_after is None else [(b"retry-after", str(retry_after).encode())]
    await respond(send, status, b"application/json", body, CLOSE, *wait)
