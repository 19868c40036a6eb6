"""Sessions a proxy can route: the replica's tag (`--session-tag`) at the start of every session id.

A stateful streamable-HTTP session lives in one process (the SDK's `StreamableHTTPSessionManager`
keeps its transport, its server task, the negotiated protocol version and its GET stream in memory),
and so does a legacy `/sse` session. Behind a load balancer each of its requests must reach the
replica that made it. The request that opens a session carries no id (an `initialize`, a `GET /sse`)
and may go anywhere; every later one names the session, and the name says where it lives:

- streamable HTTP: the session id is `TAG.<32 hex digits>` (`Mcp-Session-Id`), so an nginx `map` on
  that header picks the replica (examples/nginx.postgres.conf);
- legacy SSE: the message path the server announces is `/messages/TAG/`, so a `location` does.

Why routing and not session state in the shared store: docs/decisions.md, "Sessions behind a load
balancer".
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from mnote_mcp.transports.asking import AskingTransport, MayAsk

MESSAGES_PATH = "/messages/"


def messages_path(tag: str | None) -> str:
    """Where a legacy SSE session posts its messages: `/messages/` or `/messages/TAG/`."""
    return MESSAGES_PATH if tag is None else f"{MESSAGES_PATH}{tag}/"


def tagged(tag: str, session_id: str) -> str:
    return f"{tag}.{session_id}"


class TaggedSessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, whose new sessions' ids start with `tag` (none: the SDK's own ids);
    with `may_ask` and JSON answers, its sessions' transports answer a call that may ask the person
    as an SSE stream (`transports/asking.py`)."""

    def __init__(
        self, *args: Any, tag: str | None = None, may_ask: MayAsk | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.tag = tag
        self.may_ask = may_ask

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        """The SDK admits the session (the cap, the owner) under its id; it is then filed under the
        tagged id, before the opening request is served, so the client only ever sees that one. Nothing
        awaits in between: no request can look the session up under the untagged id."""
        transport = self._admit_asking(requestor) if self._asks else super()._admit_session(requestor)
        if transport is None or self.tag is None:
            return transport
        untagged = transport.mcp_session_id
        assert untagged is not None
        session_id = tagged(self.tag, untagged)
        transport.mcp_session_id = session_id
        self._server_instances[session_id] = self._server_instances.pop(untagged)
        if untagged in self._session_owners:
            self._session_owners[session_id] = self._session_owners.pop(untagged)
        return transport

    @property
    def _asks(self) -> bool:
        return self.may_ask is not None and self.json_response and not self.stateless

    def _admit_asking(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        """The SDK's `_admit_session` (mcp 2.3), with an `AskingTransport`."""
        assert self.may_ask is not None
        if self.max_sessions is not None and len(self._server_instances) >= self.max_sessions:
            return None
        transport = AskingTransport(
            mcp_session_id=uuid4().hex,
            event_store=self.event_store,
            security_settings=self.security_settings,
            retry_interval=self.retry_interval,
            idle_timeout=self.session_idle_timeout,
            may_ask=self.may_ask,
        )
        session_id = transport.mcp_session_id
        assert session_id is not None
        if requestor is not None:
            self._session_owners[session_id] = requestor
        self._server_instances[session_id] = transport
        return transport
