"""A raw JSON-RPC client (no SDK), so that client overhead does not hide server cost.

Over stdio: newline-delimited JSON on the child's pipes, responses matched to requests by id.
Over streamable HTTP: plain POSTs, the SSE answer's `data:` line parsed.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

PROTOCOL = "2025-11-25"
INIT = {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}


class StdioPeer:
    """One server process driven over its stdin/stdout."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self._next_id = 0
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def spawn(
        cls, argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None
    ) -> StdioPeer:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            limit=64 * 1024 * 1024,
        )
        return cls(process)

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            message = json.loads(line)
            future = self._waiting.pop(message.get("id", -1), None)
            if future is not None and not future.done():
                future.set_result(message)

    def send(self, method: str, params: Mapping[str, Any] | None = None) -> asyncio.Future[dict[str, Any]]:
        self._next_id += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[self._next_id] = future
        self._write({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": dict(params or {})})
        return future

    def notify(self, method: str) -> None:
        self._write({"jsonrpc": "2.0", "method": method})

    def _write(self, message: Mapping[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return await self.send(method, params)

    async def initialize(self) -> None:
        await self.request("initialize", INIT)
        self.notify("notifications/initialized")

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return await self.request("tools/call", {"name": tool, "arguments": dict(arguments)})

    async def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), 10)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
        self._reader.cancel()


async def cold_start(
    argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None
) -> float:
    """Seconds from spawning the server to the answer of its first tools/list."""
    started = time.perf_counter()
    peer = await StdioPeer.spawn(argv, env, cwd)
    await peer.initialize()
    await peer.request("tools/list")
    elapsed = time.perf_counter() - started
    await peer.close()
    return elapsed


class HttpPeer:
    """One streamable HTTP session, driven with plain POSTs."""

    def __init__(self, url: str, headers: Mapping[str, str] | None = None) -> None:
        import httpx2

        self.url = url
        self._http = httpx2.AsyncClient(timeout=60, limits=httpx2.Limits(max_connections=64))
        self._headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            **(headers or {}),
        }
        self._next_id = 0

    async def _post(self, message: Mapping[str, Any]) -> dict[str, Any] | None:
        response = await self._http.post(self.url, content=json.dumps(message), headers=self._headers)
        response.raise_for_status()
        if "mcp-session-id" in response.headers:
            self._headers["mcp-session-id"] = response.headers["mcp-session-id"]
        if not response.content:
            return None
        text = response.text
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            for line in text.splitlines():
                if line.startswith("data:"):
                    data: dict[str, Any] = json.loads(line[5:])
                    return data
            return None
        parsed: dict[str, Any] = json.loads(text)
        return parsed

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        self._next_id += 1
        answer = await self._post(
            {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": dict(params or {})}
        )
        assert answer is not None
        return answer

    async def initialize(self) -> None:
        await self.request("initialize", INIT)
        self._headers["mcp-protocol-version"] = PROTOCOL
        await self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return await self.request("tools/call", {"name": tool, "arguments": dict(arguments)})

    async def close(self) -> None:
        await self._http.aclose()
