"""One ASGI app for both HTTP transports: streamable HTTP at `/mcp` and the legacy HTTP+SSE transport
at `/sse` + `/messages/`, behind bearer-token authentication (from the headers, before any body is
read), Host/Origin validation (DNS-rebinding protection), a request body limit and deadline
(`mnote_mcp/base/httpguard.py`), session caps per token and overall and a request rate per actor, from the
headers too (`transports/limits.py`), and an
unauthenticated `/healthz` that reports how many sessions, resource watches and calls are open. A session
belongs to the token that opened it.

No state lives here: sessions of the stateful streamable transport are only the SDK's message
routing; every business fact is in the kernel, so with `--stateless` any number of replicas can sit
behind a load balancer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING

import anyio
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from mnote_mcp.app import App
from mnote_mcp.base.httpguard import CloseUnreadBodies
from mnote_mcp.base.net import is_loopback
from mnote_mcp.base.sdkadapter import SessionManager
from mnote_mcp.config import ServerConfig
from mnote_mcp.surface.resources.pages import PageResources
from mnote_mcp.transports.asking import calls_that_may_ask
from mnote_mcp.transports.auth.bearer import ExplainingBearerBackend
from mnote_mcp.transports.auth.tokens import AuthConfigError, AuthSetup, TokensFileWatcher
from mnote_mcp.transports.callers import Callers
from mnote_mcp.transports.endpoints import Endpoints, session_manager, sse_transport
from mnote_mcp.transports.health import Health
from mnote_mcp.transports.limits import RequestLimit
from mnote_mcp.transports.observe import Readiness, Refusals, store_round_trip
from mnote_mcp.transports.runs import ClientRuns
from mnote_mcp.transports.sticky import messages_path

if TYPE_CHECKING:  # prometheus_client is loaded only when metrics are served
    from mnote_mcp.base.telemetry.metrics import Metrics

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


def endpoints(config: ServerConfig) -> tuple[str, ...]:
    """The paths the app serves, as the start-up line names them (the probes always; `/mcp` and
    `/sse` as configured)."""
    served = ("/mcp",) if config.streamable_http else ()
    return (*served, *(("/sse",) if config.sse else ()), "/healthz", "/readyz")


def build_http_app(app: App, auth: AuthSetup, metrics: Metrics | None = None) -> ASGIApp:
    """The app; `metrics` (when `--metrics-listen` serves them) is told of refusals and reads the
    app's gauges."""
    config = app.config
    callers = Callers(config, auth)
    pages = PageResources(
        app.dispatcher.kernel,
        callers.identity_for,
        watch_interval=config.watch_interval,
        still_allowed=callers.still_allowed,
        max_chars=app.dispatcher.max_result_chars,
        max_subscriptions=config.max_subscriptions,
    )
    server = app.server(callers.identity_for, pages=pages)
    security = security_settings(config)
    manager = session_manager(config, server, security, calls_that_may_ask(app.dispatcher.may_ask))
    served = Endpoints(config, server, manager, sse_transport(config, security), callers.may_stream)
    inflight = app.dispatcher.inflight
    readiness = Readiness(
        partial(store_round_trip, app.kernel),
        timeout=config.ready_timeout,
        cache=config.ready_cache,
        stopping=lambda: inflight.closing,
    )
    health = Health(served.caps, served.listens, pages, inflight, readiness, app.dispatcher.fair)
    if metrics is not None:
        from mnote_mcp.transports.storemetrics import store_metrics  # (prometheus_client: see above)

        health.gauges(metrics)
        store_metrics(metrics, app.kernel)
    limited = RequestLimit(app.dispatcher.fair, config.actor if callers.fallback is not None else None)
    starlette = Starlette(
        routes=routes(config, auth, guarded(auth, limited), served, health, readiness),
        middleware=middleware(auth),
        lifespan=lifespan(config, auth, manager, readiness, served.end_revoked),
    )
    return Refusals(CloseUnreadBodies(starlette), metrics.refused if metrics is not None else None)


def routes(
    config: ServerConfig,
    auth: AuthSetup,
    guard: Callable[[ASGIApp], ASGIApp],
    endpoints: Endpoints,
    health: Health,
    readiness: Readiness,
) -> list[BaseRoute]:
    """`/healthz` and `/readyz` open; Protected Resource Metadata with `--auth oauth`; `/mcp`, `/sse`
    and the SSE message path behind authentication, as the configuration serves them."""
    found: list[BaseRoute] = [
        Route("/healthz", health.healthz, methods=["GET"]),
        Route("/readyz", readiness.endpoint, methods=["GET"]),
    ]
    if auth.oauth is not None:
        found.extend(auth.oauth.routes())  # Protected Resource Metadata (RFC 9728)
    if config.streamable_http:
        sessionless = partial(_sessionless, config.stateless)
        found.append(Route("/mcp", endpoint=guard(ClientRuns(endpoints.mcp, sessionless))))
    if config.sse:
        found.append(Route("/sse", endpoint=guard(endpoints.sse_endpoint), methods=["GET"]))
        found.append(Mount(messages_path(config.session_tag), app=guard(endpoints.messages)))
    return found


def guarded(auth: AuthSetup, limited: RequestLimit) -> Callable[[ASGIApp], ASGIApp]:
    """Authentication, then the actor's request rate (both from the headers alone) before anything
    else, the body included."""

    def guard(endpoint: ASGIApp) -> ASGIApp:
        return auth.gate(limited(endpoint)) if auth.required else _Asgi(limited(endpoint))

    return guard


def middleware(auth: AuthSetup) -> list[Middleware]:
    """The SDK's bearer authentication (with mnote's reasons in its challenges), where a verifier is
    configured."""
    verifier = auth.verifier()
    if verifier is None:
        return []
    return [
        Middleware(AuthenticationMiddleware, backend=ExplainingBearerBackend(verifier)),
        Middleware(AuthContextMiddleware),
    ]


def lifespan(
    config: ServerConfig,
    auth: AuthSetup,
    manager: SessionManager,
    readiness: Readiness,
    end_revoked: Callable[[], Awaitable[None]],
) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    """While the app serves: the readiness checks, the tokens file watched (what a token it no longer
    accepts holds is ended), the session manager running; the OAuth verifier closed after."""
    store = auth.store

    @asynccontextmanager
    async def running(_: Starlette) -> AsyncIterator[None]:
        async with readiness.running(), anyio.create_task_group() as group:
            if store is not None and auth.source is not None:
                watcher = TokensFileWatcher(store, auth.source, config.auth_reload_interval, end_revoked)
                group.start_soon(watcher.run)
            if config.streamable_http:
                async with manager.run():
                    yield
            else:
                yield
            group.cancel_scope.cancel()
        if auth.oauth is not None:
            await auth.oauth.aclose()

    return running


class _Asgi:
    """An ASGI callable as an object: Starlette's `Route` takes a plain function for a request handler."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def _sessionless(stateless: bool, scope: Scope) -> bool:
    """A POST no session carries: every one with `--stateless`, else a 2026-era one (which has none)."""
    if scope["method"] != "POST":
        return False
    headers = dict(scope["headers"])
    if b"mcp-session-id" in headers:
        return False
    version = headers.get(b"mcp-protocol-version")
    return stateless or (version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS)
