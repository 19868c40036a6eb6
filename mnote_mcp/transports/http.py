"""One ASGI app for both HTTP transports: streamable HTTP at `/mcp` and the legacy HTTP+SSE transport
at `/sse` + `/messages/`, behind bearer-token authentication (from the headers, before any body is
read), Host/Origin validation (DNS-rebinding protection), a request body limit and deadline
(`mnote_mcp/httpguard.py`), session caps per token and overall and a request rate per actor, from the
headers too (`transports/limits.py`), and an
unauthenticated `/healthz` that reports how many sessions, resource watches and calls are open. A session
belongs to the token that opened it.

No state lives here: sessions of the stateful streamable transport are only the SDK's message
routing; every business fact is in the kernel, so with `--stateless` any number of replicas can sit
behind a load balancer.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.sse import SseServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
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
from mnote_mcp.dispatch import InFlight
from mnote_mcp.fairshare import FairShare
from mnote_mcp.httpguard import CloseUnreadBodies, ReadBody
from mnote_mcp.kernel.port import PageKey
from mnote_mcp.net import is_loopback
from mnote_mcp.resources.pages import PageResources
from mnote_mcp.transports.asking import calls_that_may_ask
from mnote_mcp.transports.auth import (
    AuthConfigError,
    AuthSetup,
    TokensFileWatcher,
    endpoint_grant,
    within,
)
from mnote_mcp.transports.bearer import ExplainingBearerBackend
from mnote_mcp.transports.headers import identity_from_request
from mnote_mcp.transports.limits import RequestLimit, SessionCaps, owner_of
from mnote_mcp.transports.observe import Readiness, Refusals, store_round_trip
from mnote_mcp.transports.revocation import OpenStreams
from mnote_mcp.transports.runs import ClientRuns
from mnote_mcp.transports.sticky import TaggedSessionManager, messages_path
from mnote_mcp.vocabulary.identity import Identity

if TYPE_CHECKING:  # prometheus_client is loaded only when metrics are served
    from mnote_mcp.telemetry.metrics import Metrics

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


def endpoints(config: ServerConfig) -> tuple[str, ...]:
    """The paths the app serves, as the start-up line names them (the probes always; `/mcp` and
    `/sse` as configured)."""
    served = ("/mcp",) if config.streamable_http else ()
    return (*served, *(("/sse",) if config.sse else ()), "/healthz", "/readyz")


def build_http_app(app: App, auth: AuthSetup, metrics: Metrics | None = None) -> ASGIApp:
    """The app; `metrics` (when `--metrics-listen` serves them) is told of refusals and reads the
    app's gauges."""
    config = app.config
    fallback: Identity | None = None if auth.required else config.stdio_identity()
    ceiling = config.granted_scopes

    def identity_for(ctx: Any) -> Identity:
        return within(identity_from_request(ctx.request, fallback), ceiling)

    store = auth.store

    def still_allowed(identity: Identity, key: PageKey) -> bool:
        """A subscription's token is still accepted (and in date), with page.read and the page's
        workspace."""
        if identity.expires_at is not None and identity.expires_at < time.time():
            return False
        if store is None or identity.credential is None:
            return True
        grant = endpoint_grant(store, identity.credential)
        return grant is not None and (grant.workspaces is None or key.workspace_id in grant.workspaces)

    def may_stream(owner: Hashable) -> bool:
        """A stream's token is still accepted, with the scopes every endpoint needs."""
        return store is None or (isinstance(owner, str) and endpoint_grant(store, owner) is not None)

    streams = OpenStreams(may_stream)

    pages = PageResources(
        app.dispatcher.kernel,
        identity_for,
        watch_interval=config.watch_interval,
        still_allowed=still_allowed,
        max_chars=app.dispatcher.max_result_chars,
        max_subscriptions=config.max_subscriptions,
    )
    server = app.server(identity_for, pages=pages)
    security = security_settings(config)
    manager = TaggedSessionManager(
        app=server,
        tag=config.session_tag,
        stateless=config.stateless,
        # One JSON body per POST (the spec lets a server choose; clients must accept both): no SSE
        # stream, its task group and framing per call. The 2026 era's subscriptions/listen stays SSE,
        # and so does a 2025-era call that may have to ask the person (`transports/asking.py`).
        json_response=not config.sse_responses,
        may_ask=calls_that_may_ask(app.dispatcher.may_ask),
        security_settings=security,
        max_request_body_size=config.max_body_bytes,
        session_idle_timeout=config.session_idle_timeout,
        max_sessions=config.max_sessions,
    )
    messages = messages_path(config.session_tag)
    sse = SseServerTransport(
        messages, security_settings=security, max_request_body_size=config.max_body_bytes
    )

    def open_sessions() -> Counter[Hashable]:
        # The SDK's registry of streamable-HTTP sessions and their owners (the token digest): it
        # forgets a session when it ends, is deleted or times out idle.
        owners = list(manager._session_owners.values())
        counts: Counter[Hashable] = Counter(owner["subject"] for owner in owners)
        if unowned := len(manager._server_instances) - len(owners):
            counts[None] += unowned
        return counts

    caps = SessionCaps(
        per_token=config.max_sessions_per_token, total=config.max_sessions, open_sessions=open_sessions
    )
    listens = SessionCaps(per_token=config.max_listen_streams_per_token, total=None, what="listen streams")

    def read_body(endpoint: ASGIApp) -> ASGIApp:
        return ReadBody(endpoint, max_bytes=config.max_body_bytes, timeout=config.body_timeout)

    streamable = read_body(StreamableHTTPASGIApp(manager))

    async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        if _opens_listen_stream(scope):  # from its headers: a stream refused is never read
            owner = owner_of(scope)
            if not await listens.refuse(owner, send):
                await listens.opening(streams.held(streamable, owner), owner, scope, receive, send)
            return
        if scope["method"] == "GET":  # a session's stream
            await streams.run(streamable, owner_of(scope), scope, receive, send)
            return
        if config.stateless or not _opens_session(scope):
            await streamable(scope, receive, send)
            return
        owner = owner_of(scope)
        if not await caps.refuse(owner, send):
            await caps.opening(streamable, owner, scope, receive, send)

    async def sse_stream(scope: Scope, receive: Receive, send: Send) -> None:
        async with sse.connect_sse(scope, receive, send) as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    async def sse_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        owner = owner_of(scope)
        if not await caps.refuse(owner, send):
            await caps.opening(streams.held(sse_stream, owner), owner, scope, receive, send)

    async def end_revoked() -> None:
        """After a reload of the tokens file: what tokens no longer allowed hold open is ended, their
        streams and their streamable-HTTP sessions."""
        streams.end_revoked()
        ended = [sid for sid, owner in manager._session_owners.items() if not may_stream(owner["subject"])]
        if ended:
            logger.warning("ending %d session(s) of tokens no longer accepted", len(ended))
        for session_id in ended:  # the SDK's own way to end one: forgotten (404), its transport ended
            transport = manager._server_instances.get(session_id)
            if transport is not None:
                await manager._discard_session(session_id, transport)

    limited = RequestLimit(app.dispatcher.fair, config.actor if fallback is not None else None)

    def guarded(endpoint: ASGIApp) -> ASGIApp:
        """Authentication, then the actor's request rate (both from the headers alone) before anything
        else, the body included."""
        return auth.gate(limited(endpoint)) if auth.required else _Asgi(limited(endpoint))

    inflight = app.dispatcher.inflight
    readiness = Readiness(
        partial(store_round_trip, app.kernel),
        timeout=config.ready_timeout,
        cache=config.ready_cache,
        stopping=lambda: inflight.closing,
    )
    if metrics is not None:
        from mnote_mcp.transports.storemetrics import store_metrics  # (prometheus_client: see above)

        gauges(metrics, caps, listens, pages, inflight, readiness)
        admission_gauges(metrics, app.dispatcher.fair)
        store_metrics(metrics, app.kernel)

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "status": "ok",
                "server": "mnote-mcp",
                "version": __version__,
                "sessions": sum(caps.counts().values()),
                "listenStreams": sum(listens.counts().values()),
                "watches": pages.watch_count(),
                "callsInFlight": app.dispatcher.inflight.count,
            }
        )

    routes: list[BaseRoute] = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readiness.endpoint, methods=["GET"]),
    ]
    if auth.oauth is not None:
        routes.extend(auth.oauth.routes())  # Protected Resource Metadata (RFC 9728)
    if config.streamable_http:
        sessionless = partial(_sessionless, config.stateless)
        routes.append(Route("/mcp", endpoint=guarded(ClientRuns(mcp_endpoint, sessionless))))
    if config.sse:
        routes.append(Route("/sse", endpoint=guarded(sse_endpoint), methods=["GET"]))
        routes.append(Mount(messages, app=guarded(read_body(sse.handle_post_message))))

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
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

    middleware = []
    verifier = auth.verifier()
    if verifier is not None:
        middleware = [
            Middleware(AuthenticationMiddleware, backend=ExplainingBearerBackend(verifier)),
            Middleware(AuthContextMiddleware),
        ]
    starlette = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    return Refusals(CloseUnreadBodies(starlette), metrics.refused if metrics is not None else None)


def gauges(
    metrics: Metrics,
    caps: SessionCaps,
    listens: SessionCaps,
    pages: PageResources,
    inflight: InFlight,
    readiness: Readiness,
) -> None:
    """What the app holds now, read when scraped."""
    metrics.gauge("mnote_tool_calls_in_flight", "Tool calls being answered", lambda: inflight.count)
    metrics.gauge(
        "mnote_http_sessions",
        "Open sessions (stateful streamable HTTP and legacy SSE)",
        lambda: sum(caps.counts().values()),
    )
    metrics.gauge(
        "mnote_http_listen_streams",
        "Open subscriptions/listen streams (2026-07-28 protocol)",
        lambda: sum(listens.counts().values()),
    )
    metrics.gauge("mnote_resource_watches", "Pages watched for subscribers", pages.watch_count)
    metrics.gauge(
        "mnote_ready",
        "1 when the last readiness check found the store answering (see /readyz), else 0",
        lambda: 0.0 if readiness.reason else 1.0,
    )
    metrics.gauge(
        "mnote_ready_check_seconds",
        "How long the last readiness round trip took",
        lambda: readiness.check_seconds,
    )


def admission_gauges(metrics: Metrics, fair: FairShare) -> None:
    """The expensive calls holding a place and waiting (`mnote_mcp/admission.py`), read when scraped."""
    admission = fair.admission
    if admission is None:
        return

    def states() -> list[tuple[dict[str, str], float]]:
        running, waiting = admission.counts()
        return [({"state": "running"}, running), ({"state": "waiting"}, waiting)]

    metrics.sampled(
        "mnote_admitted_calls",
        "Expensive calls (searches, listings, history, completions) at the admission, running or waiting",
        "gauge",
        states,
    )


class _Asgi:
    """An ASGI callable as an object: Starlette's `Route` takes a plain function for a request handler."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def _opens_listen_stream(scope: Scope) -> bool:
    """A 2026-era `subscriptions/listen` POST, known from its `Mcp-Method` header (the SDK refuses a
    request whose header and body disagree, so the header cannot hide a stream)."""
    if scope["method"] != "POST":
        return False
    return dict(scope["headers"]).get(b"mcp-method") == b"subscriptions/listen"


def _sessionless(stateless: bool, scope: Scope) -> bool:
    """A POST no session carries: every one with `--stateless`, else a 2026-era one (which has none)."""
    if scope["method"] != "POST":
        return False
    headers = dict(scope["headers"])
    if b"mcp-session-id" in headers:
        return False
    version = headers.get(b"mcp-protocol-version")
    return stateless or (version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS)


def _opens_session(scope: Scope) -> bool:
    """A handshake-era POST without a session id: it opens a session (the 2026 era has none)."""
    if scope["method"] != "POST":
        return False
    headers = dict(scope["headers"])
    version = headers.get(b"mcp-protocol-version")
    modern = version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS
    return b"mcp-session-id" not in headers and not modern
