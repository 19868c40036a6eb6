"""stdio framing (issue 9, item 10): raw bytes into a real `mnote-mcp` process, the exact answers out.

Every line that is not a valid JSON-RPC message gets the error JSON-RPC prescribes: -32700 when the
line is not JSON (invalid UTF-8, lone surrogates, nesting past the limit, broken text), -32600 when
it is JSON but not a request (batches, ids that are null, fractional or boolean, a wrong `jsonrpc`),
with the request's id when it can be recovered and `null` otherwise; invalid UTF-8 writes nothing.
After each bad line a `ping` proves the server still answers, and everything written before that
ping's answer is the bad line's answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from mnote_mcp.kernel.sqlite.opening import open_store
from tests.support.helpers import RAW_INITIALIZE, ROOT, envelope_in, write_args
from tests.support.timing import patience

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
TIMEOUT = patience(30)
MAX_LINE = 64 * 1024


class RawStdio:
    """A `mnote-mcp serve` process driven with raw bytes on its stdin."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self._sync = 0

    async def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        await self.process.stdin.drain()

    async def line(self) -> Any:
        assert self.process.stdout is not None
        raw = await asyncio.wait_for(self.process.stdout.readline(), TIMEOUT)
        assert raw, "stdout ended"
        return json.loads(raw)

    async def until(self, answer_id: Any) -> list[Any]:
        """Every message up to the answer with this id (that answer excluded)."""
        seen: list[Any] = []
        while True:
            message = await self.line()
            if isinstance(message, dict) and message.get("id") == answer_id and "error" not in message:
                return seen
            seen.append(message)

    async def answers_to(self, line: bytes) -> list[Any]:
        """What the server writes in answer to one line (a ping after it marks the end)."""
        self._sync += 1
        sync = f"sync-{self._sync}"
        await self.send(line + b"\n" + json.dumps({"jsonrpc": "2.0", "id": sync, "method": "ping"}).encode())
        await self.send(b"\n")
        return await self.until(sync)


@asynccontextmanager
async def raw_server(db: Path, *args: str) -> AsyncIterator[RawStdio]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mnote_mcp",
        "serve",
        "--db",
        str(db),
        "--locale",
        "en",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        limit=16 * 1024 * 1024,
    )
    server = RawStdio(process)
    try:
        await server.send(json.dumps(RAW_INITIALIZE).encode() + b"\n")
        assert (await server.line())["id"] == 1
        await server.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        yield server
    finally:
        if process.returncode is None:
            assert process.stdin is not None
            process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), TIMEOUT)
            except TimeoutError:
                process.kill()
                await process.wait()


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def ping(request_id: bytes, params: bytes = b"{}") -> bytes:
    return b'{"jsonrpc":"2.0","id":' + request_id + b',"method":"ping","params":' + params + b"}"


# line -> the (id, error code) pairs answered before the next ping; a list inside is a batch answer.
CASES: dict[str, tuple[bytes, list[Any]]] = {
    "not json": (b"hello", [(None, -32700)]),
    "broken json": (b'{"jsonrpc":"2.0","id":3,"method":"ping"', [(None, -32700)]),
    "trailing garbage": (ping(b"3") + b" x", [(None, -32700)]),
    "invalid utf-8": (ping(b"4", b'{"x":"\xff\xfe"}'), [(None, -32700)]),
    "overlong utf-8": (ping(b"4", b'{"x":"\xc0\xaf"}'), [(None, -32700)]),
    "lone high surrogate": (ping(b"5", b'{"x":"\\ud800"}'), [(None, -32700)]),
    "lone low surrogate": (ping(b"5", b'{"x":"\\udc00 tail"}'), [(None, -32700)]),
    "nesting of 1100 levels": (ping(b"6", b'{"x":' + nested(1100) + b"}"), [(None, -32700)]),
    "NaN": (ping(b"6", b'{"x":NaN}'), [(None, -32700)]),
    "a number": (b"42", [(None, -32600)]),
    "a string": (b'"ping"', [(None, -32600)]),
    "null": (b"null", [(None, -32600)]),
    "empty batch": (b"[]", [(None, -32600)]),
    "batch": (
        b"[" + ping(b"7") + b',{"jsonrpc":"2.0","method":"notifications/progress"},' + ping(b'"b"') + b",3]",
        [[(7, -32600), ("b", -32600), (None, -32600)]],
    ),
    "id null": (ping(b"null"), [(None, -32600)]),
    "id 1.5": (ping(b"1.5"), [(1.5, -32600)]),
    "id 2.0": (ping(b"2.0"), [(2.0, -32600)]),
    "id true": (ping(b"true"), [(None, -32600)]),
    "id false": (ping(b"false"), [(None, -32600)]),
    "id object": (ping(b'{"a":1}'), [(None, -32600)]),
    "jsonrpc 1.0": (b'{"jsonrpc":"1.0","id":9,"method":"ping"}', [(9, -32600)]),
    "no jsonrpc": (b'{"id":9,"method":"ping"}', [(9, -32600)]),
    "method not a string": (b'{"jsonrpc":"2.0","method":5}', [(None, -32600)]),
    "neither method nor result": (b'{"jsonrpc":"2.0","id":10}', [(10, -32600)]),
    "params a list": (ping(b"11", b"[1]"), [(11, -32600)]),
    "params an empty list": (ping(b"13", b"[]"), [(13, -32600)]),
    "params 0": (ping(b"14", b"0"), [(14, -32600)]),
    "params false": (ping(b"15", b"false"), [(15, -32600)]),
    "params an empty string": (ping(b"16", b'""'), [(16, -32600)]),
    "line over the limit": (ping(b"12", b'{"x":"' + b"y" * MAX_LINE + b'"}'), [(None, -32600)]),
    "blank line": (b"   \r", []),
}


def shape(answer: Any) -> Any:
    if isinstance(answer, list):
        return [shape(item) for item in answer]
    assert answer.get("jsonrpc") == "2.0" and set(answer) == {"jsonrpc", "id", "error"}, answer
    assert isinstance(answer["error"]["message"], str) and answer["error"]["message"], answer
    return (answer["id"], answer["error"]["code"])


async def test_each_malformed_line_gets_its_json_rpc_error(tmp_path: Path) -> None:
    got: dict[str, list[Any]] = {}
    async with raw_server(tmp_path / "m.db", "--max-line-bytes", str(MAX_LINE)) as server:
        for name, (line, _) in CASES.items():
            got[name] = [shape(answer) for answer in await server.answers_to(line)]
        # Deep but within the limit: an ordinary answer, not a parse error.
        deep = await server.answers_to(ping(b"13", b'{"x":' + nested(900) + b"}"))
        assert deep == [{"jsonrpc": "2.0", "id": 13, "result": {}}]
    assert got == {name: expected for name, (_, expected) in CASES.items()}


async def test_invalid_utf8_in_a_write_is_a_parse_error_and_writes_nothing(db: Path) -> None:
    args = write_args("k_utf8", content=[{"type": "paragraph", "text": "MARKER"}], mode="append")
    request = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 20,
            "method": "tools/call",
            "params": {"name": "mnote.page.save", "arguments": args},
        }
    ).encode()
    request = request.replace(b"MARKER", b"bad \xff\xfe bytes")
    async with raw_server(db, "--actor", "user_editor") as server:
        answers = await server.answers_to(request)
    assert [shape(answer) for answer in answers] == [(None, -32700)]
    store = open_store(db)
    try:
        with store.transaction(write=False) as conn:
            (written,) = conn.execute("SELECT count(*) FROM blocks WHERE text LIKE 'bad %'").fetchone()
        assert written == 0 and store.audit_trail(trace_id="trace_t") == []
    finally:
        store.close()


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
async def test_partial_lines_and_eof_mid_call_are_answered(db: Path, loop: str) -> None:
    args = write_args("k_eof", content=[{"type": "paragraph", "text": "after eof"}], mode="append")
    call = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 30,
            "method": "tools/call",
            "params": {"name": "mnote.page.save", "arguments": args},
        }
    ).encode()
    async with raw_server(
        db, "--actor", "user_editor", *(["--no-uvloop"] if loop == "asyncio" else [])
    ) as server:
        for start in range(0, len(call), 50):  # one request in pieces, with pauses between them
            await server.send(call[start : start + 50])
            await asyncio.sleep(0.01)
        await server.send(b"\n" + ping(b"31") + b"\n")
        assert server.process.stdin is not None
        server.process.stdin.close()  # EOF while the write is in flight
        answers = {message["id"]: message for message in [await server.line(), await server.line()]}
        assert await asyncio.wait_for(server.process.wait(), TIMEOUT) == 0
    assert answers[31]["result"] == {}
    assert envelope_in(answers[30]["result"])["ok"] is True
