"""JWT access tokens (RFC 9068), checked with PyJWT against the issuer's published keys.

In order, each failure a `TokenRefusedError` saying which check failed (never a value from the token):
its size (`--oauth-max-token-bytes`) and characters (RFC 6750's b64token), before anything is parsed;
its form; its algorithm, on the
allow-list (`--oauth-algorithms`: key-pair algorithms only, so never `none` and never an HMAC keyed
with the issuer's public key); its `iss`, one of `--oauth-issuer`; the key its `kid` names, among the
keys that issuer publishes (`jwks.KeySet`, whose algorithm must also be the token's); the signature;
`exp` and `nbf` with `--oauth-leeway`; `aud` naming `--oauth-resource`; then the actor claim
(`oauth.Policy.caller`). Parsing and checking are PyJWT's (`jwt.decode`), never hand-written.
"""

from __future__ import annotations

from collections.abc import Sequence

import jwt

from mnote_mcp.transports.auth.bearer import CallerToken, TokenRefusedError
from mnote_mcp.transports.auth.issuers import Issuer
from mnote_mcp.transports.auth.oauth_policy import MALFORMED, Policy

WRONG_ISSUER = "token from an issuer this server does not accept"

# PyJWT's verdicts, most specific first (several derive from others).
_REASONS: tuple[tuple[type[jwt.PyJWTError], str], ...] = (
    (jwt.ExpiredSignatureError, "token expired"),
    (jwt.ImmatureSignatureError, "token not yet valid"),
    (jwt.InvalidAudienceError, "token not issued for this resource"),
    (jwt.InvalidIssuerError, WRONG_ISSUER),
    (jwt.InvalidSignatureError, "token signature does not verify"),
    (jwt.InvalidAlgorithmError, "token signature algorithm not accepted"),
)


class JwtVerifier:
    def __init__(self, policy: Policy, issuers: Sequence[Issuer], algorithms: Sequence[str]) -> None:
        self.policy = policy
        self.issuers = tuple(issuers)
        self.algorithms = list(algorithms)

    async def verify_token(self, token: str) -> CallerToken | None:
        self.policy.check_form(token)
        try:
            header = jwt.get_unverified_header(token)
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            raise TokenRefusedError(MALFORMED) from None
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm not in self.algorithms:
            raise TokenRefusedError("token signature algorithm not accepted")
        issuer = next((found for found in self.issuers if found.names(unverified.get("iss"))), None)
        if issuer is None:
            raise TokenRefusedError(WRONG_ISSUER)
        kid = header.get("kid")
        key = await (await issuer.keys()).key(kid if isinstance(kid, str) else None)
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=self.policy.audiences,
                issuer=unverified["iss"],
                leeway=self.policy.leeway,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.MissingRequiredClaimError as missing:
            raise TokenRefusedError(f"token lacks the {missing.claim} claim") from None
        except jwt.PyJWTError as refused:
            reason = next((why for kind, why in _REASONS if isinstance(refused, kind)), MALFORMED)
            raise TokenRefusedError(reason) from None
        return self.policy.caller(claims, issuer.url)
