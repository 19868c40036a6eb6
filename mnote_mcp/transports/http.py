"""One ASGI app for both HTTP transports: streamable HTTP at `/mcp` and the legacy HTTP+SSE transport
at `/sse` + `/messages/`, behind bearer-token authentication, Host/Origin validation (DNS-rebinding
protection), a request body limit, and an unauthenticated `/healthz`.

No state lives here: sessions of the stateful streamable transport are only the SDK's message
routing; every business fact is in the kernel, so with `--stateless` any number of replicas can sit
behind a load balancer.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
from mcp.server.sse import SseServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import RequestBodyLimitMiddleware, TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from mnote_mcp import __version__
from mnote_mcp.app import App
from mnote_mcp.config import ServerConfig
from mnote_mcp.net import is_loopback
from mnote_mcp.transports.auth import ENDPOINT_SCOPES, AuthConfigError, AuthSetup, GrantVerifier, within
from mnote_mcp.transports.headers import identity_from_request
from mnote_mcp.vocabulary.identity import Identity

logger = logging.getLogger("mnote_mcp")

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def security_settings(config: ServerConfig) -> TransportSecuritySettings:
    """Allowed Host and Origin values; loopback names by default, explicit lists elsewhere."""
    if config.allowed_hosts:
        hosts = list(config.allowed_hosts)
    elif is_loopback(config.host):
        hosts = [form for name in _LOOPBACK_NAMES for form in (name, f"{name}:*")]
    else:
        raise AuthConfigError(
            f"binding {config.host} is not loopback: pass --allowed-hosts with the host names clients use"
            " (DNS-rebinding protection refuses every other Host header)"
        )
    origins = list(config.allowed_origins) or [
        f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")
    ]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def build_http_app(app: App, auth: AuthSetup) -> ASGIApp:
    config = app.config
    fallback: Identity | None = config.stdio_identity() if auth.store is None else None
    ceiling = config.granted_scopes

    def identity_for(ctx: Any) -> Identity:
        return within(identity_from_request(ctx.request, fallback), ceiling)

    server = app.server(identity_for)
    security = security_settings(config)
    manager = StreamableHTTPSessionManager(
        app=server,
        stateless=config.stateless,
        security_settings=security,
        max_request_body_size=config.max_body_bytes,
    )
    sse = SseServerTransport(
        "/messages/", security_settings=security, max_request_body_size=config.max_body_bytes
    )

    async def sse_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        async with sse.connect_sse(scope, receive, send) as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    def guarded(endpoint: ASGIApp) -> ASGIApp:
        return endpoint if auth.store is None else RequireAuthMiddleware(endpoint, ENDPOINT_SCOPES)

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "server": "mnote-mcp", "version": __version__})

    routes: list[BaseRoute] = [Route("/healthz", healthz, methods=["GET"])]
    if config.streamable_http:
        routes.append(Route("/mcp", endpoint=guarded(StreamableHTTPASGIApp(manager))))
    if config.sse:
        routes.append(Route("/sse", endpoint=guarded(sse_endpoint), methods=["GET"]))
        routes.append(Mount("/messages/", app=guarded(sse.handle_post_message)))

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        if config.streamable_http:
            async with manager.run():
                yield
        else:
            yield

    middleware = []
    if auth.store is not None:
        verifier = GrantVerifier(auth.store)
        middleware = [
            Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(verifier)),
            Middleware(AuthContextMiddleware),
        ]
    starlette = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    return RequestBodyLimitMiddleware(starlette, config.max_body_bytes)
