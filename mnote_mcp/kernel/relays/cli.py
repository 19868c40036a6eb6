"""The kernel port relayed through the `mnote-cli` JSON adapter: one process per call.

Each call writes one JSON request to the adapter's stdin and reads one JSON reply from its stdout
(docs/runtime-protocol.md, "The mnote-cli JSON protocol"). A non-zero exit, a timeout (the process
group is killed), or a reply that does not follow the protocol is `mnote_tool_runtime_unavailable`;
a refusal the adapter reports in its reply is the same `MnoteError` the embedded kernel would raise.
The adapter's stderr is relayed into our log (stderr), never to stdout.

No call is retried here: a process that failed is likely to fail again at once, and the caller is
told `retryable: true` (a command's retry carries its idempotency key, so it cannot write twice).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import signal
import subprocess
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import anyio
from anyio.abc import ByteReceiveStream, Process

from mnote_mcp.base.tracecontext import traceparent
from mnote_mcp.kernel.errors import Reason
from mnote_mcp.kernel.protocol import (
    CLI_PROTOCOL_VERSION,
    Ans,
    MalformedReplyError,
    Operation,
    Req,
    decode_error,
    unavailable,
)
from mnote_mcp.kernel.relays.relay import Relay

if TYPE_CHECKING:
    from pydantic import JsonValue

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 10.0
MAX_PROCESSES = 8
MAX_REPLY_BYTES = 64 * 1024 * 1024


def parse_command_line(spec: str) -> list[str]:
    """`cli:PATH [ARGS...]` → argv. Shell-style quoting, never a shell: `cli:'/opt/my tools/mnote-cli' --json`."""
    argv = shlex.split(spec)
    if not argv:
        raise ValueError("--kernel cli: needs the adapter's executable, e.g. cli:/usr/local/bin/mnote-cli")
    return argv


class CliKernel(Relay):
    def __init__(
        self,
        argv: Sequence[str],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        env: Mapping[str, str] | None = None,
        max_processes: int = MAX_PROCESSES,
    ) -> None:
        if not argv:
            raise ValueError("the mnote-cli adapter needs a command line")
        if timeout <= 0:
            raise ValueError("the runtime timeout must be positive")
        self.argv = list(argv)
        self.timeout = timeout
        self._env = dict(env) if env is not None else None
        # A burst of calls must not fork a burst of processes.
        self._limiter = anyio.CapacityLimiter(max_processes)

    async def aclose(self) -> None:
        """Nothing outlives a call: every process is reaped before its call returns."""

    # -- one call ---------------------------------------------------------------------------------

    async def call(self, op: Operation[Req, Ans], request: Req) -> Ans:
        wire = op.request.encode(request)
        fields: dict[str, JsonValue]
        if op.carrier is None:  # a flat request: its fields are the CLI request's own
            assert isinstance(wire, dict)
            fields = wire
        else:
            fields = {op.carrier: wire}
        if op.trace is not None:
            fields["traceparent"] = traceparent(op.trace(request))
        envelope = {"version": CLI_PROTOCOL_VERSION, "op": op.name, **fields}
        data = json.dumps(envelope, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        status, stdout, stderr = await self.run_once(data)
        self._relay_stderr(stderr, failed=status != 0)
        if status != 0:
            raise unavailable("cli", Reason.EXIT_STATUS, exitStatus=status)
        try:
            reply = json.loads(stdout)
        except ValueError:
            raise self._malformed(op.name, "the reply is not one JSON document") from None
        if isinstance(reply, dict) and reply.get("ok") is True and "value" in reply:
            try:
                return op.decode(reply["value"])
            except MalformedReplyError as exc:
                raise self._malformed(op.name, str(exc)) from None
        if isinstance(reply, dict) and reply.get("ok") is False:
            error = decode_error(reply.get("error"))
            if error is not None:
                raise error
        raise self._malformed(op.name, "the reply is neither {ok: true, value} nor {ok: false, error}")

    async def run_once(self, data: bytes) -> tuple[int, bytes, bytes]:
        """One request's bytes to a new process of the program: (exit status, stdout, stderr), within
        the timeout, the output bound and the cap on processes at once, or runtime_unavailable. What
        `call` reads its reply from; the conformance kit reads replies whole from it too."""
        async with self._limiter:
            return await self._run(data)

    async def _run(self, data: bytes) -> tuple[int, bytes, bytes]:
        """Run the adapter once; returns (exit status, stdout, stderr) or raises runtime_unavailable."""
        try:
            process = await anyio.open_process(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._env,
                start_new_session=True,  # its own process group, so a timeout kills helpers too
            )
        except OSError as exc:
            logger.error("cannot start the mnote-cli adapter %s: %s", self.argv[0], exc)
            raise unavailable("cli", Reason.SPAWN) from None
        out, err = _Sink(process), _Sink(process)
        try:
            with anyio.fail_after(self.timeout):
                async with anyio.create_task_group() as group:
                    assert process.stdout is not None and process.stderr is not None
                    group.start_soon(out.drain, process.stdout)
                    group.start_soon(err.drain, process.stderr)
                    await _feed(process, data)
                    status = await process.wait()
        except TimeoutError:
            logger.warning("the mnote-cli adapter did not answer within %.1fs; killed", self.timeout)
            self._relay_stderr(b"".join(err.chunks), failed=True)
            raise unavailable("cli", Reason.TIMEOUT) from None
        finally:
            await _reap(process)
        if out.overflow or err.overflow:
            raise unavailable("cli", Reason.REPLY_TOO_LARGE)
        return status, b"".join(out.chunks), b"".join(err.chunks)

    def _relay_stderr(self, stderr: bytes, *, failed: bool) -> None:
        level = logging.WARNING if failed else logging.INFO
        for line in stderr.decode("utf-8", "replace").splitlines():
            if line.strip():
                logger.log(level, "mnote-cli: %s", line)

    def _malformed(self, op: str, why: str) -> Exception:
        logger.warning("mnote-cli %s reply does not follow the protocol: %s", op, why)
        return unavailable("cli", Reason.MALFORMED_REPLY)


class _Sink:
    """One output stream of the adapter, read to its end; a runaway stream kills the adapter."""

    def __init__(self, process: Process) -> None:
        self.process = process
        self.chunks: list[bytes] = []
        self.size = 0
        self.overflow = False

    async def drain(self, stream: ByteReceiveStream) -> None:
        async for chunk in stream:
            self.size += len(chunk)
            if self.size > MAX_REPLY_BYTES:
                self.overflow = True
                _kill(self.process)
                self.chunks.clear()
                return
            self.chunks.append(chunk)


async def _feed(process: Process, data: bytes) -> None:
    assert process.stdin is not None
    try:
        await process.stdin.send(data)
        await process.stdin.aclose()
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass  # the adapter exited without reading; its exit status tells what happened


async def _reap(process: Process) -> None:
    """Kill the adapter's process group if it is still running, then wait for it: no leftovers."""
    _kill(process)
    with anyio.CancelScope(shield=True):
        await process.aclose()


def _kill(process: Process) -> None:
    if process.returncode is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except PermissionError:  # the group is not ours to signal: the process alone, then
        with contextlib.suppress(ProcessLookupError):
            process.kill()
