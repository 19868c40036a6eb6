"""Bad input, as an attacker sends it (issue 9): exact numbers, crafted cursors, deep nesting, oversized
ids, forged log lines. Each case ends in a clean `mnote_tool_invalid_argument` (or a conflict), never a
JSON-RPC error and never `internal`, and the page keeps the newer edit; also through the HTTP relay.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import logging
import shlex
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mnote_mcp.app import App, build_registry
from mnote_mcp.base.logs import configure_logging
from mnote_mcp.calls.dispatch import Dispatcher
from mnote_mcp.config import ServerConfig
from mnote_mcp.kernel.sqlite.opening import open_kernel
from mnote_mcp.runtime.http_app import create_app
from mnote_mcp.settings import RuntimeConfig
from tests.support.helpers import call, connect, dump, page_args, write_args
from tests.support.runtimes import serve_app
from tests.support.tool_calls import TOOLS

pytestmark = pytest.mark.anyio
INVALID = "mnote_tool_invalid_argument"


@asynccontextmanager
async def relayed(db: Path) -> AsyncIterator[Client]:
    """An MCP server on `--kernel http://…`, the runtime (the embedded kernel on `db`) in process."""
    from mnote_mcp.kernel.relays.http import HttpKernel

    async with serve_app(create_app(open_kernel(db), limits=RuntimeConfig().client_limits)) as url:
        config = ServerConfig(db=db, locale="en", demo=False, actor="user_editor", kernel=url)
        kernel = HttpKernel(url)
        dispatcher = Dispatcher(build_registry(config), kernel, locale="en")
        app = App(config=config, kernel=kernel, dispatcher=dispatcher, store_description=url)
        try:
            async with Client(app.server(), mode="legacy") as client:
                yield client
        finally:
            await kernel.aclose()


def _client(db: Path, via: str) -> Any:
    return relayed(db) if via == "relay" else connect(db)


@pytest.mark.parametrize("via", ["local", "relay"])
async def test_a_stale_base_revision_as_a_float_is_still_a_conflict(db: Path, via: str) -> None:
    async with _client(db, via) as client:
        revision = (await call(client, "mnote.page.get", **page_args()))["result"]["revision"]
        newer = await call(
            client, "mnote.page.update_title", **write_args("newer", title="newer", baseRevision=revision)
        )
        assert newer["ok"]
        outcomes = {}
        for index, stale in enumerate([float(revision), 1e300, 2**64, 2**63, -(2**63) - 1]):
            answer = await call(
                client,
                "mnote.page.update_title",
                **write_args(f"stale{index}", title="lost", baseRevision=stale),
            )
            outcomes[repr(stale)] = answer["error"]["code"]
        title = (await call(client, "mnote.page.get", **page_args()))["result"]["title"]
    assert outcomes == {
        repr(float(revision)): "mnote_tool_conflict",
        "1e+300": INVALID,
        repr(2**64): INVALID,
        repr(2**63): INVALID,
        repr(-(2**63) - 1): INVALID,
    }
    assert title == "newer", "the page keeps the newer edit"


async def test_an_integral_float_is_the_integer_it_names(db: Path) -> None:
    async with connect(db) as client:
        revision = (await call(client, "mnote.page.get", **page_args()))["result"]["revision"]
        saved = await call(
            client, "mnote.page.update_title", **write_args("f", title="t", baseRevision=float(revision))
        )
        piece = await call(client, "mnote.page.get", **page_args(maxBlocks=1.0))
        half = await call(client, "mnote.page.get", **page_args(maxBlocks=1.5))
    assert saved["ok"] and saved["result"]["revision"] == revision + 1
    assert piece["ok"] and half["error"]["code"] == INVALID


async def test_deep_nesting_is_invalid_argument_not_internal(db: Path) -> None:
    deep_text = "[" * 200_000 + "]" * 200_000
    nested: Any = "x"
    for _ in range(40):
        nested = {"a": nested}
    before = dump(db)
    async with connect(db) as client:
        as_text = await call(client, "mnote.page.save", **write_args("deep", content=deep_text))
        as_options = await call(client, "mnote.page.update_options", **write_args("deep2", options=nested))
    assert as_text["error"]["code"] == INVALID
    assert as_options["error"]["code"] == INVALID
    assert "nested deeper than" in as_options["error"]["details"]["reason"]
    assert dump(db) == before, "nothing written"


def _cursor(payload: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


async def test_crafted_cursors_are_invalid_argument(db: Path) -> None:
    tag = hashlib.sha256(json.dumps(["ws_1", "doc_1", None]).encode()).hexdigest()[:16]
    crafted = [
        _cursor({"r": 2**64, "o": 1, "q": tag}),
        _cursor({"r": 1, "o": 2**70, "q": tag}),
        _cursor({"r": 1.5, "o": 1, "q": tag}),
        base64.urlsafe_b64encode(b'{"r": 1e400, "o": 1, "q": "' + tag.encode() + b'"}').decode(),
        base64.urlsafe_b64encode(b"[" * 100_000 + b"]" * 100_000).decode(),
        _cursor({"r": [1], "o": {}, "q": 3}),
    ]
    history = [_cursor({"b": 2**64, "q": "x"}), _cursor({"b": -1, "q": "x"}), crafted[4]]
    async with connect(db) as client:
        pages = [await call(client, "mnote.page.get", **page_args(maxBlocks=1, cursor=c)) for c in crafted]
        histories = [await call(client, "mnote.page.history", **page_args(cursor=c)) for c in history]
    assert [answer["error"]["code"] for answer in pages + histories] == [INVALID] * (len(crafted) + 3)


async def test_ids_longer_than_the_limit_are_refused_and_never_echoed(db: Path) -> None:
    huge = "k" * (4 * 1024 * 1024)
    before = dump(db)
    async with connect(db) as client:
        listing = {tool.name: tool for tool in (await client.list_tools()).tools}
        key = await call(client, "mnote.page.update_title", **write_args(huge, title="x"))
        trace = await call(client, "mnote.page.get", **{**page_args(), "traceId": huge})
        meta = await call(client, "mnote.page.get", {"mnote/runId": huge}, **page_args())
        at_limit = await call(client, "mnote.page.get", **{**page_args(), "traceId": "t" * 256})
    accepted = TOOLS["mnote.page.save"].accepted_schema(strict=False)["properties"]
    assert {accepted[name]["maxLength"] for name in ("idempotencyKey", "traceId", "sessionId")} == {256}
    assert "maxLength" not in listing["mnote.page.save"].input_schema["properties"]["idempotencyKey"], (
        "not advertised"
    )
    assert key["error"]["details"]["pointer"] == "/idempotencyKey"
    assert trace["error"]["details"]["pointer"] == "/traceId"
    for answer in (key, trace, meta):
        assert huge not in json.dumps(answer), "an oversized id is never echoed"
    assert meta["ok"]
    assert at_limit["ok"] and at_limit["traceId"] == "t" * 256
    assert dump(db) == before, "nothing stored in the ledger or the audit trail"


async def test_the_log_keeps_one_line_per_call_whatever_the_ids_hold(db: Path) -> None:
    forged = "t1\n2026-12-02 00:00:00,000 INFO mnote_mcp.calls: call tool=mnote.page.save outcome=ok"
    sink = io.StringIO()
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    configure_logging("info", "text")
    root.handlers[0].setStream(sink)  # type: ignore[attr-defined]
    try:
        async with connect(db) as client:
            await call(client, "mnote.page.get", **{**page_args(), "traceId": forged})
            no_run = {name: value for name, value in page_args().items() if name != "runId"}
            await call(client, "mnote.page.get", {"mnote/runId": "r x outcome=ok\u2028y"}, **no_run)
            await call(client, "mnote.page.get", **{**page_args(), "sessionId": "s\r\x1b[2Jz"})
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
    lines = sink.getvalue().splitlines()
    calls = [line for line in lines if "mnote_mcp.calls" in line]
    assert len(calls) == 3, lines
    assert not any(line.startswith("2026-12-02 00:00:00") for line in lines), "no forged line"
    assert '"r x outcome=ok\\u2028y"' in calls[1], "a value with spaces is quoted, separators escaped"
    assert "\x1b" not in sink.getvalue() and "\r" not in sink.getvalue(), "control characters escaped"
    assert "2Jz" in calls[2]
    for line in calls:  # the fields parse back: one outcome per line, whatever the ids held
        keys = [item.split("=", 1)[0] for item in shlex.split(line.split(": call ", 1)[1])]
        assert keys.count("outcome") == 1 and keys.count("traceId") == 1, keys


async def test_the_runtime_protocol_refuses_revisions_it_cannot_store(db: Path) -> None:
    """Straight to the runtime (no MCP server in front): a revision beyond 64 bits or a fraction is an
    invalid envelope, never truncated (1.5 is not 1) and never carried into a conflict report."""
    import httpx2

    ids = {"sessionId": "s", "runId": "r", "toolCallId": "c", "traceId": "t"}
    codes = []
    async with (
        serve_app(create_app(open_kernel(db), limits=RuntimeConfig().client_limits)) as url,
        httpx2.AsyncClient(base_url=url) as http,
    ):
        for index, base in enumerate([1.5, 2**64, 1e300]):
            key = f"rt{index}"
            command = {
                "command": "update_title",
                "workspaceId": "ws_1",
                "documentId": "doc_1",
                "actorId": "user_editor",
                "correlation": ids,
                "idempotencyKey": key,
                "dryRun": False,
                "baseRevision": base,
                "payload": {"title": "lost"},
            }
            reply = await http.post("/v1/commands", json=command, headers={"Idempotency-Key": key})
            codes.append((reply.status_code, reply.json()["error"]["code"]))
    assert codes == [(400, INVALID)] * 3


def test_make_app_and_the_relay_share_the_limits() -> None:
    config = replace(ServerConfig(), max_id_chars=64)
    assert build_registry(config).max_id_chars == 64


# -- a trailing newline (issue 26, finding 9): Python's `$` matches before a final "\n" ----------


@pytest.mark.parametrize("via", ["local", "relay"])
async def test_a_block_id_ending_in_a_newline_is_refused_and_nothing_is_written(db: Path, via: str) -> None:
    """`evil\\n` once passed the block id pattern (and broke the page's Markdown id comments); the
    advertised pattern refuses it (jsonschema-rs: `$` is the end of the text), and so must the kernel,
    which checks block content itself, here and behind the runtime protocol."""
    async with _client(db, via) as client:
        before = dump(db)
        inserted = await call(
            client,
            "mnote.block.insert",
            **write_args("evil", blocks=[{"id": "evil\n", "type": "paragraph", "text": "x"}]),
        )
        saved = await call(
            client,
            "mnote.page.save",
            **write_args("evil2", content=[{"id": "evil\n", "type": "paragraph"}], mode="append"),
        )
        assert dump(db) == before
    assert inserted["error"]["code"] == INVALID
    assert inserted["error"]["details"]["pointer"] == "/blocks/0/id"
    assert saved["error"]["code"] == INVALID
    assert saved["error"]["details"]["pointer"] == "/content/0/id"


@pytest.mark.parametrize("via", ["local", "relay"])
async def test_a_trace_id_ending_in_a_newline_never_reaches_a_traceparent(db: Path, via: str) -> None:
    """A 32-hex trace id with a trailing newline is not a W3C trace id: it is hashed like any other
    (once it was kept, newline and all, in the `traceparent` the relay sends)."""
    from mnote_mcp.base.tracecontext import traceparent, w3c_trace_id

    odd = "4bf92f3577b34da6a3ce929d0e0e4736\n"
    assert w3c_trace_id(odd) == hashlib.sha256(odd.encode()).hexdigest()[:32]
    assert "\n" not in traceparent(odd)
    async with _client(db, via) as client:
        envelope = await call(client, "mnote.page.get", **page_args(traceId=odd))
    assert envelope["ok"], envelope["error"]
