"""Lifecycle behaviour: a shutdown lets calls in flight answer; a call past the per-call timeout answers
`mnote_tool_runtime_unavailable`, and its retry is safe; a call still waiting for a lock when the
shutdown grace runs out answers `shutting_down` (retryable), and the process exits at once."""

from __future__ import annotations

import json
import signal
import socket
import sqlite3
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from mnote_mcp.app import App, build_registry
from mnote_mcp.calls.dispatch import Dispatcher
from mnote_mcp.config import ServerConfig
from mnote_mcp.kernel.port import Command, CommandOutcome
from mnote_mcp.kernel.sqlite.connection import Database, StoreBusyError
from mnote_mcp.kernel.sqlite.dialect import SqliteDialect
from mnote_mcp.kernel.sqlite.opening import open_store
from mnote_mcp.kernel.store.kernel import StoreKernel
from mnote_mcp.kernel.store.store import Store
from mnote_mcp.transports.auth.tokens import AuthSetup
from mnote_mcp.transports.http import build_http_app
from mnote_mcp.transports.server import make_server
from tests.support.helpers import (
    RAW_INITIALIZE,
    UNASKED,
    call,
    connect,
    dump,
    envelope_in,
    page_args,
    write_args,
)
from tests.support.http_helpers import http_server, mcp_http, wait_until
from tests.support.timing import patience

pytestmark = pytest.mark.anyio


class SlowStore(Store):
    """The SQLite store as if another process held the write lock for `delay` seconds: the inline
    attempt is told the store is busy, and the waiting attempt (on a worker thread) waits."""

    def __init__(self, path: Path, delay: float) -> None:
        super().__init__(SqliteDialect(Database(path)))
        self.delay = delay

    def execute(self, command: Command, *, inline: bool = False) -> CommandOutcome:
        if inline:
            raise StoreBusyError
        time.sleep(self.delay)
        return super().execute(command)


class SlowKernel(StoreKernel):
    def __init__(self, path: Path, delay: float) -> None:
        super().__init__(SlowStore(path, delay))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _slow_app(db: Path, delay: float, **config: Any) -> App:
    # A shared page's rename asks first (issue 31); these tests time the write itself, as a client that
    # cannot be asked has it made (`UNASKED` in tests/support/helpers.py).
    cfg = replace(
        ServerConfig(db=db, locale="en", demo=False, actor="user_editor", unsafe_no_auth=True, **UNASKED),
        **config,
    )
    kernel = SlowKernel(db, delay)
    dispatcher = Dispatcher(
        build_registry(cfg),
        kernel,
        locale="en",
        call_timeout=cfg.call_timeout,
        confirmation=cfg.confirmation,
    )
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
    store = open_store(db)
    try:
        assert [r["effect"] for r in store.audit_trail(trace_id="trace_t")] == ["write", "replay"]
    finally:
        store.close()
    await app.kernel.aclose()


async def test_stopping_answers_the_calls_in_flight_and_the_calls_after_as_shutting_down(db: Path) -> None:
    """`InFlight.stop` (a shutdown past its grace, HTTP or stdio): a call still running answers
    `shutting_down` at once, retryable, without waiting for its thread; so does a call made after."""
    app = _slow_app(db, delay=6)  # the thread sleeps 6 s; its call answers at once
    from mcp import Client

    answers: list[dict[str, Any]] = []
    async with Client(app.server(), mode="legacy") as client:
        with anyio.fail_after(4):
            async with anyio.create_task_group() as group:

                async def slow_call() -> None:
                    answers.append(
                        await call(client, "mnote.page.update_title", **write_args("s", title="X"))
                    )

                group.start_soon(slow_call)
                while app.dispatcher.inflight.count == 0:  # noqa: ASYNC110 - wait for the call to be in flight
                    await anyio.sleep(0.02)
                assert app.dispatcher.inflight.stop() == 1
        answers.append(await call(client, "mnote.page.get", **page_args()))
    assert len(answers) == 2
    for envelope in answers:
        assert envelope["error"]["code"] == "mnote_tool_runtime_unavailable", envelope
        assert envelope["error"]["retryable"] is True
        assert envelope["error"]["details"] == {"cause": "shutting_down"}
    await app.kernel.aclose()


def _rpc(url: str, headers: dict[str, str], message: dict[str, Any]) -> httpx2.Response:
    return httpx2.post(f"{url}/mcp", json=message, headers=headers, timeout=patience(60))


def _answer(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC answer of a POST, whichever way it is framed."""
    if response.headers["content-type"].startswith("text/event-stream"):
        (line,) = [line for line in response.text.splitlines() if line.startswith("data:")]
        answer: dict[str, Any] = json.loads(line[5:])
        return answer
    return dict(response.json())


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_past_the_grace_answers_a_call_waiting_for_a_lock_and_exits_at_once(
    db: Path, stop: signal.Signals
) -> None:
    """Over real HTTP: another connection holds the store's write lock, a write waits for it (busy
    timeout 30 s), the server is stopped with a 1 s grace. The write answers, after the grace, a
    proper envelope, `mnote_tool_runtime_unavailable` (`shutting_down`), retryable (on the
    old code: a bare HTTP 500 after 4 s); the process exits within seconds of the grace (on the old
    code a SIGINT waited the whole busy timeout for the lock); nothing was written."""
    before = dump(db)
    holder = sqlite3.connect(db, isolation_level=None)
    answers: list[httpx2.Response] = []
    with http_server(
        db,
        "--unsafe-no-auth",
        "--actor",
        "user_editor",
        "--shutdown-grace",
        "1",
        "--store-busy-timeout",
        "30",
    ) as server:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        opened = _rpc(server.url, headers, RAW_INITIALIZE)
        headers = {**headers, "mcp-protocol-version": "2025-11-25"}
        if "mcp-session-id" in opened.headers:
            headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        _rpc(server.url, headers, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        write = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "mnote.page.update_title", "arguments": write_args("k_stop", title="Stopped")},
        }
        holder.execute("BEGIN IMMEDIATE")
        try:
            sender = threading.Thread(target=lambda: answers.append(_rpc(server.url, headers, write)))
            sender.start()
            in_flight = wait_until(
                lambda: (
                    httpx2.get(f"{server.url}/healthz", timeout=patience(10)).json()["callsInFlight"] == 1
                ),
                20,
            )
            assert in_flight, "the write never reached the kernel"
            stopped = time.monotonic()
            server.process.send_signal(stop)
            sender.join(timeout=patience(60))
            answered = time.monotonic() - stopped
            server.process.wait(timeout=patience(60))
            exited = time.monotonic() - stopped
        finally:
            holder.execute("ROLLBACK")
            holder.close()
    assert answers, "no answer"
    (response,) = answers
    assert response.status_code == 200, (response.status_code, response.text[:300])
    envelope = envelope_in(_answer(response)["result"])
    error = envelope["error"]
    assert error["code"] == "mnote_tool_runtime_unavailable" and error["retryable"] is True, error
    assert error["details"]["cause"] == "shutting_down", error
    assert 0.9 <= answered < patience(6), f"answered {answered:.1f}s after the stop (grace 1 s)"
    assert exited < patience(8), f"exited {exited:.1f}s after the stop (grace 1 s, lock held for 30 s)"
    assert dump(db) == before, "the abandoned write left something behind"
