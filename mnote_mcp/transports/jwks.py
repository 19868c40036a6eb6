"""An authorization server's signing keys (its JWKS), as PyJWT's `PyJWKClient` fetches them, kept
between requests and fetched again only within bounds.

- `PyJWKClient` is blocking (urllib): every fetch runs on a worker thread, and the request waits for
  it at most `timeout` seconds (the thread is abandoned then; urllib's own timeout ends it a second
  later).
- Keys are kept by `kid`. A token naming a key not kept yet (the issuer rotated its keys) fetches
  the set again, at most once per `refetch_interval`: a stream of tokens with made-up `kid`s costs the
  issuer one request per interval, not one per token. Requests arriving during a fetch wait for that
  one fetch.
- After `max_age` the set is fetched again when next needed (a key the issuer withdrew stops being
  accepted); if that fetch fails, the keys already kept stay in use, so an issuer that is down or slow
  does not stop tokens signed with known keys. A token naming an unknown key is then refused within
  `timeout`.

Nothing from a token is logged: a failed fetch logs the issuer's URL and why.
"""

from __future__ import annotations

import logging
import math
import time

import anyio
import anyio.to_thread
from jwt import PyJWK, PyJWKClient, PyJWTError

from mnote_mcp import __version__
from mnote_mcp.transports.bearer import TokenRefusedError

logger = logging.getLogger("mnote_mcp")
UNKNOWN_KEY = "token signed with a key the issuer does not publish"
NO_KID = "token names no signing key (kid) and the issuer publishes several"


class KeySet:
    def __init__(self, uri: str, *, timeout: float, max_age: float, refetch_interval: float) -> None:
        self.uri = uri
        self.timeout = timeout
        self.max_age = max_age
        self.refetch_interval = refetch_interval
        self._client = PyJWKClient(
            uri,
            cache_keys=False,
            cache_jwk_set=False,  # kept here instead, with the bounds above
            # urllib's own bound, past ours: the request has its answer (a refusal) at `timeout`, and
            # the abandoned thread ends a second later.
            timeout=timeout + 1,
            headers={"User-Agent": f"mnote-mcp/{__version__}"},
        )
        self._keys: dict[str, PyJWK] = {}
        self._fetched_at: float | None = None  # the last fetch that succeeded (monotonic)
        self._tried_at = -math.inf  # the last fetch started
        self._lock = anyio.Lock()
        self.fetches = 0  # how many fetches were started (tests, /healthz-style reporting)

    async def key(self, kid: str | None) -> PyJWK:
        """The key that verifies a token naming `kid` (None: the set's only key); `TokenRefusedError`
        when the issuer does not publish it, or it is not known and cannot be fetched now."""
        found = self._find(kid)
        if found is not None and not self._stale():
            return found
        asked = time.monotonic()
        async with self._lock:
            if self._tried_at < asked and time.monotonic() - self._tried_at >= self.refetch_interval:
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
        self._tried_at = time.monotonic()
        self.fetches += 1
        keys: list[PyJWK] | None = None
        with anyio.move_on_after(self.timeout):
            try:
                keys = await anyio.to_thread.run_sync(
                    self._client.get_signing_keys, True, abandon_on_cancel=True
                )
            except (PyJWTError, ValueError, OSError) as exc:
                logger.warning("the signing keys at %s could not be fetched: %s", self.uri, exc)
                return
        if keys is None:
            logger.warning("the signing keys at %s did not arrive within %s s", self.uri, self.timeout)
            return
        self._keys = {key.key_id: key for key in keys if key.key_id}
        self._fetched_at = time.monotonic()
