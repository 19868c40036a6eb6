"""`--auth oauth`: the server as an OAuth 2.1 resource server (the MCP authorization spec, RFC 9728,
RFC 8707). Tokens come from one or more authorization servers (`--oauth-issuer`); a token is accepted
only if it was issued for this server (`aud` names `--oauth-resource`), is in date, and names an actor
(`--oauth-actor-claim`). Its OAuth scopes grant the contract's capability scopes through
`--oauth-scopes` (by default `mnote:read` → `page.read`, `mnote:write` → `page.write`,
`mnote:artifacts` → `artifact.write`), and every request needs `--oauth-required-scopes`.

- discovery: Protected Resource Metadata (RFC 9728) at the well-known URL of the resource, and at the
  root form and the `/mcp`-suffixed form where those are other paths (two paths for a resource at
  `/mcp` or the root, three elsewhere); every `401`/`403` names it (`resource_metadata`).
- JWT access tokens (`oauth_jwt.py`) are checked against the issuer's published keys; opaque tokens
  are asked about at the issuer (`--oauth-introspection`, RFC 7662, `oauth_introspection.py`).

The SDK's pieces do what they fit: `create_protected_resource_routes` and its metadata handler,
`TokenVerifier`/`AccessToken` (`CallerToken`), `BearerAuthBackend` (`bearer.py`), the SDK's OAuth
metadata model and discovery URLs (`issuers.py`). Where this module departs, docs/decisions.md says why.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

import httpx2
from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
from mcp.server.auth.routes import (
    build_resource_metadata_url,
    cors_middleware,
    create_protected_resource_routes,
)
from mcp.shared.auth import ProtectedResourceMetadata
from pydantic import AnyHttpUrl, ConfigDict, TypeAdapter
from starlette.routing import BaseRoute, Route

from mnote_mcp import __version__
from mnote_mcp.base.secretfiles import read_secret
from mnote_mcp.config import ServerConfig
from mnote_mcp.transports.auth.bearer import CallerToken
from mnote_mcp.transports.auth.bounded import Reach
from mnote_mcp.transports.auth.issuers import Issuer
from mnote_mcp.transports.auth.oauth_introspection import InactiveTokens, IntrospectionVerifier
from mnote_mcp.transports.auth.oauth_jwt import JwtVerifier
from mnote_mcp.transports.auth.oauth_policy import Policy

logger = logging.getLogger("mnote_mcp")
WELL_KNOWN = "/.well-known/oauth-protected-resource"
# URLs as configured: a root URL keeps its empty path (`http://host:port`, no slash added), as RFC 8414
# compares issuers by string and the SDK's client does so with the metadata's `authorization_servers`.
_URL = TypeAdapter(AnyHttpUrl, config=ConfigDict(url_preserve_empty_path=True))


class OAuthConfigError(ValueError):
    """An `--auth oauth` setting that cannot be used; the message says how to fix it."""


class Verifier(Protocol):
    async def verify_token(self, token: str) -> CallerToken | None: ...


@dataclass
class ResourceServer:
    """Everything `--auth oauth` adds to the HTTP app: the verifier, the metadata routes, the URL every
    challenge names."""

    policy: Policy
    issuers: tuple[Issuer, ...]
    verifier: Verifier
    http: httpx2.AsyncClient
    introspection: bool

    @property
    def resource(self) -> str:
        """The resource as the metadata names it (`published_resource`)."""
        return published_resource(self.policy.resource)

    @property
    def resource_metadata_url(self) -> AnyHttpUrl:
        return build_resource_metadata_url(_URL.validate_python(self.resource))

    @property
    def description(self) -> str:
        how = "introspection" if self.introspection else "JWT"
        issuers = ", ".join(issuer.url for issuer in self.issuers)
        return f"oauth ({how}) from {issuers} for {self.resource}"

    def routes(self) -> list[BaseRoute]:
        """Protected Resource Metadata at the RFC 9728 URL of the resource (the SDK's route), and the
        same document at the root well-known URL and its `/mcp` form, where clients also look."""
        resource = _URL.validate_python(self.resource)
        servers = [_URL.validate_python(issuer.url) for issuer in self.issuers]
        routes: list[BaseRoute] = list(
            create_protected_resource_routes(
                resource, servers, scopes_supported=self.policy.scopes_supported, resource_name="mnote"
            )
        )
        metadata = ProtectedResourceMetadata(
            resource=resource,
            authorization_servers=servers,
            scopes_supported=self.policy.scopes_supported,
            resource_name="mnote",
        )
        handler = cors_middleware(ProtectedResourceMetadataHandler(metadata).handle, ["GET", "OPTIONS"])
        served = {route.path for route in routes if isinstance(route, Route)}
        for path in (WELL_KNOWN, WELL_KNOWN + "/mcp"):
            if path not in served:
                routes.append(Route(path, endpoint=handler, methods=["GET", "OPTIONS"]))
        return routes

    async def aclose(self) -> None:
        await self.http.aclose()


def published_resource(configured: str) -> str:
    """`--oauth-resource` as the Protected Resource Metadata names it: the form every client sends
    back unchanged as its RFC 8707 `resource` (issue 31). URLs equal up to a trailing slash are one
    resource, but a provider compares them as strings, and clients' URL models differ: the MCP SDK 1.x
    (Hermes 0.19.0) gives an origin the path `/` (`https://host/`), 2.x keeps `https://host` as it is.
    Both keep `https://host/` and `https://host/mcp` unchanged, so an origin is published with its
    `/` and a path without a trailing one. Tokens naming either form are accepted (`Policy.audiences`)."""
    parts = urlsplit(configured)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") or "/"))


def resolve_oauth(config: ServerConfig) -> ResourceServer:
    """The resource server `--auth oauth` and the `--oauth-*` settings describe; `OAuthConfigError`
    naming what is missing or conflicting."""
    if config.auth_file is not None or config.token or config.unsafe_no_auth:
        raise OAuthConfigError(
            "--auth oauth takes no --auth-file, MNOTE_TOKEN or --unsafe-no-auth: tokens come from the issuer"
        )
    if not config.oauth_issuers:
        raise OAuthConfigError("--auth oauth needs --oauth-issuer (the authorization server's issuer URL)")
    if config.oauth_resource is None:
        raise OAuthConfigError(
            "--auth oauth needs --oauth-resource: this server's URL as clients reach it (tokens name it)"
        )
    policy = Policy(
        resource=config.oauth_resource,
        scope_map=config.oauth_scopes,
        required_scopes=config.oauth_required_scopes,
        actor_claim=config.oauth_actor_claim,
        leeway=config.oauth_leeway,
        max_token_bytes=config.oauth_max_token_bytes,
    )
    http = httpx2.AsyncClient(
        timeout=config.oauth_timeout,
        follow_redirects=False,
        headers={"User-Agent": f"mnote-mcp/{__version__}"},
    )
    reach = Reach(
        http,
        timeout=config.oauth_timeout,
        max_bytes=config.oauth_max_response_bytes,
        refetch_interval=config.oauth_refetch_interval,
    )
    issuers = tuple(
        Issuer(url, reach, keys_max_age=config.oauth_keys_max_age) for url in config.oauth_issuers
    )
    verifier: Verifier
    if config.oauth_introspection:
        if len(issuers) != 1:
            raise OAuthConfigError("--oauth-introspection asks one issuer: give exactly one --oauth-issuer")
        secret = _client_secret(config)
        if not config.oauth_client_id or not secret:
            raise OAuthConfigError(
                "--oauth-introspection needs --oauth-client-id and MNOTE_OAUTH_CLIENT_SECRET (or"
                " --oauth-client-secret-file): the issuer answers only its clients"
            )
        verifier = IntrospectionVerifier(
            policy,
            issuers[0],
            config.oauth_client_id,
            secret,
            inactive=InactiveTokens(config.oauth_inactive_cache_seconds, config.oauth_inactive_cache_size),
            max_in_flight=config.oauth_max_introspections,
        )
    else:
        verifier = JwtVerifier(policy, issuers, config.oauth_algorithms)
    return ResourceServer(policy, issuers, verifier, http, config.oauth_introspection)


def _client_secret(config: ServerConfig) -> str | None:
    if config.oauth_client_secret_file is not None:
        if config.oauth_client_secret:
            raise OAuthConfigError(
                "MNOTE_OAUTH_CLIENT_SECRET and --oauth-client-secret-file are both set: keep one"
            )
        return read_secret(config.oauth_client_secret_file)
    return config.oauth_client_secret
