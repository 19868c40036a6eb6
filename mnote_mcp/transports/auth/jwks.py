"""An authorization server's signing keys (its JWKS), fetched, kept between requests and fetched again
only within bounds.

- A fetch is one request on the event loop (the issuer's HTTP client, `bounded.fetch`), never a
  thread: it ends at `timeout` in all, however slowly the issuer answers (a server that sends a byte
  a second never trips a per-read timeout), and its connection is closed then. An answer over
  `max_bytes` is dropped as soon as that is known, unread. Issue 30: with PyJWT's `PyJWKClient` on a
  worker thread, a fetch given up at the timeout read on, one thread more per refetch, and a 600 MB
  key set was read whole.
- One fetch at a time: a request that needs the keys while a fetch is under way waits for that fetch
  (at most `timeout`) and uses what it brought; it never starts another. The fetch runs shielded, so a
  client that goes away does not cut it short for the others waiting.
- Keys are kept by `kid`. A token naming a key not kept yet (the issuer rotated its keys) fetches
  the set again, at most once per `refetch_interval` (counted from the end of the last fetch): a
  stream of tokens with made-up `kid`s costs the issuer one request per interval, not one per token.
- After `max_age` the set is fetched again when next needed (a key the issuer withdrew stops being
  accepted); if that fetch fails, the keys already kept stay in use, so an issuer that is down or slow
  does not stop tokens signed with known keys. A token naming an unknown key is then refused within
  `timeout`.

The key set is parsed by PyJWT (`PyJWKSet`); as `PyJWKClient` does, only keys with a `kid` whose use
is signing (or unsaid) are kept, and redirects are not followed. Nothing from a token is logged: a
failed fetch logs the issuer's URL and why.
"""

from __future__ import annotations

import logging
import time

import anyio
import httpx2
from jwt import PyJWK, PyJWKSet, PyJWTError

from mnote_mcp.transports.auth.bearer import TokenRefusedError
from mnote_mcp.transports.auth.bounded import Reach, Refetch, TooLargeError

logger = logging.getLogger("mnote_mcp")
UNKNOWN_KEY = "token signed with a key the issuer does not publish"
NO_KID = "token names no signing key (kid) and the issuer publishes several"


class KeySet:
    def __init__(self, uri: str, reach: Reach, *, max_age: float) -> None:
        self.uri = uri
        self.reach = reach
        self.max_age = max_age
        self._keys: dict[str, PyJWK] = {}
        self._fetched_at: float | None = None  # the last fetch that succeeded (monotonic)
        self._refetch = Refetch(reach.refetch_interval)  # counted from the end of the last fetch
        self.fetches = 0  # how many fetches were started (tests, /healthz-style reporting)

    async def key(self, kid: str | None) -> PyJWK:
        """The key that verifies a token naming `kid` (None: the set's only key); `TokenRefusedError`
        when the issuer does not publish it, or it is not known and cannot be fetched now."""
        found = self._find(kid)
        if found is not None and not self._stale():
            return found
        async with self._refetch.turn() as due:
            if due:
                await self._fetch()
        found = self._find(kid)
        if found is not None:
            return found
        raise TokenRefusedError(NO_KID if kid is None and len(self._keys) > 1 else UNKNOWN_KEY)

    def _stale(self) -> bool:
        return self._fetched_at is None or time.monotonic() - self._fetched_at >= self.max_age

    def _find(self, kid: str | None) -> PyJWK | None:
        if kid is None:
            return next(iter(self._keys.values())) if len(self._keys) == 1 else None
        return self._keys.get(kid)

    async def _fetch(self) -> None:
        self.fetches += 1
        try:
            with anyio.move_on_after(self.reach.timeout, shield=True):
                keys = await self._signing_keys()
                self._keys = {key.key_id: key for key in keys if key.key_id}
                self._fetched_at = time.monotonic()
                return
            logger.warning("the signing keys at %s did not arrive within %s s", self.uri, self.reach.timeout)
        except (httpx2.HTTPError, TooLargeError, PyJWTError, ValueError) as exc:
            logger.warning("the signing keys at %s could not be fetched: %s", self.uri, exc)
        finally:
            self._refetch.tried()

    async def _signing_keys(self) -> list[PyJWK]:
        answer = await self.reach.get_json(self.uri)
        if answer.status != 200:
            raise ValueError(f"answered HTTP {answer.status}")
        document = answer.json()
        if not isinstance(document, dict):
            raise ValueError("the answer is not a JSON object")
        keys = [key for key in PyJWKSet.from_dict(document).keys if key.public_key_use in ("sig", None)]
        if not any(key.key_id for key in keys):
            raise ValueError("it holds no signing key with a kid")
        return keys
