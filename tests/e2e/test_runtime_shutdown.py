"""`runtime serve` stopping (issue 30): a call still running when the shutdown grace ends, and a call
that arrives while the runtime shuts down, get the runtime protocol's own refusal, `503` with the error
body `mnote_tool_runtime_unavailable` (`shutting_down`), never uvicorn's bare `500 Internal Server
Error` (which a relay takes for a bug: not retried); the relay (`kernel/relays/http.py`) retries it and its
tool answers a retryable `runtime_unavailable` envelope. A real `runtime serve` process on 127.0.0.1
whose store another connection holds locked, stopped with SIGTERM; its grace is set through
`MNOTE_RUNTIME_SHUTDOWN_GRACE` (a runtime that does not know it ignores it, and these tests then fail
on what it does).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2
import pytest
from mcp import Client, StdioServerParameters

from mnote_mcp.kernel.protocol import IDEMPOTENCY_HEADER, OPERATIONS, encode_key
from tests.support.helpers import ROOT, dump, envelope_of, write_args
from tests.support.http_helpers import address
from tests.support.runtimes import RuntimeProcess, note_command

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
TOKEN = "runtime-service-token"
GRACE = 2.0
SHUTTING_DOWN = {
    "code": "mnote_tool_runtime_unavailable",
    "reason": "shutting_down",
    "details": {"cause": "shutting_down"},
}


def command_request(key: str) -> tuple[bytes, dict[str, str]]:
    """A protocol request that writes (an AI note), as a relay sends it."""
    op = OPERATIONS["execute"]
    command = note_command(key)
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Content-Type": "application/json",
        IDEMPOTENCY_HEADER: encode_key(op.key(command)) if op.key is not None else key,
    }
    return json.dumps(op.request.encode(command)).encode(), headers


def raw_request(
    sock: socket.socket, body: bytes, headers: dict[str, str]
) -> tuple[int, dict[str, Any], float]:
    """POST /v1/commands on an open connection: the status, the JSON body and how long it took."""
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    sent = f"POST /v1/commands HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}Content-Length: {len(body)}\r\n\r\n"
    started = time.monotonic()
    sock.sendall(sent.encode() + body)
    return (*read_response(sock), time.monotonic() - started)


def read_response(sock: socket.socket) -> tuple[int, dict[str, Any]]:
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        assert chunk, f"the connection was closed without an answer: {received!r}"
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "the connection was closed mid-answer"
        body += chunk
    return int(head.split(b" ", 2)[1]), json.loads(body) if body else {}


def relay_params(url: str) -> StdioServerParameters:
    """mnote-mcp over stdio, relaying to the runtime at `url`."""
    args = ["-m", "mnote_mcp", "serve", "--kernel", url, "--actor", "user_editor", "--locale", "en"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "MNOTE_RUNTIME_TOKEN": TOKEN}
    return StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(ROOT))


async def test_calls_in_flight_and_arriving_during_shutdown_get_the_protocols_retryable_error(
    db: Path, tmp_path: Path
) -> None:
    before = dump(db)
    runtime = RuntimeProcess(db=db, workdir=tmp_path, token=TOKEN)
    runtime.start(env={"MNOTE_STORE_BUSY_TIMEOUT": "30", "MNOTE_RUNTIME_SHUTDOWN_GRACE": str(GRACE)})
    holder = sqlite3.connect(db, isolation_level=None)
    answers: dict[str, Any] = {}
    try:
        async with Client(relay_params(runtime.url), read_timeout_seconds=60) as client:
            holder.execute("BEGIN IMMEDIATE")  # every write now waits for the lock (30 s)

            async def raw_in_flight() -> None:
                body, headers = command_request("k_raw")
                answer = await anyio.to_thread.run_sync(
                    lambda: httpx2.post(
                        f"{runtime.url}/v1/commands", content=body, headers=headers, timeout=60
                    )
                )
                answers["raw"] = (answer.status_code, answer.json(), answer.headers, time.monotonic())

            async def relayed() -> None:
                args = write_args("k_relay", content=[{"type": "paragraph", "text": "x"}], mode="append")
                answers["relay"] = envelope_of(await client.call_tool("mnote.page.save", args))

            async with anyio.create_task_group() as group:
                group.start_soon(raw_in_flight)
                group.start_soon(relayed)
                with anyio.fail_after(30):
                    while sum(r["path"] == "/v1/commands" for r in runtime.records()) < 2:  # noqa: ASYNC110
                        await anyio.sleep(0.05)
                await anyio.sleep(0.5)  # both are waiting for the lock now
                idle = socket.create_connection(address(runtime.url), timeout=30)  # kept alive
                idle.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                assert (await anyio.to_thread.run_sync(read_response, idle))[0] == 200
                assert runtime.process is not None
                stopped = time.monotonic()
                runtime.process.send_signal(signal.SIGTERM)
                await anyio.sleep(0.5)  # the shutdown has begun, the grace runs
                body, headers = command_request("k_arriving")
                arriving = await anyio.to_thread.run_sync(raw_request, idle, body, headers)
                idle.close()
            exit_status = await anyio.to_thread.run_sync(runtime.wait_exit, 30.0)
            exited = time.monotonic() - stopped
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        runtime.stop()

    # Arriving while the runtime shuts down: refused at once, with the protocol's error.
    status, error, took = arriving
    assert (status, error) == (503, {"error": SHUTTING_DOWN}), arriving
    assert took < 1.5, f"answered after {took:.1f}s"
    # In flight past the grace: the same, when the grace ends.
    status, error, headers, answered = answers["raw"]
    assert (status, error) == (503, {"error": SHUTTING_DOWN}), (status, error)
    assert headers.get("retry-after") is not None
    assert GRACE - 0.6 < answered - stopped < GRACE + 5, f"answered {answered - stopped:.1f}s after the stop"
    # Through the relay: retried, then a retryable runtime_unavailable envelope (no bare 500 in it).
    envelope = answers["relay"]
    assert envelope["ok"] is False and envelope["error"]["code"] == "mnote_tool_runtime_unavailable", envelope
    assert envelope["error"]["retryable"] is True
    details = envelope["error"]["details"]
    assert details["attempts"] == 3 and details.get("status") in (None, 503), details
    # The process ends soon after the grace (uvicorn ends it by the signal it caught); nothing written.
    assert exit_status in (0, -signal.SIGTERM) and exited < GRACE + 8, (exit_status, exited)
    assert dump(db) == before
