"""What an OAuth access token must say to be accepted, and what it grants (the `--oauth-*` settings),
shared by both ways of checking one (`oauth_jwt.py`, `oauth_introspection.py`)."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mnote_mcp.config import ScopeMap
from mnote_mcp.transports.auth.bearer import CallerToken, TokenRefusedError

TOO_LARGE = "token too large"
MALFORMED = "malformed token"
# RFC 6750 §2.1: what a bearer token may be (b64token). Anything else is not a token any issuer issued.
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


@dataclass(frozen=True)
class Policy:
    """What an accepted token must say, and what it grants (the `--oauth-*` settings)."""

    resource: str
    scope_map: ScopeMap
    required_scopes: tuple[str, ...]
    actor_claim: str
    leeway: float
    max_token_bytes: int

    @property
    def audiences(self) -> list[str]:
        """The `aud` values naming this resource: as configured, with or without a trailing slash
        (the SDK's client sends the metadata's `resource`, which a URL model may render either way)."""
        bare = self.resource.rstrip("/")
        return [bare, bare + "/"]

    @property
    def scopes_supported(self) -> list[str]:
        """The OAuth scopes this resource knows, as its metadata lists them (clients ask for these)."""
        names = [name for name, _ in self.scope_map] + list(self.required_scopes)
        return list(dict.fromkeys(names))

    def check_form(self, token: str) -> None:
        """Whether `token` can be a bearer token at all: at most `max_token_bytes`, made of RFC 6750's
        b64token characters. Checked before anything is parsed or sent to the issuer."""
        if len(token) > self.max_token_bytes:
            raise TokenRefusedError(TOO_LARGE)
        if _B64TOKEN.fullmatch(token) is None:
            raise TokenRefusedError(MALFORMED)

    def caller(self, claims: Mapping[str, Any], issuer: str) -> CallerToken:
        """The caller an accepted token's claims name (its signature or introspection, its issuer,
        audience and dates already checked)."""
        actor = claims.get(self.actor_claim)
        if not isinstance(actor, str) or not actor:
            raise TokenRefusedError(f"token has no {self.actor_claim} claim naming an actor")
        scopes = token_scopes(claims)
        capabilities = sorted({granted.value for name, granted in self.scope_map if name in scopes})
        client_id = claims.get("client_id", claims.get("azp"))
        subject = claims.get("sub")
        expires = claims.get("exp")
        return CallerToken(
            token="",
            client_id=client_id if isinstance(client_id, str) else "",
            scopes=sorted(scopes),
            # Past this instant (its expiry plus the allowed skew) the token is refused; the SDK's
            # backend checks it again.
            expires_at=int(expires + self.leeway) if isinstance(expires, (int, float)) else None,
            resource=self.resource,
            subject=subject if isinstance(subject, str) else actor,
            claims={"iss": issuer},
            actor_id=actor,
            capabilities=capabilities,
        )


def token_scopes(claims: Mapping[str, Any]) -> set[str]:
    """A token's OAuth scopes: `scope` (RFC 9068, RFC 7662: space-separated) or `scp` (a list, as
    some authorization servers write it)."""
    found = claims.get("scope", claims.get("scp"))
    if isinstance(found, str):
        return set(found.split())
    if isinstance(found, list):
        return {item for item in found if isinstance(item, str)}
    return set()


def check_dates(claims: Mapping[str, Any], leeway: float) -> None:
    """`exp` and `nbf` of an introspection answer, with the allowed skew (a JWT's are PyJWT's)."""
    now = time.time()
    expires, not_before = claims.get("exp"), claims.get("nbf")
    if isinstance(expires, (int, float)) and expires + leeway <= now:
        raise TokenRefusedError("token expired")
    if isinstance(not_before, (int, float)) and not_before - leeway > now:
        raise TokenRefusedError("token not yet valid")
