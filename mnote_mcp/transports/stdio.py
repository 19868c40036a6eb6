"""The stdio transport: newline-delimited JSON-RPC on the process's stdin and stdout, on the event loop.

It feeds the SDK `Server` the same pair of message streams `mcp.server.stdio.stdio_server()` does
(`SessionMessage` items in, `SessionMessage` items out), with three differences:

- No thread hop per line: the pipes are read and written non-blocking by the event loop (a stdin
  or stdout that the loop cannot watch, a regular file or /dev/null, falls back to plain reads in a
  worker thread and plain writes).
- Framing is strict and every bad line is answered (`frame`): a line that is not UTF-8 JSON
  (invalid UTF-8, lone surrogates, nesting deeper than 1,024 levels, NaN, broken text) gets -32700,
  JSON that is not a valid message (a batch, an id that is null, fractional or boolean, a wrong
  `jsonrpc`, no method) gets -32600, with the request's id where it can be recovered and `null`
  otherwise. A line longer than `--max-line-bytes` is skipped to its end and answered -32600. A bad
  *response* (there is nothing to answer it with) and a batch of notifications alone are logged.
- stdout carries the protocol only: while serving, fd 1 points at stderr and fd 0 at /dev/null, the
  wire is on private duplicates (as the SDK's transport does), so a stray print cannot corrupt it.

Its end: on stdin EOF the read stream ends; the server (through `DrainingReadStream`) lets calls in
flight answer, closes the write stream, and everything written is flushed before we return.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import stat
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Final, cast

import anyio
import mcp_types
import orjson
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from mnote_mcp.config import DEFAULT_MAX_LINE_BYTES

logger = logging.getLogger("mnote_mcp")

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
READ_CHUNK: Final = 256 * 1024
# Messages parsed ahead of the server, and answers queued for the pipe: small, so memory stays bounded.
STREAM_BUFFER: Final = 32
# How long the end waits for answers to reach a client that stopped reading stdout.
WRITE_GRACE_SECONDS: Final = 10.0
_VALIDATE = mcp_types.jsonrpc_message_adapter.validate_python
_REQUEST = mcp_types.JSONRPCRequest.model_construct
_NOTIFICATION = mcp_types.JSONRPCNotification.model_construct
_RESPONSE_TYPE = mcp_types.JSONRPCResponse
# How many answers ready at once go to the pipe in one write.
WRITE_BATCH: Final = 64
_MISSING: Final = object()
# What a JSON-RPC answer's `id` may be: the request's (a string or a number), or null.
JsonRpcId = str | int | float | None


@dataclass(frozen=True, slots=True)
class Framed:
    """One line's outcome: a message for the server, or bytes to answer with, or neither (logged)."""

    message: SessionMessage | None = None
    answer: bytes | None = None


def error_answer(code: int, message: str, request_id: JsonRpcId = None) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _answer(value: object) -> Framed:
    return Framed(answer=orjson.dumps(value) + b"\n")


def _why_not_json(line: bytes, error: orjson.JSONDecodeError) -> str:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as bad:
        return f"Parse error: invalid UTF-8 at byte {bad.start}"
    return f"Parse error: {error.msg} at character {error.pos}"


def _recoverable_id(value: object) -> JsonRpcId:
    """An id fit to answer with: a string or a number (JSON-RPC allows fractions); else null."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    return value


def _invalid(obj: object) -> tuple[str, JsonRpcId] | None:
    """Why a parsed JSON value is not a JSON-RPC request, notification or response; None if it is."""
    if not isinstance(obj, dict):
        return "Invalid Request: a message is a JSON object", None
    request_id = obj.get("id", _MISSING)
    answer_id = None if request_id is _MISSING else _recoverable_id(request_id)
    if obj.get("jsonrpc") != "2.0":
        return 'Invalid Request: "jsonrpc" must be "2.0"', answer_id
    if request_id is not _MISSING and (isinstance(request_id, bool) or not isinstance(request_id, str | int)):
        return "Invalid Request: an id is a string or an integer", answer_id
    if ("method" in obj) + ("result" in obj) + ("error" in obj) > 1:
        return 'Invalid Request: one of "method", "result" and "error"', answer_id
    if "method" in obj:
        if not isinstance(obj["method"], str):
            return 'Invalid Request: "method" must be a string', answer_id
        if obj.get("params") is not None and not isinstance(obj["params"], dict):  # [] and 0 too
            return 'Invalid Request: "params" must be an object', answer_id
    elif request_id is _MISSING or ("result" not in obj and "error" not in obj):
        return 'Invalid Request: no "method" (nor "result" or "error" with an id)', answer_id
    return None


def _batch_answer(items: list[object]) -> Framed:
    if not items:
        return _answer(error_answer(INVALID_REQUEST, "Invalid Request: an empty batch"))
    answers = []
    for item in items:
        wrong = _invalid(item)
        if wrong is not None:
            answers.append(error_answer(INVALID_REQUEST, wrong[0], wrong[1]))
        elif isinstance(item, dict) and "method" in item and "id" in item:
            answers.append(
                error_answer(INVALID_REQUEST, "Invalid Request: batches are not supported", item["id"])
            )
    if not answers:
        logger.warning(
            "stdio: dropped a batch of %d notification(s) or response(s): batches are not supported",
            len(items),
        )
        return Framed()
    return _answer(answers)


def frame(line: bytes) -> Framed:
    """One line of stdin (its newline removed) to a message for the server or an answer to write."""
    try:
        obj = orjson.loads(line)  # strict: UTF-8, no lone surrogates, no NaN, depth <= 1024
    except orjson.JSONDecodeError as error:
        if not line.strip():
            return Framed()  # a blank line carries nothing (a stray \r\n from a client, say)
        why = _why_not_json(line, error)
        logger.warning("stdio: answered -32700 to a line of %d bytes: %s", len(line), why)
        return _answer(error_answer(PARSE_ERROR, why))
    if isinstance(obj, list):
        logger.warning("stdio: refused a batch of %d item(s)", len(obj))
        return _batch_answer(obj)
    wrong = _invalid(obj)
    if wrong is None and "method" in obj:
        # Checked field by field above: built without a second validation pass over the params (a
        # test compares the result with the SDK's own parse, so a change of its models fails loudly).
        fields = {"jsonrpc": "2.0", "method": obj["method"]}
        if obj.get("params") is not None:
            fields["params"] = obj["params"]
        if "id" in obj:
            return Framed(message=SessionMessage(_REQUEST(**fields, id=obj["id"])))
        return Framed(message=SessionMessage(_NOTIFICATION(**fields)))
    if wrong is None:
        try:
            return Framed(message=SessionMessage(_VALIDATE(obj, by_name=False)))
        except ValidationError as error:
            first = error.errors()[0] if error.error_count() else {"msg": "invalid"}
            wrong = f"Invalid Request: {first['msg']}", obj.get("id")
    why, answer_id = wrong
    if isinstance(obj, dict) and "method" not in obj and ("result" in obj or "error" in obj):
        logger.warning("stdio: dropped a response that cannot be answered (id %r): %s", answer_id, why)
        return Framed()
    logger.warning("stdio: answered -32600 (id %r): %s", answer_id, why)
    return _answer(error_answer(INVALID_REQUEST, why, answer_id))


def line_too_long(limit: int) -> bytes:
    why = f"Invalid Request: a line longer than {limit} bytes (--max-line-bytes)"
    logger.warning("stdio: answered -32600: %s", why)
    return orjson.dumps(error_answer(INVALID_REQUEST, why)) + b"\n"


# -- the pipes ------------------------------------------------------------------------------------------


class _Out(asyncio.Protocol):
    """stdout as an asyncio write pipe: ordered, non-blocking writes with flow control."""

    def __init__(self) -> None:
        self._transport: asyncio.WriteTransport | None = None
        self._writable = asyncio.Event()
        self._writable.set()
        self.closed = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.WriteTransport, transport)  # uvloop's is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        self._writable.set()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def write(self, data: bytes) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(data)

    async def drain(self) -> None:
        if not self._writable.is_set():
            await self._writable.wait()

    async def aclose(self) -> None:
        if self._transport is not None:
            self._transport.close()  # flushes what is buffered, then calls connection_lost
            await self.closed


class _BlockingOut:
    """stdout the loop cannot watch (a regular file, /dev/null): plain writes, which do not wait."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self.broken = False

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view and not self.broken:
            try:
                view = view[os.write(self._fd, view) :]
            except BlockingIOError:
                continue
            except OSError:
                self.broken = True

    async def drain(self) -> None:
        await anyio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        return None


class _In(asyncio.Protocol):
    """stdin as an asyncio read pipe, in chunks; reading pauses while the chunks wait unread."""

    def __init__(self) -> None:
        self.chunks: asyncio.Queue[bytes] = asyncio.Queue()
        self._transport: asyncio.ReadTransport | None = None
        self._paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.ReadTransport, transport)

    def data_received(self, data: bytes) -> None:
        self.chunks.put_nowait(data)
        if self.chunks.qsize() >= 4 and self._transport is not None:
            self._transport.pause_reading()
            self._paused = True

    def eof_received(self) -> bool | None:
        self.chunks.put_nowait(b"")
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.chunks.put_nowait(b"")

    async def read(self) -> bytes:
        chunk = await self.chunks.get()
        if self._paused and self.chunks.qsize() < 2 and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()
        return chunk

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


class _BlockingIn:
    """stdin the loop cannot watch (a regular file, /dev/null): reads in a worker thread."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def read(self) -> bytes:
        return await anyio.to_thread.run_sync(os.read, self._fd, READ_CHUNK, abandon_on_cancel=True)

    def close(self) -> None:
        return None


class _Fd:
    """A duplicate of a wire descriptor as the pipe object a loop wants. asyncio's loop closes the pipe
    object with the transport; uvloop (libuv) closes the descriptor itself and must not see it twice."""

    def __init__(self, fd: int) -> None:
        self._fd = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
        self._ours = not type(asyncio.get_running_loop()).__module__.startswith("uvloop")

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        if self._ours:
            self._ours = False
            with contextlib.suppress(OSError):
                os.close(self._fd)


def _watchable(fd: int) -> bool:
    """A pipe or a socket: what the loop can watch (a regular file, /dev/null or a terminal is not, or
    not on every loop: uvloop aborts on a regular file)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


async def _open_in(fd: int) -> _In | _BlockingIn:
    if _watchable(fd):
        pipe = _Fd(fd)
        try:
            _, protocol = await asyncio.get_running_loop().connect_read_pipe(_In, pipe)
        except (ValueError, OSError):
            pipe.close()
        else:
            return protocol
    return _BlockingIn(fd)


async def _open_out(fd: int) -> _Out | _BlockingOut:
    if _watchable(fd):
        pipe = _Fd(fd)
        try:
            _, protocol = await asyncio.get_running_loop().connect_write_pipe(_Out, pipe)
        except (ValueError, OSError):
            pipe.close()
        else:
            return protocol
    os.set_blocking(fd, True)
    return _BlockingOut(fd)


@contextlib.contextmanager
def _claimed_stdio() -> Iterator[tuple[int, int]]:
    """The wire on private duplicates of fd 0 and 1; fd 0 reads /dev/null and fd 1 writes to stderr
    while serving (a stray print or child process cannot touch the wire); all restored after."""
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    blocking = os.get_blocking(wire_in), os.get_blocking(wire_out)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
    finally:
        os.close(null)
    try:
        yield wire_in, wire_out
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()  # stray output goes to stderr, not to the wire about to be restored
        for fd, was_blocking, std in ((wire_in, blocking[0], 0), (wire_out, blocking[1], 1)):
            with contextlib.suppress(OSError):
                os.set_blocking(fd, was_blocking)  # the file description is shared (a terminal, say)
            with contextlib.suppress(OSError):
                os.dup2(fd, std)
            with contextlib.suppress(OSError):
                os.close(fd)


async def _read_lines(
    source: _In | _BlockingIn,
    out: _Out | _BlockingOut,
    messages: MemoryObjectSendStream[SessionMessage | Exception],
    max_line_bytes: int,
) -> None:
    pending = bytearray()
    skipping = False  # inside a line over the limit: drop bytes up to its newline
    async with messages:
        while chunk := await source.read():
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                if skipping:
                    skipping = False
                elif len(pending) + end - start > max_line_bytes:
                    out.write(line_too_long(max_line_bytes))
                else:
                    if pending:
                        pending += chunk[start:end]
                        line = bytes(pending)
                    else:
                        line = chunk[start:end]
                    framed = frame(line)
                    if framed.message is not None:
                        try:
                            await messages.send(framed.message)
                        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                            return  # the server stopped reading
                    elif framed.answer is not None:
                        out.write(framed.answer)
                        await out.drain()
                pending.clear()
                start = end + 1
            if not skipping:
                pending += chunk[start:] if start else chunk
                if len(pending) > max_line_bytes:
                    pending.clear()
                    skipping = True
                    out.write(line_too_long(max_line_bytes))
        if pending.strip() and not skipping:  # a last line without its newline
            framed = frame(bytes(pending))
            if framed.message is not None:
                with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await messages.send(framed.message)
            elif framed.answer is not None:
                out.write(framed.answer)


def encode(item: SessionMessage) -> bytes:
    """One message as its line. A result (already JSON-ready: the SDK dumps it in JSON mode) goes
    through orjson; anything else, or a result orjson cannot encode, through the SDK's own dump."""
    message = item.message
    if type(message) is _RESPONSE_TYPE:
        try:
            return orjson.dumps({"jsonrpc": "2.0", "id": message.id, "result": message.result}) + b"\n"
        except TypeError:
            pass
    return message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"


async def _write_messages(
    out: _Out | _BlockingOut, answers: MemoryObjectReceiveStream[SessionMessage]
) -> None:
    """Answers to the pipe in order; those ready together leave in one write (one wake-up of the client)."""
    async with answers:
        async for item in answers:
            lines = [encode(item)]
            while len(lines) < WRITE_BATCH:
                try:
                    lines.append(encode(answers.receive_nowait()))
                except (anyio.WouldBlock, anyio.EndOfStream):
                    break
            out.write(b"".join(lines) if len(lines) > 1 else lines[0])
            await out.drain()


@asynccontextmanager
async def stdio_transport(
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]
]:
    """Serve over stdin/stdout: `async with stdio_transport() as (read, write): await server.run(read, write, ...)`."""
    with _claimed_stdio() as (wire_in, wire_out):
        source = await _open_in(wire_in)
        out = await _open_out(wire_out)
        read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](STREAM_BUFFER)
        write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](STREAM_BUFFER)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(_read_lines, source, out, read_send, max_line_bytes)
                writer_done = anyio.Event()

                async def write_all() -> None:
                    try:
                        await _write_messages(out, write_receive)
                    finally:
                        writer_done.set()

                group.start_soon(write_all)
                try:
                    yield read_receive, write_send
                finally:
                    await write_send.aclose()
                    with anyio.move_on_after(WRITE_GRACE_SECONDS):
                        await writer_done.wait()  # every answer handed to the pipe
                    group.cancel_scope.cancel()  # the reader, if stdin is still open
        finally:
            source.close()
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await out.aclose()
