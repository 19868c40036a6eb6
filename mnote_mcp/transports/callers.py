"""Who calls over HTTP, and whether what they hold open is still theirs to hold.

A request's `Identity` comes from its token (or, without authentication, from the server's own
`--actor`), narrowed to the server's scopes. A subscription or a stream outlives the request that
opened it, so it is asked again on each notification and on each reload of the tokens file: is its
token still accepted, in date, with the scopes it needs?
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from typing import Any

from mnote_mcp.config import ServerConfig
from mnote_mcp.kernel.port import PageKey
from mnote_mcp.transports.auth.tokens import AuthSetup, endpoint_grant, within
from mnote_mcp.transports.headers import identity_from_request
from mnote_mcp.vocabulary.identity import Identity


class Callers:
    """The identity of an HTTP request, and the checks held streams and subscriptions are put to."""

    def __init__(self, config: ServerConfig, auth: AuthSetup) -> None:
        self.fallback: Identity | None = None if auth.required else config.stdio_identity()
        self.ceiling = config.granted_scopes
        self.store = auth.store

    def identity_for(self, ctx: Any) -> Identity:
        return within(identity_from_request(ctx.request, self.fallback), self.ceiling)

    def still_allowed(self, identity: Identity, key: PageKey) -> bool:
        """A subscription's token is still accepted (and in date), with page.read and the page's
        workspace."""
        if identity.expires_at is not None and identity.expires_at < time.time():
            return False
        if self.store is None or identity.credential is None:
            return True
        grant = endpoint_grant(self.store, identity.credential)
        return grant is not None and (grant.workspaces is None or key.workspace_id in grant.workspaces)

    def may_stream(self, owner: Hashable) -> bool:
        """A stream's token is still accepted, with the scopes every endpoint needs."""
        return self.store is None or (
            isinstance(owner, str) and endpoint_grant(self.store, owner) is not None
        )
