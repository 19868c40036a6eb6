"""Real HTTP servers for tests: `mnote-mcp serve --transport http --port 0` as a subprocess, its URL
read from its stderr, stopped (SIGTERM) and reaped when the test ends."""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import mcp.types as types
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from tests.support.helpers import ROOT, every_tool_env
from tests.support.timing import patience

_LISTENING = re.compile(r"listening on (http://\S+) ")


@dataclass
class RunningServer:
    url: str
    process: subprocess.Popen[str]
    stderr: list[str] = field(default_factory=list)

    @property
    def log(self) -> str:
        return "".join(self.stderr)


class ResourceUpdates:
    """A client's message handler that keeps the URIs of `notifications/resources/updated`."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.arrived = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))
            self.arrived.set()


def write_tokens(path: Path, tokens: dict[str, dict[str, Any]]) -> Path:
    """A tokens file (mode 0600) mapping each token to {actorId, scopes?, workspaces?}."""
    path.write_text(json.dumps({"tokens": [{"token": t, **grant} for t, grant in tokens.items()]}))
    path.chmod(0o600)
    return path


def serve_argv(db: Path | str, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "mnote_mcp",
        "serve",
        "--transport",
        "http",
        "--port",
        "0",
        "--db",
        str(db),
        *args,
    ]


def file_limit(limit: int) -> None:
    """In the child before it runs: at most `limit` open files (soft and hard), as `ulimit -n`."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


@contextmanager
def http_server(
    db: Path | str,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 30,
    open_files: int | None = None,
    root: Path = ROOT,
) -> Iterator[RunningServer]:
    """The server, with at most `open_files` file descriptors if given (`ulimit -n`); `root` is the
    checkout whose code runs (another one's, for a benchmark's before and after)."""
    process = subprocess.Popen(
        serve_argv(db, "--locale", "en", *args),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=root,
        # every tool, as the in-process servers (another tree's release may not know `all`)
        env={
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            **every_tool_env(root),
            **(env or {}),
        },
        preexec_fn=None if open_files is None else partial(file_limit, open_files),
    )
    server = RunningServer(url="", process=process)
    found = threading.Event()

    def pump() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            server.stderr.append(line)
            match = _LISTENING.search(line)
            if match and not found.is_set():
                server.url = match.group(1)
                found.set()
        found.set()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        if not found.wait(patience(timeout)) or not server.url:
            raise RuntimeError(f"server did not start:\n{server.log}")
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=patience(20))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        reader.join(timeout=patience(5))


def start_failure(
    db: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a serve command expected to refuse to start."""
    return subprocess.run(
        serve_argv(db, *args),
        capture_output=True,
        text=True,
        timeout=patience(30),
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
    )


@asynccontextmanager
async def mcp_http(
    url: str, token: str | None, mode: str = "legacy", **headers: str
) -> AsyncIterator[Client]:
    async with mcp_http_client(url, token, headers, mode=mode) as client:
        yield client


@asynccontextmanager
async def mcp_http_client(
    url: str,
    token: str | None,
    headers: Mapping[str, str] | None = None,
    *,
    mode: str = "legacy",
    http_timeout: float | None = None,
    elicitation_callback: Any = None,
) -> AsyncIterator[Client]:
    """`mcp_http` with the HTTP client's timeout (a bench may wait longer than a test) and, if given,
    an elicitation callback (the client then declares form elicitation)."""
    sent = {**({"Authorization": f"Bearer {token}"} if token else {}), **(headers or {})}
    async with (
        httpx2.AsyncClient(headers=sent, timeout=http_timeout or patience(30)) as http,
        Client(
            streamable_http_client(f"{url}/mcp", http_client=http),
            mode=mode,
            elicitation_callback=elicitation_callback,
        ) as client,
    ):
        yield client


@asynccontextmanager
async def mcp_sse(
    url: str, token: str | None, *, elicitation_callback: Any = None, **headers: str
) -> AsyncIterator[Client]:
    sent = {**({"Authorization": f"Bearer {token}"} if token else {}), **headers}
    async with Client(
        sse_client(f"{url}/sse", headers=sent), mode="legacy", elicitation_callback=elicitation_callback
    ) as client:
        yield client


def wait_until(predicate: Any, timeout: float = 10) -> bool:
    """`predicate()` true within `patience(timeout)`, polled every 50 ms."""
    deadline = time.monotonic() + patience(timeout)
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


def address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def raw_connection(url: str, data: bytes, *, timeout: float = 10) -> socket.socket:
    """A TCP connection to the server at `url` that has sent `data` (raw HTTP, or nothing)."""
    sock = socket.create_connection(address(url), timeout=patience(timeout))
    if data:
        sock.sendall(data)
    return sock


def read_until_closed(sock: socket.socket) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and how long that took."""
    started, received = time.monotonic(), b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    finally:
        sock.close()
    return received, time.monotonic() - started


def trickle(url: str, data: bytes, piece: int = 1000) -> tuple[bytes, float]:
    """Send `data` (a request's head) a piece at a time until the server stops reading, its end replaced
    by a header line that never ends; then what it answered. Unfinished, the head is never whole in
    one of the server's reads, however a loaded machine's reads gather the pieces: both parsers see
    more than 16 KiB of headers still incomplete (h11 bounds only those; httptools's guard counts each
    header line as the next one starts)."""
    assert data.endswith(b"\r\n\r\n"), "a request's head"
    data = data[:-2] + b"X-Unfinished: "
    sock = raw_connection(url, b"")
    for start in range(0, len(data), piece):
        try:
            sock.sendall(data[start : start + piece])
        except (BrokenPipeError, ConnectionResetError):
            break
    return read_until_closed(sock)


def cut_off(held: list[socket.socket]) -> list[bool]:
    """Which of `held` the server has answered 408 (a 408 already sent), closing each."""
    cut = []
    for sock in held:
        sock.settimeout(0.2)
        try:
            cut.append(sock.recv(64).startswith(b"HTTP/1.1 408"))
        except TimeoutError:
            cut.append(False)
        sock.close()
    return cut


def waits_until_one_ends(waiting: socket.socket, busy: list[socket.socket]) -> None:
    """`waiting` (its request sent) is not answered while `busy` hold every connection the server
    allows, and is once one of them ends; closes them all."""
    waiting.settimeout(1)
    try:
        early = waiting.recv(64)
    except TimeoutError:
        early = b""
    assert not early, f"answered while every connection was busy: {early!r}"
    busy[0].close()
    waiting.settimeout(patience(10))
    assert waiting.recv(64).startswith(b"HTTP/1.1 200"), "accepted once a connection ends"
    for sock in [waiting, *busy[1:]]:
        sock.close()
