"""Opaque access tokens, asked about at the issuer (RFC 7662 token introspection,
`--oauth-introspection`): this server authenticates as its client (`--oauth-client-id` and its secret)
and is told whether the token is active and what it grants.

Beyond `active`, the answer is held to what a JWT is held to: issued by this issuer, for this resource
(`aud`, RFC 7662 §4: the resource server must check it itself), an access token and not a refresh
token, in date (with `--oauth-leeway`), naming an actor. The issuer is asked once per request, within
`--oauth-timeout`; nothing is cached, so a token the issuer revokes is refused at its next use.
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx2

from mnote_mcp.transports.bearer import CallerToken, TokenRefusedError
from mnote_mcp.transports.issuers import UNREACHABLE, Issuer
from mnote_mcp.transports.oauth_policy import Policy, check_dates

MAX_ANSWER_BYTES = 64 * 1024
NOT_ACTIVE = "token not active (expired, revoked or unknown to its issuer)"


class IntrospectionVerifier:
    def __init__(
        self, policy: Policy, issuer: Issuer, http: httpx2.AsyncClient, client_id: str, secret: str
    ) -> None:
        self.policy = policy
        self.issuer = issuer
        self._http = http
        self._auth = (client_id, secret)

    async def verify_token(self, token: str) -> CallerToken | None:
        self.policy.check_size(token)
        endpoint = (await self.issuer.metadata()).introspection_endpoint
        if endpoint is None:
            raise TokenRefusedError("the token's issuer offers no introspection")
        response: httpx2.Response | None = None
        with anyio.move_on_after(self.issuer.timeout):
            try:
                response = await self._http.post(
                    str(endpoint), data={"token": token, "token_type_hint": "access_token"}, auth=self._auth
                )
            except httpx2.HTTPError:
                raise TokenRefusedError(UNREACHABLE) from None
        if response is not None and response.status_code == 400:
            # An OAuth error about this token (RFC 7662 §2.3: e.g. a structured token the issuer does
            # not introspect): the issuer does not vouch for it.
            raise TokenRefusedError(NOT_ACTIVE)
        if response is None or response.status_code != 200 or len(response.content) > MAX_ANSWER_BYTES:
            raise TokenRefusedError(UNREACHABLE)
        try:
            answer: Any = response.json()
        except ValueError:
            raise TokenRefusedError(UNREACHABLE) from None
        if not isinstance(answer, dict) or answer.get("active") is not True:
            raise TokenRefusedError(NOT_ACTIVE)
        kind = answer.get("token_type", "Bearer")
        if not isinstance(kind, str) or kind.lower() not in ("bearer", "access_token"):
            raise TokenRefusedError("token is not a bearer access token")
        if "iss" in answer and not self.issuer.names(answer["iss"]):
            raise TokenRefusedError("token from an issuer this server does not accept")
        audiences = answer.get("aud")
        named = audiences if isinstance(audiences, list) else [audiences]
        if not any(audience in self.policy.audiences for audience in named):
            raise TokenRefusedError("token not issued for this resource")
        check_dates(answer, self.policy.leeway)
        return self.policy.caller(answer, self.issuer.url)
