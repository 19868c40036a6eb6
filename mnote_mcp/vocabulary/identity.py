"""Who is calling, and what the connection allows: decided by the transport, never by the model.

On stdio the identity is the configured actor; over HTTP it is the bearer token's actor. Scopes are
the upper bound a call can only narrow.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

from mnote_mcp.vocabulary.scopes import ALL_SCOPES, Scope


@dataclass(frozen=True, slots=True)
class Identity:
    """The caller behind one connection.

    `bindings` are correlation ids fixed by the connection (flags, environment, HTTP headers); the
    generated session and run ids stand in when nothing else names them, so every call of one
    connection still joins up in the audit trail. `workspaces`, when set (a bearer token limited to
    some workspaces), is the only set of workspaces the caller may name.
    """

    actor_id: str | None
    scopes: frozenset[Scope] = ALL_SCOPES
    bindings: Mapping[str, str] = field(default_factory=dict)
    workspaces: frozenset[str] | None = None
    # The credential behind the connection (a bearer token's SHA-256 digest, hex), when there is one:
    # what a long-lived subscription re-checks, so a revoked or narrowed token stops being served.
    credential: str | None = None
    # When the credential stops being valid (seconds since the epoch), if it says: an OAuth access
    # token's expiry, past which a subscription it holds is no longer served.
    expires_at: int | None = None
    generated_session_id: str = field(default_factory=lambda: f"sess_{secrets.token_hex(8)}")
    generated_run_id: str = field(default_factory=lambda: f"run_{secrets.token_hex(8)}")

    @property
    def principal(self) -> str:
        """Who a sealed question state or a confirmation handle belongs to: the actor and the
        credential behind the connection."""
        return f"{self.actor_id or ''}\n{self.credential or ''}"
