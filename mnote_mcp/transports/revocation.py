"""A token's open streams end when the token does.

Every request is authenticated as it arrives, so a token taken out of the tokens file (or left without
the scope the endpoint needs) is refused from the next reload on; but a stream is one request that
lasts: a 2026-era `subscriptions/listen` stream, the GET stream of a streamable-HTTP session, a legacy
`/sse` stream. `OpenStreams` runs each of them in a cancel scope filed under the token that opened it
(its digest, the session owner), and after each reload of the tokens file (`TokensFileWatcher`) ends
those of every token no longer allowed: the response is finished cleanly (the last chunk of its
stream), so the client sees the stream end and its next request gets 401. Sessions of such a token are
the transport's to end (`transports/http.py`).

A token that expires (an OAuth access token: its `exp` plus `--oauth-leeway`, `CallerToken.expires_at`)
ends its streams the same way at that instant: the scope has it as its deadline (issue 30: they stayed
open past it, delivering nothing). The client's next request with it gets 401 `token expired`, and
with a fresh token it opens them again.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Hashable

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mnote_mcp.base.httpguard import plain

logger = logging.getLogger("mnote_mcp")


class OpenStreams:
    """The streams each token holds; `allowed(owner)` says whether a token may still hold them."""

    def __init__(self, allowed: Callable[[Hashable], bool]) -> None:
        self._allowed = allowed
        self._held: defaultdict[Hashable, set[anyio.CancelScope]] = defaultdict(set)

    def held(self, app: ASGIApp, owner: Hashable) -> ASGIApp:
        """`app` (a request that streams), ended when `owner` no longer may hold it."""

        async def stream(scope: Scope, receive: Receive, send: Send) -> None:
            await self.run(app, owner, scope, receive, send)

        return stream

    async def run(self, app: ASGIApp, owner: Hashable, scope: Scope, receive: Receive, send: Send) -> None:
        state = {"started": False, "complete": False}

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                state["complete"] = True
            await send(message)

        with anyio.CancelScope(deadline=_deadline(scope)) as cancel:
            self._held[owner].add(cancel)
            try:
                await app(scope, receive, sending)
            finally:
                self._forget(owner, cancel)
        if not cancel.cancelled_caught:
            return
        if anyio.current_time() >= cancel.deadline:  # its token's expiry, not `end_revoked`
            logger.info("ended a stream whose token expired")
        if not state["started"]:
            await plain(send, 401, "The token is no longer accepted")
        elif not state["complete"]:
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    def _forget(self, owner: Hashable, cancel: anyio.CancelScope) -> None:
        scopes = self._held.get(owner)
        if scopes is not None:
            scopes.discard(cancel)
            if not scopes:
                del self._held[owner]

    def end_revoked(self) -> None:
        """End the streams of every token no longer allowed."""
        for owner in [owner for owner in self._held if not self._allowed(owner)]:
            scopes = self._held[owner]
            logger.warning("ending %d stream(s) of a token no longer accepted", len(scopes))
            for cancel in scopes:
                cancel.cancel()


def _deadline(scope: Scope) -> float:
    """When the stream of this request must end: its token's expiry on the event loop's clock, or
    never (a token without one)."""
    user = scope.get("user")
    expires = user.access_token.expires_at if isinstance(user, AuthenticatedUser) else None
    if expires is None:
        return float("inf")
    return anyio.current_time() + max(0.0, expires - time.time())
