"""Lifecycle behaviour, in process: a shutdown lets calls in flight answer; a call past the per-call
timeout answers `mnote_tool_runtime_unavailable`, and its retry is safe."""

from __future__ import annotations

import socket
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from mnote_mcp.app import App, build_registry
from mnote_mcp.config import ServerConfig
from mnote_mcp.dispatch import Dispatcher
from mnote_mcp.kernel.local import LocalKernel, LocalStore
from mnote_mcp.kernel.local.connection import StoreBusyError
from mnote_mcp.kernel.port import Command, CommandOutcome
from mnote_mcp.transports.auth import AuthSetup
from mnote_mcp.transports.http import build_http_app
from mnote_mcp.transports.server import make_server
from tests.support.helpers import call, connect, dump, write_args
from tests.support.http_helpers import mcp_http

pytestmark = pytest.mark.anyio


class SlowStore(LocalStore):
    """The embedded store as if another process held the write lock for `delay` seconds: the inline
    attempt is told the store is busy, and the waiting attempt (on a worker thread) waits."""

    def __init__(self, path: Path, delay: float) -> None:
        super().__init__(path)
        self.delay = delay

    def execute(self, command: Command, *, inline: bool = False) -> CommandOutcome:
        if inline:
            raise StoreBusyError
        time.sleep(self.delay)
        return super().execute(command)


class SlowKernel(LocalKernel):
    def __init__(self, path: Path, delay: float) -> None:
        super().__init__(SlowStore(path, delay))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _slow_app(db: Path, delay: float, **config: Any) -> App:
    cfg = replace(
        ServerConfig(db=db, locale="en", demo=False, actor="user_editor", unsafe_no_auth=True), **config
    )
    kernel = SlowKernel(db, delay)
    dispatcher = Dispatcher(build_registry(cfg), kernel, locale="en", call_timeout=cfg.call_timeout)
    return App(config=cfg, kernel=kernel, dispatcher=dispatcher, store_description=str(db))


@pytest.mark.slow
async def test_shutdown_lets_calls_in_flight_answer(db: Path) -> None:
    port = _free_port()
    app = _slow_app(db, delay=1.5, port=port)
    server = make_server(
        build_http_app(app, AuthSetup(None, "none")),
        host="127.0.0.1",
        port=port,
        inflight=app.dispatcher.inflight,
        grace=10,
    )
    results: list[dict[str, Any]] = []
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve)
        while not server.started:  # noqa: ASYNC110 - polling uvicorn's own flag
            await anyio.sleep(0.05)

        async def slow_call() -> None:
            async with mcp_http(f"http://127.0.0.1:{port}", None) as client:
                await client.list_tools()  # the client validates results against the listed schemas
                results.append(
                    await call(client, "mnote.page.update_title", **write_args("slow", title="Done"))
                )

        group.start_soon(slow_call)
        while app.dispatcher.inflight.count == 0:  # noqa: ASYNC110 - wait for the call to be in flight
            await anyio.sleep(0.02)
        server.should_exit = True  # what SIGTERM does
    assert results and results[0]["ok"], results
    assert results[0]["result"]["revision"] == 2
    await app.kernel.aclose()


@pytest.mark.slow
async def test_a_call_past_its_timeout_is_retryable_and_its_retry_writes_once(db: Path) -> None:
    app = _slow_app(db, delay=0.5, call_timeout=0.2)
    from mcp import Client

    async with Client(app.server(), mode="legacy") as client:
        timed_out = await call(client, "mnote.page.update_title", **write_args("t", title="Later"))
    assert timed_out["error"]["code"] == "mnote_tool_runtime_unavailable"
    assert timed_out["error"]["retryable"] is True
    assert timed_out["error"]["details"] == {"timeoutSeconds": 0.2}
    await anyio.sleep(0.8)  # the abandoned command finishes in its thread and commits, whole
    before = dump(db, audit=False)
    async with connect(db) as client:
        retry = await call(client, "mnote.page.update_title", **write_args("t", title="Later"))
    assert dump(db, audit=False) == before, (
        "the retry wrote nothing: the timed-out call had already committed"
    )
    assert retry["ok"] and retry["result"]["idempotentReplay"] is True
    assert retry["result"]["revision"] == 2
    store = LocalStore(db)
    try:
        assert [r["effect"] for r in store.audit_trail(trace_id="trace_t")] == ["write", "replay"]
    finally:
        store.close()
    await app.kernel.aclose()
