"""Faults between the server and its runtime: every one is a retryable runtime_unavailable, never a
crash or a half result, and a retry with the same idempotency key afterwards writes exactly once.

First the adapters alone against small fake runtimes (what is retried, what is not), then the whole
path: `mnote-mcp --kernel http://...` over stdio against the reference runtime, with the runtime
down, slow, failing or answering garbage after it committed, and killed between commit and reply.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from mnote_mcp.base.tracecontext import trace_id_of
from mnote_mcp.kernel.errors import ErrorCode, MnoteError
from mnote_mcp.kernel.port import Command, CommandName, Correlation, PageQuery
from mnote_mcp.kernel.relays.cli import MAX_REPLY_BYTES, CliKernel
from mnote_mcp.kernel.relays.http import HttpKernel
from mnote_mcp.kernel.sqlite.opening import open_store
from mnote_mcp.runtime.faults import CRASH_AFTER_COMMIT_ENV, CRASH_EXIT_STATUS
from tests.support.helpers import ROOT, envelope_of, write_args
from tests.support.runtimes import (
    FaultProxy,
    RuntimeProcess,
    fake_runtime,
    free_port,
    reference_runtime,
    runtime_cli_command,
    serve_app,
    serve_raw,
)
from tests.support.timing import patience

pytestmark = pytest.mark.anyio
CORRELATION = Correlation("sess_f", "run_f", "call_f", "trace_f")
TEXT = "written exactly once"
SAVE = write_args("k_fault", content=[{"type": "paragraph", "text": TEXT}], mode="append")


def command(key: str = "k_fault", text: str = TEXT) -> Command:
    return Command(
        name=CommandName.PAGE_BODY_SAVE,
        workspace_id="ws_1",
        document_id="doc_1",
        actor_id="user_editor",
        correlation=CORRELATION,
        idempotency_key=key,
        dry_run=False,
        payload={"mode": "append", "content": [{"type": "paragraph", "text": text}]},
    )


QUERY = PageQuery("ws_1", "doc_1", "user_editor", CORRELATION)


async def unavailable(call: Any) -> MnoteError:
    with pytest.raises(MnoteError) as caught:
        await call
    error = caught.value
    assert error.code is ErrorCode.RUNTIME_UNAVAILABLE and error.retryable
    return error


def writes(db: Path, key: str = "k_fault") -> int:
    """Write records of the key (one per real write; replays have their own), checked against the body."""
    with sqlite3.connect(db) as conn:
        audited = int(
            conn.execute(
                "SELECT count(*) FROM audit WHERE idempotency_key = ? AND effect = 'write'", (key,)
            ).fetchone()[0]
        )
    store = open_store(db)
    try:
        in_body = store.dump().count(json.dumps(TEXT))
    finally:
        store.close()
    assert audited == in_body, "every audited write is in the body once, and nothing else is"
    return audited


# -- the http adapter against fakes --------------------------------------------------------------


async def test_refused_connection_is_retried_then_unavailable() -> None:
    kernel = HttpKernel(f"http://127.0.0.1:{free_port()}", retries=2)
    try:
        error = await unavailable(kernel.execute(command()))
        read = await unavailable(kernel.get_page(QUERY))
    finally:
        await kernel.aclose()
    assert error.details == {"adapter": "http", "cause": "connect", "attempts": 3}
    assert read.details["cause"] == "connect"


async def test_a_slow_runtime_times_out_once_and_is_not_hammered() -> None:
    async def slow(request: Request, n: int) -> Response:
        await anyio.sleep(5)
        return JSONResponse({})

    app, seen = fake_runtime(slow)
    async with serve_app(app) as url:
        kernel = HttpKernel(url, timeout=0.3, retries=2)
        started = time.monotonic()
        try:
            error = await unavailable(kernel.execute(command()))
        finally:
            await kernel.aclose()
    assert error.details == {"adapter": "http", "cause": "timeout", "attempts": 1}
    assert time.monotonic() - started < 2
    assert len(seen.requests) == 1


@pytest.mark.parametrize(
    ("reply", "cause"),
    [
        (PlainTextResponse("Internal Server Error", status_code=500), "status"),
        (JSONResponse({"error": {"code": "mnote_tool_internal", "reason": "unexpected"}}, 500), "status"),
        (PlainTextResponse("<html>not json</html>", status_code=200), "malformed_reply"),
        (JSONResponse({"outcome": {"commandName": 7, "revision": "two"}}), "malformed_reply"),
        (JSONResponse({"page": {}}), "malformed_reply"),
        (JSONResponse(["not", "an", "object"]), "malformed_reply"),
        (PlainTextResponse("Not Found", status_code=404), "status"),
        (JSONResponse({"error": {"no": "code"}}, status_code=409), "status"),
        (Response(status_code=302, headers={"Location": "/elsewhere"}), "status"),
    ],
    ids=[
        "500-text",
        "500-json",
        "200-html",
        "200-wrong-shape",
        "200-wrong-key",
        "200-array",
        "404",
        "409-bad-body",
        "302",
    ],
)
async def test_error_statuses_and_garbage_are_unavailable_without_a_retry(
    reply: Response, cause: str
) -> None:
    async def answer(request: Request, n: int) -> Response:
        return reply

    app, seen = fake_runtime(answer)
    async with serve_app(app) as url:
        kernel = HttpKernel(url, retries=2)
        try:
            error = await unavailable(kernel.execute(command()))
        finally:
            await kernel.aclose()
    assert error.details["cause"] == cause and error.details["attempts"] == 1
    assert len(seen.requests) == 1, "an answer that is wrong is not asked for again"


async def test_bytes_that_are_not_http_are_unavailable() -> None:
    async with serve_raw(b"SSH-2.0-OpenSSH_9.6\r\n\x00\xff garbage\r\n\r\n") as url:
        kernel = HttpKernel(url, retries=1)
        try:
            error = await unavailable(kernel.get_page(QUERY))
        finally:
            await kernel.aclose()
    assert error.details["cause"] == "connection_lost" and error.details["attempts"] == 2


async def test_unavailable_statuses_are_retried_with_the_same_key_and_trace() -> None:
    async def busy(request: Request, n: int) -> Response:
        return JSONResponse({"error": {"code": "mnote_tool_runtime_unavailable", "reason": "busy"}}, 503)

    app, seen = fake_runtime(busy)
    async with serve_app(app) as url:
        kernel = HttpKernel(url, retries=2)
        try:
            error = await unavailable(kernel.execute(command("k_same")))
        finally:
            await kernel.aclose()
    assert error.details == {"adapter": "http", "cause": "status", "attempts": 3, "status": 503}
    assert [r["idempotencyKey"] for r in seen.requests] == ["k_same"] * 3
    traces = {trace_id_of(r["traceparent"]) for r in seen.requests}
    spans = {r["traceparent"].split("-")[2] for r in seen.requests}
    assert len(traces) == 1 and len(spans) == 3, "one trace, a new span per attempt"


async def test_a_retry_that_gets_through_answers_normally() -> None:
    outcome = {
        "commandName": "page.body.save",
        "dryRun": False,
        "commandId": "c",
        "revision": 2,
        "changed": True,
    }

    async def flaky(request: Request, n: int) -> Response:
        if n == 1:
            return PlainTextResponse("bad gateway", status_code=502)
        if n == 2:
            return PlainTextResponse("slow down", status_code=429, headers={"Retry-After": "0"})
        return JSONResponse({"outcome": outcome})

    app, seen = fake_runtime(flaky)
    async with serve_app(app) as url:
        kernel = HttpKernel(url, retries=2)
        try:
            result = await kernel.execute(command())
        finally:
            await kernel.aclose()
    assert (result.command_id, result.revision, len(seen.requests)) == ("c", 2, 3)


async def test_business_refusals_are_relayed_not_retried() -> None:
    body = {"error": {"code": "mnote_tool_conflict", "reason": "revision", "details": {"currentRevision": 4}}}

    async def conflict(request: Request, n: int) -> Response:
        return JSONResponse(body, status_code=409)

    app, seen = fake_runtime(conflict)
    async with serve_app(app) as url:
        kernel = HttpKernel(url)
        try:
            with pytest.raises(MnoteError) as caught:
                await kernel.execute(command())
        finally:
            await kernel.aclose()
    assert caught.value.to_wire() == body["error"] and len(seen.requests) == 1


# -- the cli adapter against misbehaving programs ------------------------------------------------


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


@pytest.mark.parametrize(
    ("argv", "cause"),
    [
        (["/nonexistent/mnote-cli"], "spawn"),
        (python("import sys; sys.stderr.write('boom: store locked\\n'); sys.exit(3)"), "exit_status"),
        (python("print('hello, not json')"), "malformed_reply"),
        (python("print('{\"ok\": true}')"), "malformed_reply"),
        (python('print(\'{"ok": true, "value": {"revision": 1}}\')'), "malformed_reply"),
        (python('print(\'{"ok": false, "error": "nope"}\')'), "malformed_reply"),
        (python(f"import sys; sys.stdout.write('x' * {MAX_REPLY_BYTES + 1})"), "reply_too_large"),
        (python(f"import sys; sys.stderr.write('x' * {MAX_REPLY_BYTES + 1})"), "reply_too_large"),
    ],
    ids=[
        "missing",
        "exit-3",
        "not-json",
        "no-value",
        "wrong-shape",
        "bad-error",
        "stdout-flood",
        "stderr-flood",
    ],
)
async def test_cli_transport_failures_are_unavailable(
    argv: list[str], cause: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mnote_mcp.kernel.relays.cli")
    error = await unavailable(CliKernel(argv).execute(command()))
    assert error.details["adapter"] == "cli" and error.details["cause"] == cause
    if cause == "exit_status":
        assert error.details["exitStatus"] == 3
        assert "mnote-cli: boom: store locked" in caplog.text, "the adapter's stderr goes to our log"


async def test_cli_timeout_kills_the_adapter(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    pidfile = tmp_path / "pid"
    script = (
        f"import os, sys, time; open({str(pidfile)!r}, 'w').write(str(os.getpid()));"
        " sys.stderr.write('waiting for a lock\\n'); sys.stderr.flush(); time.sleep(30)"
    )
    started = time.monotonic()
    error = await unavailable(CliKernel(python(script), timeout=1.0).get_page(QUERY))
    assert error.details["cause"] == "timeout" and time.monotonic() - started < 5
    pid = int(await anyio.Path(pidfile).read_text())
    assert not await anyio.Path(f"/proc/{pid}").exists(), "the timed-out process is killed and reaped"
    assert "mnote-cli: waiting for a lock" in caplog.text


async def test_cli_killed_after_commit_then_retried_writes_once(db: Path) -> None:
    crashing = CliKernel(runtime_cli_command(db), env={**os.environ, CRASH_AFTER_COMMIT_ENV: "1"})
    error = await unavailable(crashing.execute(command()))
    assert error.details["exitStatus"] == CRASH_EXIT_STATUS
    assert writes(db) == 1, "the commit happened; only the reply was lost"
    retry = await CliKernel(runtime_cli_command(db)).execute(command())
    assert retry.replayed and retry.revision == 2
    assert writes(db) == 1


# -- the whole path: mnote-mcp over stdio, relaying to the reference runtime ---------------------


def relay_params(kernel: str, *args: str, token: str | None = None) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "mnote_mcp",
            "serve",
            "--kernel",
            kernel,
            "--actor",
            "user_editor",
            "--locale",
            "en",
            *args,
        ],
        env={**os.environ, "PYTHONUNBUFFERED": "1", **({"MNOTE_RUNTIME_TOKEN": token} if token else {})},
        cwd=str(ROOT),
    )


@asynccontextmanager
async def relay(kernel: str, *args: str, token: str | None = None) -> AsyncIterator[Client]:
    """mnote-mcp over stdio relaying to `kernel`, with the runtime's service `token` if given."""
    async with Client(relay_params(kernel, *args, token=token), read_timeout_seconds=60) as client:
        yield client


async def save(client: Client, **extra: Any) -> dict[str, Any]:
    return envelope_of(await client.call_tool("mnote.page.save", {**SAVE, **extra}))


def assert_unavailable(envelope: dict[str, Any]) -> None:
    assert envelope["ok"] is False and envelope["result"] is None
    assert envelope["error"]["code"] == "mnote_tool_runtime_unavailable"
    assert envelope["error"]["retryable"] is True
    assert "same idempotencyKey" in envelope["error"]["hint"]
    assert envelope["audit"] == {"effect": "none", "workspaceId": "ws_1", "documentId": "doc_1"}


async def test_runtime_down_then_up(db: Path, tmp_path: Path) -> None:
    runtime = RuntimeProcess(db=db, workdir=tmp_path, port=free_port())
    async with relay(runtime.url, token=runtime.token) as client:
        assert_unavailable(await save(client))
        read = envelope_of(
            await client.call_tool("mnote.page.get", {k: SAVE[k] for k in ("workspaceId", "documentId")})
        )
        assert read["error"]["code"] == "mnote_tool_runtime_unavailable"
        assert writes(db) == 0
        try:
            runtime.start()
            first = await save(client, toolCallId="call_retry")
            again = await save(client, toolCallId="call_again")
        finally:
            runtime.stop()
    assert first["ok"] and first["result"]["revision"] == 2 and "idempotentReplay" not in first["result"]
    assert again["result"]["idempotentReplay"] is True
    assert again["audit"]["commandId"] == first["audit"]["commandId"]
    assert writes(db) == 1


async def test_runtime_killed_between_commit_and_reply_then_restarted(db: Path, tmp_path: Path) -> None:
    runtime = RuntimeProcess(db=db, workdir=tmp_path)
    try:
        runtime.start(env={CRASH_AFTER_COMMIT_ENV: "1"})
        async with relay(runtime.url, token=runtime.token) as client:
            assert_unavailable(await save(client))
            assert runtime.wait_exit() == CRASH_EXIT_STATUS
            assert writes(db) == 1, "it died after the commit"
            runtime.start()
            retry = await save(client, toolCallId="call_retry")
    finally:
        runtime.stop()
    assert retry["ok"] and retry["result"]["idempotentReplay"] is True and retry["result"]["revision"] == 2
    assert writes(db) == 1
    assert [r["idempotencyKey"] for r in runtime.records() if r["path"] == "/v1/commands"] == ["k_fault"] * 2


@pytest.mark.parametrize("mode", ["slow", "error", "garbage"])
async def test_reply_lost_after_commit_then_retried_writes_once(db: Path, tmp_path: Path, mode: str) -> None:
    with reference_runtime(db, tmp_path) as runtime:
        proxy = FaultProxy(runtime.url, delay=1 + patience(2.0))
        async with (
            serve_app(proxy.app) as url,
            relay(url, "--runtime-timeout", "1", "--runtime-retries", "2", token=runtime.token) as client,
        ):
            proxy.mode = mode
            started = time.monotonic()
            lost = await save(client)
            elapsed = time.monotonic() - started
            proxy.mode = "pass"
            assert_unavailable(lost)
            assert writes(db) == 1, "the runtime committed; the caller was not told"
            retry = await save(client, toolCallId="call_retry")
    assert elapsed < 1 + patience(1.5), "the timeout (1 s, not retried) answers long before the slow reply"
    assert retry["ok"] and retry["result"]["idempotentReplay"] is True
    assert writes(db) == 1


async def test_a_command_over_the_cli_runtimes_limit_is_a_clear_refusal(db: Path) -> None:
    """A save through `--kernel cli:` whose request is over `runtime cli --max-body-bytes`: the agent
    gets an invalid_argument envelope naming the limit, not retryable (the same call would be refused
    again), and nothing is written; a save under the limit is written."""
    kernel = "cli:" + shlex.join([*runtime_cli_command(db), "--max-body-bytes", "4096"])
    big = [{"type": "paragraph", "text": "x" * 8192}]
    async with relay(kernel) as client:
        small = await save(client)
        refused = await save(client, idempotencyKey="k_big", toolCallId="call_big", content=big)
    assert small["ok"], small
    assert refused["ok"] is False and refused["result"] is None, refused
    error = refused["error"]
    assert error["code"] == "mnote_tool_invalid_argument" and error["retryable"] is False, error
    assert "over 4096 bytes" in error["message"] and "--max-body-bytes" in error["message"], error
    assert refused["audit"]["effect"] == "none"
    assert writes(db) == 1
    with sqlite3.connect(db) as conn:
        big_records = conn.execute("SELECT count(*) FROM audit WHERE idempotency_key = 'k_big'").fetchone()[0]
    assert big_records == 0, "the runtime never saw the command"
