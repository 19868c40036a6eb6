"""Every use of the MCP SDK's private names, in this one module.

The SDK (mcp 2.3) keeps some things this server needs private: which streamable-HTTP sessions are
open and who owns each (the session caps count them, a reload of the tokens file ends a revoked
token's sessions), the hook where a new session is admitted (`--session-tag` renames it there) and
the transport it is given (`transports/asking.py`'s, which answers a call that may ask as a stream), and
the client connection a request's `ServerSession` wraps (a handshake-era resource subscription
belongs to the connection, which outlives the request). Everything else in the package reaches them
through the names below, so an SDK upgrade that moves one breaks this module alone, and
`tests/unit/base/test_sdkadapter.py` (which drives each of them on a real session manager and a real
connection) says which. uvicorn's internals are a separate matter: `base/httpguard.py` and
`base/httplisten.py` subclass them, and pyproject.toml pins uvicorn's minor version for that.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any
from uuid import uuid4

from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.connection import Connection
from mcp.server.session import ServerSession
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager


class SessionManager(StreamableHTTPSessionManager):
    """The SDK's streamable-HTTP session manager, with its registry of sessions readable, a session
    ended the SDK's own way, and `admitted` called for each new session before its opening request
    is served."""

    def session_count(self) -> int:
        """Sessions open now (the SDK forgets one when it ends, is deleted or times out idle)."""
        return len(self._server_instances)

    def session_owners(self) -> dict[str, Hashable]:
        """Each owned session's id and its owner's subject (the token's digest; sessions opened
        without authentication have no owner and are not listed)."""
        return {session_id: owner["subject"] for session_id, owner in self._session_owners.items()}

    async def end_session(self, session_id: str) -> None:
        """End a session as the SDK does when its client deletes it: forgotten at once (its id
        answers 404), its transport terminated."""
        transport = self._server_instances.get(session_id)
        if transport is not None:
            await self._discard_session(session_id, transport)

    def rename_session(self, transport: StreamableHTTPServerTransport, session_id: str) -> None:
        """File a session admitted a moment ago under another id (with its owner), before anything
        has looked it up: the client only ever sees `session_id`."""
        old = transport.mcp_session_id
        assert old is not None
        transport.mcp_session_id = session_id
        self._server_instances[session_id] = self._server_instances.pop(old)
        if old in self._session_owners:
            self._session_owners[session_id] = self._session_owners.pop(old)

    def admitted(self, transport: StreamableHTTPServerTransport) -> None:
        """A new session's transport, registered and not yet serving its opening request; nothing
        awaits between the two. Subclasses override it."""

    def new_transport(self, **sdk: Any) -> StreamableHTTPServerTransport:
        """A new session's transport, from the arguments the SDK builds its own with. Subclasses
        build their own kind (`transports/asking.py`)."""
        return StreamableHTTPServerTransport(**sdk)

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        # The SDK's own (mcp 2.3), with the transport from `new_transport` and `admitted` told.
        if self.max_sessions is not None and len(self._server_instances) >= self.max_sessions:
            return None
        transport = self.new_transport(
            mcp_session_id=uuid4().hex,
            is_json_response_enabled=self.json_response,
            event_store=self.event_store,
            security_settings=self.security_settings,
            retry_interval=self.retry_interval,
            idle_timeout=self.session_idle_timeout,
        )
        session_id = transport.mcp_session_id
        assert session_id is not None
        if requestor is not None:
            self._session_owners[session_id] = requestor
        self._server_instances[session_id] = transport
        self.admitted(transport)
        return transport


def connection_of(session: ServerSession) -> Connection:
    """The client connection a request's session wraps. The SDK builds a new `ServerSession` for every
    request and keeps the connection private; the connection is what outlives the request."""
    return session._connection
