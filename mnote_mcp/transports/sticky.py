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

from mcp.server.streamable_http import StreamableHTTPServerTransport

from mnote_mcp.base.sdkadapter import SessionManager
from mnote_mcp.transports.asking import AskingTransport, MayAsk

MESSAGES_PATH = "/messages/"


def messages_path(tag: str | None) -> str:
    """Where a legacy SSE session posts its messages: `/messages/` or `/messages/TAG/`."""
    return MESSAGES_PATH if tag is None else f"{MESSAGES_PATH}{tag}/"


def tagged(tag: str, session_id: str) -> str:
    return f"{tag}.{session_id}"


class TaggedSessionManager(SessionManager):
    """The SDK's session manager, whose new sessions' ids start with `tag` (none: the SDK's own ids);
    with `may_ask` and JSON answers, its sessions' transports answer a call that may ask the person
    as an SSE stream (`transports/asking.py`)."""

    def __init__(
        self, *args: Any, tag: str | None = None, may_ask: MayAsk | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.tag = tag
        self.may_ask = may_ask

    def new_transport(self, **sdk: Any) -> StreamableHTTPServerTransport:
        if self.may_ask is None or not self.json_response or self.stateless:
            return super().new_transport(**sdk)
        del sdk["is_json_response_enabled"]  # JSON bodies, but for a call that may ask
        return AskingTransport(may_ask=self.may_ask, **sdk)

    def admitted(self, transport: StreamableHTTPServerTransport) -> None:
        """The SDK admitted the session (the cap, the owner) under its id; it is then filed under the
        tagged id, before the opening request is served, so the client only ever sees that one. Nothing
        awaits in between: no request can look the session up under the untagged id."""
        if self.tag is not None:
            assert transport.mcp_session_id is not None
            self.rename_session(transport, tagged(self.tag, transport.mcp_session_id))
