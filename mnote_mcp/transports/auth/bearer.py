"""The bearer-token gate in front of every MCP endpoint, for both sign-in modes (a tokens file, or an
OAuth authorization server): who the token says the caller is (`CallerToken`), why a token was refused
(`TokenRefusedError`), and the `401`/`403` a client gets, from the headers alone, before any body is read.

Built on the SDK's `BearerAuthBackend`, which reads the `Authorization` header and asks a
`TokenVerifier`; the gate does what the SDK's `RequireAuthMiddleware` does, plus two things for a
client's benefit (RFC 6750 §3, the MCP authorization spec):

- the `401`'s `error_description` says why the token was refused ("token expired", "token not issued
  for this resource", ...), so a client and its user can tell a stale token from a misconfigured one.
  It never repeats a value from the token: only which check failed.
- the `403 insufficient_scope` carries `scope="…"`, the scope to ask the authorization server for (the
  SDK's OAuth client steps up with it), and both carry `resource_metadata="…"` (RFC 9728) in OAuth mode.
"""

from __future__ import annotations

import json

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend
from mcp.server.auth.provider import AccessToken
from pydantic import AnyHttpUrl
from starlette.authentication import AuthCredentials, BaseUser
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Receive, Scope, Send

from mnote_mcp.base.httpguard import respond

_REFUSAL = "mnote.token_refused"  # where the backend leaves the reason for the gate, in the ASGI scope
UNKNOWN = "unknown bearer token"
MISSING = "a bearer token is required"


class CallerToken(AccessToken):
    """An accepted token as mnote reads it: the actor it acts as, its capability scopes (the
    contract's `page.read`, ...) and the workspaces it is limited to (None: any).

    `scopes` stay the token's own (what `RequireAuthMiddleware` checks, in the words a client asked its
    authorization server for); `client_id`, `subject` and the `iss` claim are the principal the SDK binds
    a session to. `token` is always empty: the secret is never kept in request state.
    """

    actor_id: str
    capabilities: list[str]
    workspaces: list[str] | None = None


class TokenRefusedError(Exception):
    """A presented token that is not accepted; `reason` says which check failed (no value of it)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ExplainingBearerBackend(BearerAuthBackend):
    """The SDK's backend; a verifier's `TokenRefusedError` leaves its reason where `RequireToken` finds it."""

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser] | None:
        try:
            found: tuple[AuthCredentials, BaseUser] | None = await super().authenticate(conn)
        except TokenRefusedError as refused:
            conn.scope[_REFUSAL] = refused.reason
            return None
        return found


class RequireToken:
    """The gate in front of an endpoint: `401` for a request without an accepted token, saying why;
    `403 insufficient_scope` naming the first required scope the token lacks; else the endpoint.

    The SDK's `RequireAuthMiddleware` does the same checks but can say neither why nor which scope in
    its challenge (docs/decisions.md); its order and its reading of the request are kept.
    """

    def __init__(
        self, app: ASGIApp, required_scopes: list[str], resource_metadata_url: AnyHttpUrl | None = None
    ) -> None:
        self.app = app
        self.required_scopes = required_scopes
        self.resource_metadata_url = resource_metadata_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not isinstance(scope.get("user"), AuthenticatedUser):
            if _presents_bearer(scope):
                reason = scope.get(_REFUSAL, UNKNOWN)
                await _challenge(send, 401, "invalid_token", reason, None, self.resource_metadata_url)
            else:  # RFC 6750 §3.1: no error code for a request that carried no token at all
                await _challenge(send, 401, None, MISSING, None, self.resource_metadata_url)
            return
        granted = scope.get("auth")
        for name in self.required_scopes:
            if granted is None or name not in granted.scopes:
                why = f"the token lacks the scope {name}"
                await _challenge(send, 403, "insufficient_scope", why, name, self.resource_metadata_url)
                return
        await self.app(scope, receive, send)


def _presents_bearer(scope: Scope) -> bool:
    """Whether the request carries `Authorization: Bearer …` (the SDK's backend reads only that)."""
    found = next((value for name, value in scope["headers"] if name.lower() == b"authorization"), b"")
    return bytes(found).lower().startswith(b"bearer ")


async def _challenge(
    send: Send,
    status: int,
    error: str | None,
    description: str,
    scope: str | None,
    resource_metadata: AnyHttpUrl | None,
) -> None:
    """A `WWW-Authenticate: Bearer` challenge (RFC 6750 §3) and the same facts as a JSON body.

    Every value put between quotes is the server's own (a reason from a fixed set, a configured scope
    or URL), never one from the request, so the header cannot be forged from outside."""
    parts = ['realm="mnote"']
    if error is not None:
        parts += [f'error="{error}"', f'error_description="{description}"']
    if scope is not None:
        parts.append(f'scope="{scope}"')
    if resource_metadata is not None:
        parts.append(f'resource_metadata="{resource_metadata}"')
    body = {
        **({"error": error} if error is not None else {}),
        "error_description": description,
        **({"scope": scope} if scope else {}),
    }
    challenge = (b"www-authenticate", ("Bearer " + ", ".join(parts)).encode())
    await respond(send, status, b"application/json", json.dumps(body).encode(), challenge)
