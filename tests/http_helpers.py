"""Real HTTP servers for tests: `mnote-mcp serve --transport http --port 0` as a subprocess, its URL
read from its stderr, stopped (SIGTERM) and reaped when the test ends."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from tests.helpers import ROOT

_LISTENING = re.compile(r"listening on (http://\S+) ")


@dataclass
class RunningServer:
    url: str
    process: subprocess.Popen[str]
    stderr: list[str] = field(default_factory=list)

    @property
    def log(self) -> str:
        return "".join(self.stderr)


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


@contextmanager
def http_server(
    db: Path | str, *args: str, env: dict[str, str] | None = None, timeout: float = 30
) -> Iterator[RunningServer]:
    process = subprocess.Popen(
        serve_argv(db, "--locale", "en", *args),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
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
        if not found.wait(timeout) or not server.url:
            raise RuntimeError(f"server did not start:\n{server.log}")
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        reader.join(timeout=5)


def start_failure(
    db: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a serve command expected to refuse to start."""
    return subprocess.run(
        serve_argv(db, *args),
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
    )


@asynccontextmanager
async def mcp_http(
    url: str, token: str | None, mode: str = "legacy", **headers: str
) -> AsyncIterator[Client]:
    sent = {**({"Authorization": f"Bearer {token}"} if token else {}), **headers}
    async with (
        httpx2.AsyncClient(headers=sent, timeout=30) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode) as client,
    ):
        yield client


@asynccontextmanager
async def mcp_sse(url: str, token: str | None, **headers: str) -> AsyncIterator[Client]:
    sent = {**({"Authorization": f"Bearer {token}"} if token else {}), **headers}
    async with Client(sse_client(f"{url}/sse", headers=sent), mode="legacy") as client:
        yield client


def wait_until(predicate: Any, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())
