"""The MCP endpoints of the HTTP app: `/mcp` (streamable HTTP), `/sse` and its message path (the
legacy HTTP+SSE transport), each under the session and stream caps, and the end of what a token the
tokens file no longer accepts holds open.

What a request may hold is decided from its headers before it reaches the SDK: a `subscriptions/listen`
stream over the per-token cap is refused before its body is read, a handshake-era POST without a session
id opens a session only under the session caps, a GET is a session's stream (ended when its token is
revoked). The SDK's `StreamableHTTPSessionManager` (through `sdkadapter.SessionManager`) and
`SseServerTransport` do the rest.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Hashable
from typing import Any

from mcp.server import Server
from mcp.server.sse import SseServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Receive, Scope, Send

from mnote_mcp.base.httpguard import ReadBody
from mnote_mcp.base.sdkadapter import SessionManager
from mnote_mcp.config import ServerConfig
from mnote_mcp.transports.asking import MayAsk
from mnote_mcp.transports.limits import SessionCaps, owner_of
from mnote_mcp.transports.revocation import OpenStreams
from mnote_mcp.transports.sticky import TaggedSessionManager, messages_path

logger = logging.getLogger("mnote_mcp")


def session_manager(
    config: ServerConfig, server: Server[Any], security: TransportSecuritySettings, may_ask: MayAsk
) -> TaggedSessionManager:
    """The SDK's session manager for `/mcp`, as the configuration asks."""
    return TaggedSessionManager(
        app=server,
        tag=config.session_tag,
        stateless=config.stateless,
        # One JSON body per POST (the spec lets a server choose; clients must accept both): no SSE
        # stream, its task group and framing per call. The 2026 era's subscriptions/listen stays SSE,
        # and so does a 2025-era call that may have to ask the person (`transports/asking.py`).
        json_response=not config.sse_responses,
        may_ask=may_ask,
        security_settings=security,
        max_request_body_size=config.max_body_bytes,
        session_idle_timeout=config.session_idle_timeout,
        max_sessions=config.max_sessions,
    )


def sse_transport(config: ServerConfig, security: TransportSecuritySettings) -> SseServerTransport:
    """The SDK's legacy HTTP+SSE transport, posting to `/messages/` (or `/messages/TAG/`)."""
    return SseServerTransport(
        messages_path(config.session_tag),
        security_settings=security,
        max_request_body_size=config.max_body_bytes,
    )


def open_sessions(manager: SessionManager) -> Counter[Hashable]:
    """Open streamable-HTTP sessions per owner (the token digest; `None`: opened without a token)."""
    owners = manager.session_owners()
    counts: Counter[Hashable] = Counter(owners.values())
    if unowned := manager.session_count() - len(owners):
        counts[None] += unowned
    return counts


class Endpoints:
    """`/mcp`, `/sse` and the SSE message path, with the caps on sessions and listen streams."""

    def __init__(
        self,
        config: ServerConfig,
        server: Server[Any],
        manager: SessionManager,
        sse: SseServerTransport,
        may_stream: Callable[[Hashable], bool],
    ) -> None:
        self.stateless = config.stateless
        self.server = server
        self.manager = manager
        self.sse = sse
        self.may_stream = may_stream
        self.streams = OpenStreams(may_stream)
        self.caps = SessionCaps(
            per_token=config.max_sessions_per_token,
            total=config.max_sessions,
            open_sessions=lambda: open_sessions(manager),
        )
        self.listens = SessionCaps(
            per_token=config.max_listen_streams_per_token, total=None, what="listen streams"
        )
        self.max_body_bytes = config.max_body_bytes
        self.body_timeout = config.body_timeout
        self.streamable = self.read_body(StreamableHTTPASGIApp(manager))
        self.messages = self.read_body(sse.handle_post_message)

    def read_body(self, endpoint: ASGIApp) -> ASGIApp:
        """`endpoint` behind the body's limit and deadline (authentication comes before it)."""
        return ReadBody(endpoint, max_bytes=self.max_body_bytes, timeout=self.body_timeout)

    async def mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        if _opens_listen_stream(scope):  # from its headers: a stream refused is never read
            owner = owner_of(scope)
            if not await self.listens.refuse(owner, send):
                await self.listens.opening(
                    self.streams.held(self.streamable, owner), owner, scope, receive, send
                )
            return
        if scope["method"] == "GET":  # a session's stream
            await self.streams.run(self.streamable, owner_of(scope), scope, receive, send)
            return
        if self.stateless or not _opens_session(scope):
            await self.streamable(scope, receive, send)
            return
        owner = owner_of(scope)
        if not await self.caps.refuse(owner, send):
            await self.caps.opening(self.streamable, owner, scope, receive, send)

    async def sse_stream(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with self.sse.connect_sse(scope, receive, send) as (read_stream, write_stream):
            await self.server.run(read_stream, write_stream, self.server.create_initialization_options())

    async def sse_endpoint(self, scope: Scope, receive: Receive, send: Send) -> None:
        owner = owner_of(scope)
        if not await self.caps.refuse(owner, send):
            await self.caps.opening(self.streams.held(self.sse_stream, owner), owner, scope, receive, send)

    async def end_revoked(self) -> None:
        """After a reload of the tokens file: what tokens no longer allowed hold open is ended, their
        streams and their streamable-HTTP sessions."""
        self.streams.end_revoked()
        ended = [sid for sid, owner in self.manager.session_owners().items() if not self.may_stream(owner)]
        if ended:
            logger.warning("ending %d session(s) of tokens no longer accepted", len(ended))
        for session_id in ended:  # the SDK's own way to end one: forgotten (404), its transport ended
            await self.manager.end_session(session_id)


def _opens_listen_stream(scope: Scope) -> bool:
    """A 2026-era `subscriptions/listen` POST, known from its `Mcp-Method` header (the SDK refuses a
    request whose header and body disagree, so the header cannot hide a stream)."""
    if scope["method"] != "POST":
        return False
    return dict(scope["headers"]).get(b"mcp-method") == b"subscriptions/listen"


def _opens_session(scope: Scope) -> bool:
    """A handshake-era POST without a session id: it opens a session (the 2026 era has none)."""
    if scope["method"] != "POST":
        return False
    headers = dict(scope["headers"])
    version = headers.get(b"mcp-protocol-version")
    modern = version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS
    return b"mcp-session-id" not in headers and not modern
