"""Running the server on a transport, after saying on stderr who it serves and from where."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import anyio

from mnote_mcp import __version__
from mnote_mcp.app import App, kernel_adapter, open_app
from mnote_mcp.base import allocator
from mnote_mcp.base.secretfiles import read_secret
from mnote_mcp.calls.fairshare import limited_series
from mnote_mcp.config import ServerConfig
from mnote_mcp.kernel.errors import MnoteError
from mnote_mcp.kernel.port import PagesQuery
from mnote_mcp.transports.consentpaths import consent_paths
from mnote_mcp.transports.drain import DrainingReadStream

if TYPE_CHECKING:
    from mnote_mcp.base.telemetry.metrics import Metrics
    from mnote_mcp.transports.server import GracefulServer

logger = logging.getLogger("mnote_mcp")


def loop_options(config: ServerConfig) -> dict[str, Any]:
    """anyio's asyncio backend options: uvloop's loop when it is installed and not turned off."""
    if config.uvloop:
        try:
            import uvloop
        except ImportError:
            return {}
        return {"loop_factory": uvloop.new_event_loop}
    return {}


def loop_name() -> str:
    loop = type(asyncio.get_running_loop())
    return "uvloop" if loop.__module__.startswith("uvloop") else "asyncio"


async def announce(app: App, auth: str | None = None) -> None:
    config = app.config
    actor = config.actor or "(none: calls will be refused as unauthenticated)"
    workspaces: dict[str, int] = {}
    served = ""
    if config.actor:
        try:
            for page in await app.kernel.list_pages(PagesQuery(config.actor)):
                workspaces[page.workspace_id] = workspaces.get(page.workspace_id, 0) + 1
        except MnoteError as error:
            # A relay's runtime may come up after us; the tools answer runtime_unavailable meanwhile.
            served = f"unknown (kernel: {error.code.value} {error.reason})"
    served = (
        served or ", ".join(f"{ws} ({n} pages)" for ws, n in sorted(workspaces.items())) or "none readable"
    )
    logger.info(
        "mnote-mcp %s on %s: actor=%s scopes=%s%s kernel=%s store=%s workspaces=%s%s loop=%s arenas=%s",
        __version__,
        config.transport,
        actor,
        ",".join(sorted(scope.value for scope in config.granted_scopes)),
        " read-only" if config.read_only else "",
        kernel_adapter(config),
        app.store_description,
        served,
        f" auth={auth}" if auth else "",
        loop_name(),
        allocator.chosen,
    )
    for line in consent_paths(config):  # which paths can ask the person, and which fall back
        logger.log(logging.WARNING if "UNASKED" in line else logging.INFO, "%s", line)


def settle_memory() -> None:
    """Move everything start-up made (imported modules, schemas, the registry) out of the garbage
    collector's reach, then collect again as usual: start-up objects are never garbage, and a call
    that allocates many objects (a page of thousands of blocks) then pays for its own objects only,
    not for rescanning these. (No collection first: it would cost more than the little it frees.)"""
    gc.freeze()
    gc.enable()


async def serve(config: ServerConfig) -> None:
    stop_tracing = start_tracing(config)
    try:
        if config.transport == "stdio":
            await serve_stdio(config)
        else:
            await serve_http(config, stop_tracing)
    finally:
        stop_tracing()


def start_tracing(config: ServerConfig) -> Callable[[], None]:
    """Traces exported over OTLP when `--otlp-endpoint` (or the standard variables) names a collector;
    otherwise nothing is set up and tracing costs nothing. Returns what flushes them at the end."""
    from mnote_mcp.base.telemetry.tracing import env_endpoint, setup_tracing

    endpoint = config.otlp_endpoint or env_endpoint()
    return setup_tracing(endpoint) if endpoint else lambda: None


async def serve_stdio(config: ServerConfig) -> None:
    async with open_app(config) as app:
        await announce(app)
        server = app.server()
        settle_memory()
        async with _stdio_streams(config) as (read_stream, write_stream):
            draining = DrainingReadStream[Any](read_stream, app.dispatcher.inflight)
            await server.run(draining, write_stream, server.create_initialization_options())
        logger.info("stopped: the client closed stdin")


def _stdio_streams(config: ServerConfig) -> AbstractAsyncContextManager[tuple[Any, Any]]:
    """The project's stdio transport, or with `--stdio-transport sdk` the SDK's `stdio_server()`."""
    if config.stdio_transport == "sdk":
        from mcp.server.stdio import stdio_server

        return stdio_server()
    from mnote_mcp.transports.stdio import stdio_transport

    return stdio_transport(config.max_line_bytes)


async def serve_http(config: ServerConfig, flush: Callable[[], None] = lambda: None) -> None:
    """`flush` runs once the server has stopped (the spans still to export): uvicorn then re-raises a
    SIGTERM it caught, which ends the process before anything after `serve()` runs."""
    from mnote_mcp.base.net import is_loopback
    from mnote_mcp.transports.auth.tokens import resolve_auth
    from mnote_mcp.transports.http import build_http_app, endpoints
    from mnote_mcp.transports.observe import ConnectionRefusals
    from mnote_mcp.transports.server import make_server

    auth = resolve_auth(config)  # refuse a bad auth setup before opening anything
    metrics_token = _metrics_token(config)
    if not is_loopback(config.host):
        logger.warning(
            "binding %s: reachable from other machines; keep the tokens secret and use TLS", config.host
        )
    async with open_app(config) as app:
        metrics = None
        if config.metrics_listen is not None:
            from mnote_mcp.base.telemetry.metrics import Metrics

            metrics = Metrics()
            app.dispatcher.observer = app.dispatcher.fair.observer = metrics
            metrics.limits(limited_series())
        asgi = build_http_app(app, auth, metrics)
        await announce(app, auth.description)
        settle_memory()
        server = make_server(
            asgi,
            host=config.host,
            port=config.port,
            inflight=app.dispatcher.inflight,
            grace=config.shutdown_grace,
            max_connections=config.max_connections,
            header_timeout=config.header_timeout,
            parser=config.http_parser,
            on_refused=ConnectionRefusals(metrics.refused if metrics is not None else None),
            on_stopped=flush,
            endpoints=endpoints(config),
        )
        if metrics is None or config.metrics_listen is None:
            await server.serve()
            return
        await _serve_with_metrics(server, metrics, config.metrics_listen, metrics_token)


def _metrics_token(config: ServerConfig) -> str | None:
    """The token `--metrics-listen` requires: from `--metrics-token-file`; a listener off loopback
    without one is refused (metrics name the tools, actors' activity and the store's state)."""
    from mnote_mcp.base.net import is_loopback

    if config.metrics_listen is None:
        return None
    token = read_secret(config.metrics_token_file) if config.metrics_token_file is not None else None
    host = config.metrics_listen[0]
    if token is None and not is_loopback(host):
        raise ValueError(
            f"--metrics-listen {host} is not a loopback address: give scrapers a token with"
            " --metrics-token-file FILE (mode 0600), or listen on 127.0.0.1"
        )
    return token


async def _serve_with_metrics(
    server: GracefulServer, metrics: Metrics, listen: tuple[str, int], token: str | None
) -> None:
    """The MCP server and the metrics listener side by side; the metrics stop when the server does."""
    from mnote_mcp.transports.observe import metrics_app
    from mnote_mcp.transports.server import make_side_server

    side = make_side_server(metrics_app(metrics.asgi(), token), host=listen[0], port=listen[1])
    async with anyio.create_task_group() as group:
        group.start_soon(side.serve)
        try:
            await server.serve()
        finally:
            side.should_exit = True
