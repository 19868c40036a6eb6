"""Runtimes for the relay tests: the reference runtime as a real subprocess, and small fakes in process.

Everything binds 127.0.0.1. The reference runtime gets a free port (and keeps it across a restart);
fakes are served on a socket bound to port 0 in the test's own event loop. Every context manager
stops what it started, also when the test fails.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from mnote_mcp.kernel.port import Command, CommandName, Correlation
from tests.support.helpers import ROOT
from tests.support.http_helpers import file_limit
from tests.support.timing import patience

START_TIMEOUT = patience(30.0)


def note_command(key: str, content: str | None = None, trace: str = "t") -> Command:
    """A real command (an AI note on ws_1/doc_1 by user_editor) for a runtime to run."""
    return Command(
        name=CommandName.ARTIFACT_AI_NOTE_CREATE,
        workspace_id="ws_1",
        document_id="doc_1",
        actor_id="user_editor",
        correlation=Correlation("s", "r", "c", trace),
        idempotency_key=key,
        dry_run=False,
        payload={"content": content if content is not None else f"note for {key}"},
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def mnote_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "mnote_mcp", *args]


def runtime_cli_command(db: Path | str) -> list[str]:
    """The reference mnote-cli adapter, as `--kernel cli:` runs it."""
    return mnote_command("runtime", "cli", "--db", str(db), "--no-demo")


def new_service_token() -> str:
    return secrets.token_urlsafe(16)


@dataclass
class RuntimeProcess:
    """`mnote-mcp runtime serve` on a store, with its request record, restartable on the same port.

    It requires `token` (a new one unless given); `token=None` starts it as an operator would with
    none: it then generates one into its data directory (`data_home`, in the workdir)."""

    db: Path | str
    workdir: Path
    token: str | None = field(default_factory=new_service_token)
    demo: bool = False
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def record(self) -> Path:
        return self.workdir / "record.jsonl"

    @property
    def data_home(self) -> Path:
        """XDG_DATA_HOME of the runtime: where it keeps a generated service token."""
        return self.workdir / "data"

    @property
    def log(self) -> Path:
        return self.workdir / f"runtime-{self.starts}.log"

    def start(self, env: dict[str, str] | None = None, open_files: int | None = None) -> None:
        """Start it (at most `open_files` descriptors if given, as `ulimit -n`) and wait until healthy."""
        assert self.process is None or self.process.poll() is not None, "already running"
        self.starts += 1
        args = ["runtime", "serve", "--db", str(self.db), "--host", "127.0.0.1", "--port", str(self.port)]
        args += ["--record", str(self.record)] + (["--demo"] if self.demo else ["--no-demo"])
        environment = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "XDG_DATA_HOME": str(self.data_home),
            **(env or {}),
        }
        environment.pop("MNOTE_RUNTIME_TOKEN", None)
        if self.token:
            environment["MNOTE_RUNTIME_TOKEN"] = self.token
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                mnote_command(*args),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=environment,
                cwd=ROOT,
                preexec_fn=None if open_files is None else partial(file_limit, open_files),
            )
        self._wait_healthy()

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"the runtime exited at start:\n{self.log.read_text()}")
            try:
                if httpx2.get(f"{self.url}/v1/health", timeout=1.0, trust_env=False).status_code == 200:
                    return
            except httpx2.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"the runtime did not become healthy:\n{self.log.read_text()}")

    def wait_exit(self, timeout: float = 10.0) -> int:
        assert self.process is not None
        return self.process.wait(timeout)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)

    def records(self) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text(encoding="utf-8").splitlines()]


@contextmanager
def reference_runtime(
    db: Path | str,
    workdir: Path,
    *,
    token: str | None = None,
    demo: bool = False,
    env: dict[str, str] | None = None,
) -> Iterator[RuntimeProcess]:
    """A runtime requiring `token` (a new one unless given: `runtime.token`)."""
    runtime = RuntimeProcess(db=db, workdir=workdir, token=token or new_service_token(), demo=demo)
    try:
        runtime.start(env)
        yield runtime
    finally:
        runtime.stop()


@asynccontextmanager
async def serve_app(app: ASGIApp) -> AsyncIterator[str]:
    """Serve an ASGI app on 127.0.0.1 in this event loop; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_config=None, lifespan="off", access_log=False, timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(server.serve, [sock])
            with anyio.fail_after(START_TIMEOUT):
                while not server.started:  # noqa: ASYNC110 - uvicorn offers a flag, not an event
                    await anyio.sleep(0.01)
            try:
                yield f"http://127.0.0.1:{port}"
            finally:
                server.should_exit = True
    finally:
        sock.close()


@asynccontextmanager
async def serve_raw(reply: bytes) -> AsyncIterator[str]:
    """A TCP server that answers every connection with `reply` (not HTTP) and hangs up."""

    async def handle(stream: Any) -> None:
        async with stream:
            try:
                await stream.receive()
                await stream.send(reply)
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                pass

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(listener.serve, handle)
            try:
                yield f"http://127.0.0.1:{port}"
            finally:
                group.cancel_scope.cancel()
    finally:
        await listener.aclose()


@dataclass
class Seen:
    """What a fake runtime received: one entry per request."""

    requests: list[dict[str, Any]] = field(default_factory=list)

    def note(self, request: Request) -> None:
        self.requests.append(
            {
                "method": request.method,
                "path": request.url.path,
                "traceparent": request.headers.get("traceparent"),
                "idempotencyKey": request.headers.get("Idempotency-Key"),
            }
        )


def fake_runtime(answer: Callable[[Request, int], Awaitable[Response]]) -> tuple[Starlette, Seen]:
    """A runtime that answers every request with `answer(request, n)` (n counts from 1)."""
    seen = Seen()

    async def endpoint(request: Request) -> Response:
        seen.note(request)
        return await answer(request, len(seen.requests))

    app = Starlette(routes=[Route("/{path:path}", endpoint, methods=["GET", "POST"])])
    return app, seen


class FaultProxy:
    """Forwards every request to a real runtime, then spoils the reply as `mode` says.

    The runtime has done the work (a command committed) and the caller does not hear of it: the case
    that only an idempotency key makes safe to retry. Modes: pass, slow (the reply comes after
    `delay` seconds), error (500), garbage (a 200 that is not the protocol).
    """

    def __init__(self, upstream: str, delay: float = 5.0) -> None:
        self.upstream = upstream
        self.delay = delay
        self.mode = "pass"
        self.forwarded = 0
        self.app = Starlette(routes=[Route("/{path:path}", self._forward, methods=["GET", "POST"])])

    async def _forward(self, request: Request) -> Response:
        headers = {
            name: value
            for name, value in request.headers.items()
            if name.lower() in ("content-type", "traceparent", "idempotency-key", "authorization")
        }
        async with httpx2.AsyncClient(
            base_url=self.upstream, trust_env=False, timeout=patience(30)
        ) as client:
            reply = await client.request(
                request.method,
                request.url.path,
                params=dict(request.query_params),
                content=await request.body(),
                headers=headers,
            )
        self.forwarded += 1
        if self.mode == "slow":
            await anyio.sleep(self.delay)
        elif self.mode == "error":
            return PlainTextResponse("internal server error", status_code=500)
        elif self.mode == "garbage":
            return Response(b'{"outcome": <html>', status_code=200, media_type="application/json")
        return Response(reply.content, status_code=reply.status_code, media_type="application/json")
