"""The reference runtime's own HTTP server (`runtime serve`) holds its clients to the MCP transport's
limits (issue 9's residual): the service token read from the headers before any body, refusals of
an unread body closing the connection, a deadline for the headers and for the body, a body size
limit, a 16 KiB bound on a request's line and headers, and a connection cap at accept. The limits
are set through their `MNOTE_RUNTIME_*` variables (a server that does not know them ignores them:
these tests then fail on what the server does). A real `runtime serve` process on 127.0.0.1."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2
import pytest

from mnote_mcp.kernel.errors import ErrorCode, MnoteError
from mnote_mcp.kernel.relays.cli import CliKernel
from mnote_mcp.kernel.relays.http import HttpKernel
from mnote_mcp.kernel.sqlite.opening import open_store
from tests.support.http_helpers import (
    cut_off,
    raw_connection,
    read_until_closed,
    trickle,
    waits_until_one_ends,
)
from tests.support.runtimes import RuntimeProcess, note_command, reference_runtime, runtime_cli_command
from tests.support.timing import patience

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
TOKEN = "runtime-service-token"
PARSERS = pytest.mark.parametrize("parser", ["httptools", "h11"])


@contextmanager
def runtime(db: Path, workdir: Path, parser: str, **limits: float) -> Iterator[RuntimeProcess]:
    env = {f"MNOTE_RUNTIME_{name.upper()}": str(value) for name, value in limits.items()}
    with reference_runtime(db, workdir, token=TOKEN, env={**env, "MNOTE_RUNTIME_HTTP_PARSER": parser}) as rt:
        yield rt


def _post_head(token: str | None, length: int, path: str = "/v1/pages/query") -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"{auth}Content-Length: {length}\r\n\r\n"
    ).encode()


@PARSERS
def test_unauthenticated_and_slow_clients_are_refused_early_and_cut_off(
    db: Path, tmp_path: Path, parser: str
) -> None:
    with runtime(db, tmp_path, parser, header_timeout=1, body_timeout=1) as rt:
        # No token, or a wrong one, announcing 4 MiB and sending 64 KiB of it: 401 from the headers,
        # and the connection closed at once (the body is never read).
        for token in (None, "not-the-token"):
            sock = raw_connection(rt.url, _post_head(token, 4 * 1024 * 1024) + b" " * 65536)
            reply, took = read_until_closed(sock)
            assert reply.startswith(b"HTTP/1.1 401") and took < patience(1), (reply[:80], took)
        # Half-sent headers: 408 and closed after the header deadline.
        reply, took = read_until_closed(
            raw_connection(rt.url, b"POST /v1/pages/query HTTP/1.1\r\nHost: x\r\n")
        )
        assert reply.startswith(b"HTTP/1.1 408") and 0.8 < took < patience(5), (reply[:80], took)
        # The right token, but the body never completes: 408 and closed after the body deadline.
        reply, took = read_until_closed(raw_connection(rt.url, _post_head(TOKEN, 1000) + b'{"actorId"'))
        assert reply.startswith(b"HTTP/1.1 408") and 0.8 < took < patience(5), (reply[:80], took)
        assert rt.process is not None and rt.process.poll() is None


@PARSERS
async def test_bodies_over_the_limit_are_refused_and_the_relay_says_why(
    db: Path, tmp_path: Path, parser: str
) -> None:
    limit = 20_000
    with runtime(db, tmp_path, parser, max_body_bytes=limit) as rt:
        # Announced over the limit: 413 before a byte of it is read, the connection closed.
        reply, took = read_until_closed(raw_connection(rt.url, _post_head(TOKEN, 64 * 1024 * 1024)))
        assert reply.startswith(b"HTTP/1.1 413") and took < patience(1), (reply[:80], took)
        assert b'"code":"%s"' % ErrorCode.INVALID_ARGUMENT.value.encode() in reply, reply
        # Chunked (no length announced), sent past the limit: 413 once the limit is passed.
        chunked = (
            b"POST /v1/commands HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\n"
            b"Transfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"
        )
        sock = raw_connection(rt.url, chunked)
        piece = b"%x\r\n%s\r\n" % (4096, b" " * 4096)
        try:
            for _ in range(limit // 4096 + 2):
                sock.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass
        reply, _ = read_until_closed(sock)
        assert reply.startswith(b"HTTP/1.1 413"), reply[:80]
        # Through the relay: a command under the limit is written, one over it is the caller's
        # invalid_argument naming the limit (not retried: the same body would be refused again).
        kernel = HttpKernel(rt.url, token=TOKEN)
        try:
            written = await kernel.execute(note_command("small", "a short note"))
            assert written.command_id and not written.replayed, written
            with pytest.raises(MnoteError) as refused:
                await kernel.execute(note_command("large", "x" * (2 * limit)))
            assert refused.value.code is ErrorCode.INVALID_ARGUMENT and not refused.value.retryable
            assert f"over {limit} bytes" in refused.value.details["reason"], refused.value.details
            assert "--max-body-bytes" in refused.value.details["reason"]
        finally:
            await kernel.aclose()


@PARSERS
def test_headers_are_bounded(db: Path, tmp_path: Path, parser: str) -> None:
    """A request line and headers over 16 KiB: 400 and closed, with either parser."""
    with runtime(db, tmp_path, parser) as rt:
        padding = b"X-Padding: " + b"a" * 8000 + b"\r\n"
        big = b"GET /v1/health HTTP/1.1\r\nHost: x\r\n" + padding * 3 + b"\r\n"
        reply, _ = trickle(rt.url, big)
        assert reply.startswith(b"HTTP/1.1 400"), reply[:80]
        fits = b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + padding + b"\r\n"
        reply, _ = read_until_closed(raw_connection(rt.url, fits))
        assert reply.startswith(b"HTTP/1.1 200"), reply[:80]


@PARSERS
def test_connections_over_the_cap_make_room_or_wait_to_be_accepted(
    db: Path, tmp_path: Path, parser: str
) -> None:
    """At the cap the longest-waiting half-sent request is cut (408) to let a new client in; when
    every connection is busy with a request (bodies being sent), one more is not accepted until one
    of them ends, and is served then."""
    with runtime(db, tmp_path, parser, max_connections=4) as rt:
        held = [raw_connection(rt.url, b"POST /v1/pages/query HTTP/1.1\r\n") for _ in range(4)]
        time.sleep(0.3)
        health = raw_connection(rt.url, b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert health.recv(64).startswith(b"HTTP/1.1 200"), "a client that sends its request gets in"
        health.close()
        assert cut_off(held) == [True, False, False, False]
        busy = [raw_connection(rt.url, _post_head(TOKEN, 1000) + b"{") for _ in range(4)]
        time.sleep(0.3)
        waiting = raw_connection(rt.url, b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        waits_until_one_ends(waiting, busy)


async def test_the_audit_trail_is_asked_for_at_most_max_audit_records(db: Path, tmp_path: Path) -> None:
    """`GET /v1/audit?limit=N`: N is the client's, so it has a bound (--max-audit-records): over it is
    400 invalid_argument at `/limit`; at it, or without a limit, the records are answered."""
    with runtime(db, tmp_path, "httptools", max_audit_records=3) as rt:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        kernel = HttpKernel(rt.url, token=TOKEN)
        try:
            for key in ("a", "b", "c", "d"):
                await kernel.execute(note_command(key))
        finally:
            await kernel.aclose()
        over = httpx2.get(f"{rt.url}/v1/audit", params={"limit": "4"}, headers=auth, timeout=patience(10))
        assert over.status_code == 400, over.text
        error = over.json()["error"]
        assert error["code"] == ErrorCode.INVALID_ARGUMENT.value and error["details"]["pointer"] == "/limit"
        assert "--max-audit-records" in error["details"]["reason"]
        huge = httpx2.get(
            f"{rt.url}/v1/audit", params={"limit": str(2**62)}, headers=auth, timeout=patience(10)
        )
        assert huge.status_code == 400, huge.text
        for params in ({"limit": "3"}, {}):
            answered = httpx2.get(f"{rt.url}/v1/audit", params=params, headers=auth, timeout=patience(10))
            assert answered.status_code == 200, answered.text
            assert len(answered.json()["records"]) == 3, params


@pytest.mark.parametrize("source", ["flag", "env"])
async def test_the_cli_runtime_reads_at_most_max_body_bytes(db: Path, source: str) -> None:
    """`runtime cli` reads its one request from stdin at most --max-body-bytes long (its variable is
    MNOTE_RUNTIME_MAX_BODY_BYTES, as for `runtime serve`): a longer one is refused invalid_argument
    naming the limit, which the cli relay passes on unretried, and nothing is written."""
    limit = 4096
    if source == "flag":
        kernel = CliKernel([*runtime_cli_command(db), "--max-body-bytes", str(limit)])
    else:
        kernel = CliKernel(
            runtime_cli_command(db), env={**os.environ, "MNOTE_RUNTIME_MAX_BODY_BYTES": str(limit)}
        )
    written = await kernel.execute(note_command("small", "a short note"))
    assert written.command_id and not written.replayed, written
    with pytest.raises(MnoteError) as refused:
        await kernel.execute(note_command("large", "x" * (2 * limit)))
    assert refused.value.code is ErrorCode.INVALID_ARGUMENT and not refused.value.retryable
    assert f"over {limit} bytes" in refused.value.details["reason"], refused.value.details
    assert "--max-body-bytes" in refused.value.details["reason"]
    store = open_store(db)
    try:
        keys = [record.get("idempotencyKey") for record in store.audit_trail(limit=1000)]
    finally:
        store.close()
    assert "small" in keys and "large" not in keys, keys
