"""uvicorn, with a shutdown that lets tool calls in flight answer before connections are cut.

uvicorn's own graceful shutdown waits for *connections*, and an SSE stream never ends by itself;
sse-starlette, for its part, ends every SSE stream the moment uvicorn starts shutting down, answers
of calls in flight included. So we take over: stop accepting, wait for the dispatcher's calls in
flight to settle (bounded by --shutdown-grace), then release the SSE streams and let uvicorn close
what remains.

Past the grace, a call still running (waiting for another process's lock, say) is stopped
(`InFlight.stop`): it answers `mnote_tool_runtime_unavailable` (`shutting_down`, retryable), and so
does a request that arrives while connections close, before uvicorn closes them; otherwise uvicorn
would cancel it two seconds later and its client would read a bare HTTP 500. The answers are written,
then uvicorn closes the connections, and the process exits (a worker thread still waiting for the lock
is abandoned: the store's `close` ends its wait, and its transaction never began).
"""

from __future__ import annotations

import logging
import signal
import socket
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import FrameType

import anyio.to_thread
import uvicorn
from sse_starlette.sse import AppStatus

from mnote_mcp.base.httpguard import RefusalHook, guarded_protocol
from mnote_mcp.base.httplisten import GuardedServer
from mnote_mcp.calls.dispatch import InFlight
from mnote_mcp.transports.drain import ANSWER_SECONDS

logger = logging.getLogger("mnote_mcp")


class GracefulServer(GuardedServer):
    def __init__(
        self,
        config: uvicorn.Config,
        inflight: InFlight,
        grace: float,
        on_stopped: Callable[[], None] = lambda: None,
        endpoints: Sequence[str] = ("/mcp", "/sse", "/healthz", "/readyz"),
    ) -> None:
        super().__init__(config)
        self._endpoints = ", ".join(endpoints)
        self._on_stopped = on_stopped
        self._inflight = inflight
        self._grace = grace
        self._signal: str | None = None
        AppStatus.enable_automatic_graceful_drain = False

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._signal = signal.Signals(sig).name  # said when the shutdown begins (not from a handler)
        super().handle_exit(sig, frame)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        AppStatus.should_exit = False  # process-global in sse-starlette; a previous server may have set it
        await super().startup(sockets)
        for server in self.servers:
            for sock in server.sockets:
                host, port = sock.getsockname()[:2]
                shown = f"[{host}]" if ":" in host else host
                logger.info("listening on http://%s:%s (%s)", shown, port, self._endpoints)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._inflight.closing = True  # /readyz answers 503 from now on
        for server in self.servers:
            server.close()
        logger.info(
            "shutting down%s: no new connections; %d call(s) in flight",
            f" on {self._signal}" if self._signal else "",
            self._inflight.count,
        )
        finished = await self._inflight.settle(self._grace)
        if not finished:
            logger.warning(
                "shutting down with %d call(s) still running after %gs: they answer shutting_down",
                self._inflight.count,
                self._grace,
            )
        if self._inflight.stop():
            await self._inflight.settle(ANSWER_SECONDS)
        await super().shutdown(sockets)
        await anyio.to_thread.run_sync(self._on_stopped)  # (an exporter's flush may take its timeout)
        logger.info("stopped")


class SideServer(GuardedServer):
    """A second listener in the same process (`--metrics-listen`): no signal handlers of its own (the
    main server's stop it, `should_exit`), no lifespan."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        for server in self.servers:
            for sock in server.sockets:
                host, port = sock.getsockname()[:2]
                shown = f"[{host}]" if ":" in host else host
                logger.info("metrics on http://%s:%s/metrics", shown, port)


def make_side_server(asgi: object, *, host: str, port: int, max_connections: int = 16) -> SideServer:
    config = uvicorn.Config(
        asgi,  # type: ignore[arg-type]
        host=host,
        port=port,
        http=guarded_protocol(max_connections, 10.0),
        log_config=None,
        access_log=False,
        lifespan="off",
        loop="none",
    )
    return SideServer(config)


def make_server(
    asgi: object,
    *,
    host: str,
    port: int,
    inflight: InFlight,
    grace: float,
    max_connections: int = 500,
    header_timeout: float = 10.0,
    parser: str = "httptools",
    on_refused: RefusalHook | None = None,
    on_stopped: Callable[[], None] = lambda: None,
    endpoints: Sequence[str] = ("/mcp", "/sse", "/healthz", "/readyz"),
) -> GracefulServer:
    config = uvicorn.Config(
        asgi,  # type: ignore[arg-type]
        host=host,
        port=port,
        # The parser chosen (--http-parser; uvicorn's "auto" would pick whichever is installed), with
        # the header deadline and the header bound (mnote_mcp/base/httpguard.py); the connection cap is
        # the gate GuardedServer accepts under (mnote_mcp/base/httplisten.py).
        http=guarded_protocol(max_connections, header_timeout, parser, on_refused),
        log_config=None,  # keep our stderr logging
        access_log=False,  # one line per tool call is ours; uvicorn's per-request line would double it
        timeout_graceful_shutdown=2,
        lifespan="on",
        loop="none",  # serve() runs on the loop already running (uvloop unless --no-uvloop)
    )
    return GracefulServer(config, inflight, grace, on_stopped, endpoints)
