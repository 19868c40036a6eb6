"""Opaque access tokens, asked about at the issuer (RFC 7662 token introspection,
`--oauth-introspection`): this server authenticates as its client (`--oauth-client-id` and its secret)
and is told whether the token is active and what it grants.

Beyond `active`, the answer is held to what a JWT is held to: issued by this issuer, for this resource
(`aud`, RFC 7662 §4: the resource server must check it itself), an access token and not a refresh
token, in date (with `--oauth-leeway`), naming an actor. A token the issuer calls active is asked about
at every use, within `--oauth-timeout`, so a token the issuer revokes is refused at its next use.

What a caller can make this server send the issuer is bounded (issue 30: 500 junk bearer tokens made
480 introspection requests):
- what cannot be a bearer token at all (over `--oauth-max-token-bytes`, characters RFC 6750 does not
  allow) is refused here, never sent;
- a token the issuer called inactive is refused without asking again for
  `--oauth-inactive-cache-seconds`, kept by its SHA-256 digest (never the token), at most
  `--oauth-inactive-cache-size` of them, the oldest answer forgotten first; the same token arriving
  while it is being asked about waits for that answer instead of asking too;
- at most `--oauth-max-introspections` requests are in flight to the issuer; more wait for a turn
  within `--oauth-timeout`, then are refused (401, saying so).
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from typing import Any

import anyio
import httpx2

from mnote_mcp.transports.auth.bearer import CallerToken, TokenRefusedError
from mnote_mcp.transports.auth.bounded import TooLargeError, fetch
from mnote_mcp.transports.auth.issuers import UNREACHABLE, Issuer
from mnote_mcp.transports.auth.oauth_policy import Policy, check_dates

NOT_ACTIVE = "token not active (expired, revoked or unknown to its issuer)"
BUSY = "too many tokens are being checked at the token's issuer; retry shortly"


class InactiveTokens:
    """Digests of tokens the issuer called inactive, each for `seconds`, at most `size` of them."""

    def __init__(self, seconds: float, size: int) -> None:
        self.seconds = seconds
        self.size = size
        self._until: OrderedDict[bytes, float] = OrderedDict()  # oldest answer first

    def __contains__(self, digest: bytes) -> bool:
        until = self._until.get(digest)
        if until is None:
            return False
        if until > time.monotonic():
            return True
        del self._until[digest]
        return False

    def add(self, digest: bytes) -> None:
        if self.seconds <= 0:
            return
        self._until.pop(digest, None)
        self._until[digest] = time.monotonic() + self.seconds
        while len(self._until) > self.size:
            self._until.popitem(last=False)


class IntrospectionVerifier:
    def __init__(
        self,
        policy: Policy,
        issuer: Issuer,
        client_id: str,
        secret: str,
        *,
        inactive: InactiveTokens,
        max_in_flight: int,
    ) -> None:
        self.policy = policy
        self.issuer = issuer
        self.inactive = inactive
        self._auth = (client_id, secret)
        self._turns = anyio.CapacityLimiter(max_in_flight)
        self._asking: dict[bytes, anyio.Event] = {}  # tokens being asked about now, by digest

    async def verify_token(self, token: str) -> CallerToken | None:
        self.policy.check_form(token)
        digest = hashlib.sha256(token.encode("ascii")).digest()
        if digest in self.inactive:
            raise TokenRefusedError(NOT_ACTIVE)
        endpoint = (await self.issuer.metadata()).introspection_endpoint
        if endpoint is None:
            raise TokenRefusedError("the token's issuer offers no introspection")
        # Looked at again after every wait (the metadata's included): the same token may have been
        # asked about and refused meanwhile, and its answer is ours.
        while digest not in self.inactive and (pending := self._asking.get(digest)) is not None:
            await pending.wait()
        if digest in self.inactive:
            raise TokenRefusedError(NOT_ACTIVE)
        asking = self._asking[digest] = anyio.Event()
        try:
            answer = await self._introspect(str(endpoint), token)
        except TokenRefusedError as refused:
            if refused.reason == NOT_ACTIVE:
                self.inactive.add(digest)
            raise
        finally:
            del self._asking[digest]
            asking.set()
        return self._caller(answer)

    async def _introspect(self, endpoint: str, token: str) -> dict[str, Any]:
        """The issuer's answer about `token`, if it says the token is active."""
        answer = None
        turn = False
        reach = self.issuer.reach
        with anyio.move_on_after(reach.timeout):
            async with self._turns:
                turn = True
                try:
                    answer = await fetch(
                        reach.http,
                        "POST",
                        endpoint,
                        max_bytes=reach.max_bytes,
                        data={"token": token, "token_type_hint": "access_token"},
                        auth=self._auth,
                    )
                except (httpx2.HTTPError, TooLargeError):
                    raise TokenRefusedError(UNREACHABLE) from None
        if answer is None:
            raise TokenRefusedError(UNREACHABLE if turn else BUSY)
        if answer.status == 400:
            # An OAuth error about this token (RFC 7662 §2.3: e.g. a structured token the issuer does
            # not introspect): the issuer does not vouch for it.
            raise TokenRefusedError(NOT_ACTIVE)
        if answer.status != 200:
            raise TokenRefusedError(UNREACHABLE)
        try:
            found = answer.json()
        except ValueError:
            raise TokenRefusedError(UNREACHABLE) from None
        if not isinstance(found, dict) or found.get("active") is not True:
            raise TokenRefusedError(NOT_ACTIVE)
        return found

    def _caller(self, answer: dict[str, Any]) -> CallerToken:
        """The caller an active token's answer names, once it is held to what a JWT is held to."""
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
