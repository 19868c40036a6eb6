"""One authorization server whose tokens are accepted: its metadata, found the way MCP clients find it
(RFC 8414, then OpenID Connect Discovery: the SDK's own list of well-known URLs), fetched when first
needed and kept; and its signing keys (`jwks.KeySet`).

The server starts whether or not the issuer answers (it may start later); until the metadata has been
fetched, every token is refused (401) within `timeout`, and a failed fetch is tried again at most once
per `refetch_interval`. The metadata must name the issuer it was fetched for (RFC 8414 §3.3), so a
misconfigured URL cannot make another server's keys trusted. Each answer is read within
`max_response_bytes` (`bounded.fetch`), all of discovery within `timeout`.
"""

from __future__ import annotations

import logging

import anyio
import httpx2
from mcp.client.auth.utils import build_oauth_authorization_server_metadata_discovery_urls, issuers_match
from mcp.shared.auth import OAuthMetadata
from pydantic import AnyHttpUrl, ValidationError

from mnote_mcp.transports.auth.bearer import TokenRefusedError
from mnote_mcp.transports.auth.bounded import Reach, Refetch, TooLargeError
from mnote_mcp.transports.auth.jwks import KeySet

logger = logging.getLogger("mnote_mcp")
UNREACHABLE = "the token's issuer could not be reached to check it"


class IssuerMetadata(OAuthMetadata):
    """The SDK's RFC 8414 model, which a client reads, with what a resource server reads too: where
    the issuer publishes its signing keys (RFC 8414 §2 `jwks_uri`)."""

    jwks_uri: AnyHttpUrl | None = None


class Issuer:
    def __init__(self, url: str, reach: Reach, *, keys_max_age: float) -> None:
        self.url = url
        self.reach = reach
        self.keys_max_age = keys_max_age
        self._metadata: IssuerMetadata | None = None
        self._keys: KeySet | None = None
        self._refetch = Refetch(reach.refetch_interval)  # counted from the start of the last try

    def names(self, iss: object) -> bool:
        """Whether a token's `iss` is this issuer (a root issuer with or without its trailing slash)."""
        return isinstance(iss, str) and issuers_match(iss, self.url)

    async def metadata(self) -> IssuerMetadata:
        if self._metadata is not None:
            return self._metadata
        async with self._refetch.turn() as due:
            if due:
                self._refetch.tried()
                with anyio.move_on_after(self.reach.timeout):
                    self._metadata = await self._discover()
                if self._metadata is None:
                    logger.warning("no metadata from the issuer %s within %s s", self.url, self.reach.timeout)
        if self._metadata is None:
            raise TokenRefusedError(UNREACHABLE)
        return self._metadata

    async def keys(self) -> KeySet:
        if self._keys is None:
            jwks_uri = (await self.metadata()).jwks_uri
            if jwks_uri is None:
                logger.error("the issuer %s publishes no jwks_uri: its JWTs cannot be checked", self.url)
                raise TokenRefusedError(UNREACHABLE)
            self._keys = KeySet(str(jwks_uri), self.reach, max_age=self.keys_max_age)
        return self._keys

    async def _discover(self) -> IssuerMetadata | None:
        for url in build_oauth_authorization_server_metadata_discovery_urls(self.url, self.url):
            try:
                answer = await self.reach.get_json(url)
            except httpx2.HTTPError as exc:
                logger.warning("the issuer's metadata at %s could not be fetched: %s", url, exc)
                return None
            except TooLargeError as exc:
                logger.warning("the issuer's metadata at %s is dropped: %s", url, exc)
                continue
            if answer.status != 200:
                continue
            try:
                metadata = IssuerMetadata.model_validate_json(answer.body)
            except ValidationError as exc:
                logger.warning("the issuer's metadata at %s does not parse: %s", url, exc)
                continue
            if not issuers_match(str(metadata.issuer), self.url):
                logger.error(
                    "the metadata at %s names the issuer %s, not %s: ignored", url, metadata.issuer, self.url
                )
                continue
            return metadata
        logger.warning("the issuer %s publishes no OAuth or OpenID metadata", self.url)
        return None
