"""The runtime protocol's bytes, held to a transcript: what each relay sends for every port method and
what the reference runtime answers, over HTTP and the mnote-cli protocol, and its refusals of broken
requests (tests/fixtures/runtime_wire.json).

The wire forms are derived from the port's declarations (kernel/port.py, kernel/protocol.py); this is
what keeps a change of a declaration, of pydantic or of the schema generator from changing a byte
that a runtime built against docs/runtime-protocol.md would see. Regenerate with
MNOTE_UPDATE_SNAPSHOTS=1 after a deliberate change, and review the diff.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx2
import pytest

from mnote_mcp.base.httpguard import ClientLimits
from mnote_mcp.kernel.errors import MnoteError
from mnote_mcp.kernel.port import (
    Command,
    Correlation,
    HistoryFilter,
    HistoryQuery,
    Kernel,
    PageKey,
    PageQuery,
    PagesQuery,
    SearchQuery,
)
from mnote_mcp.kernel.relays.cli import CliKernel
from mnote_mcp.kernel.relays.http import HttpKernel
from mnote_mcp.kernel.scopes import Scope
from mnote_mcp.kernel.sqlite.opening import open_kernel
from mnote_mcp.runtime import cli_adapter
from mnote_mcp.runtime.http_app import create_app
from tests.support.helpers import ROOT, seeded_store

pytestmark = pytest.mark.anyio
TRANSCRIPT = ROOT / "tests" / "fixtures" / "runtime_wire.json"
LIMITS = ClientLimits(100, 10.0, 32 * 1024 * 1024, 30.0)
IDS = Correlation("s_1", "r_1", "c_1", "trace_1")
SAVE = Command(
    "page.body.save",
    "ws_1",
    "doc_1",
    "user_editor",
    IDS,
    "idem 键",
    False,
    {"mode": "append", "content": [{"type": "paragraph", "text": "Added."}]},
    base_revision=1,
)
PLAN = Command(
    "page.block.insert", "ws_1", "doc_1", "user_editor", IDS, "k2", True, {"blocks": [{"type": "paragraph"}]}
)
READ = PageQuery("ws_1", "doc_1", "user_editor", IDS, True, True, True, "markdown", ("p_1",), 10)
HISTORY = HistoryQuery("ws_1", "doc_1", "user_editor", IDS, HistoryFilter(run_id="r_1"), limit=5)
SEARCH = SearchQuery("user_editor", IDS, "plan", "ws_1", ("ws_1",), 5)
# Things that change from run to run: a command id's nonce, a time, a traceparent's parent id.
_VARYING = [
    (re.compile(r"_[0-9a-f]{8}\b"), "_<nonce>"),
    (re.compile(r"\d{4}-\d\d-\d\dT[0-9:.+Z-]+"), "<time>"),
    (re.compile(r"(00-[0-9a-f]{32})-[0-9a-f]{16}-01"), r"\1-<parent>-01"),
]


def _steady(text: str) -> str:
    for pattern, replacement in _VARYING:
        text = pattern.sub(replacement, text)
    return text


async def _every_method(kernel: Kernel) -> None:
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: kernel.execute(SAVE),
        lambda: kernel.execute(PLAN),
        lambda: kernel.get_page(READ),
        lambda: kernel.authorize("user_editor", "ws_1", "doc_1", Scope.PAGE_WRITE),
        lambda: kernel.authorize("user_viewer", "ws_1", "doc_1", Scope.PAGE_WRITE),
        lambda: kernel.list_pages(PagesQuery("user_editor")),
        lambda: kernel.page_revisions("user_editor", [PageKey("ws_1", "doc_1"), PageKey("ws_1", "nope")]),
        lambda: kernel.page_history(HISTORY),
        lambda: kernel.search_pages(SEARCH),
        lambda: kernel.audit_trail(trace_id="trace_1", limit=7),
    ]
    for call in calls:
        with contextlib.suppress(MnoteError):  # a refusal is part of the transcript
            await call()


async def _over_http(db: Path) -> list[list[Any]]:
    inner = httpx2.ASGITransport(app=create_app(open_kernel(db), limits=LIMITS))
    seen: list[list[Any]] = []

    class Recording(httpx2.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            sent: list[Any] = [
                request.method,
                str(request.url.raw_path, "ascii"),
                (await request.aread()).decode(),
            ]
            sent += [request.headers.get("Idempotency-Key"), request.headers.get("traceparent")]
            response = await inner.handle_async_request(request)
            reply = await response.aread()
            seen.append([*sent, response.status_code, reply.decode()])
            return httpx2.Response(response.status_code, headers=response.headers, content=reply)

    relay = HttpKernel("http://runtime", transport=Recording())
    await _every_method(relay)
    await relay.aclose()
    return seen


async def _over_cli(db: Path) -> list[list[str]]:
    seen: list[list[str]] = []

    class Recording(CliKernel):
        async def _run(self, data: bytes) -> tuple[int, bytes, bytes]:
            reply = await anyio.to_thread.run_sync(
                cli_adapter.answer, lambda: open_kernel(db, one_call=True), data
            )
            text = json.dumps(reply, ensure_ascii=False, separators=(",", ":"))
            seen.append([data.decode(), text])
            return 0, text.encode(), b""

    await _every_method(Recording(["mnote-cli"]))
    return seen


BROKEN_HTTP: list[tuple[str, str, Any, dict[str, str]]] = [
    ("POST", "/v1/commands", {**SAVE.to_wire(), "dryRun": "no"}, {"Idempotency-Key": "idem%20%E9%94%AE"}),
    ("POST", "/v1/commands", {**SAVE.to_wire(), "correlation": {}}, {"Idempotency-Key": "x"}),
    ("POST", "/v1/commands", SAVE.to_wire(), {}),
    ("POST", "/v1/commands", {**SAVE.to_wire(), "baseRevision": 2**64}, {"Idempotency-Key": "x"}),
    (
        "POST",
        "/v1/commands",
        {**SAVE.to_wire(), "command": "page.drop"},
        {"Idempotency-Key": "idem%20%E9%94%AE"},
    ),
    ("POST", "/v1/pages/query", {"workspaceId": "ws_1"}, {}),
    ("POST", "/v1/pages/query", {**READ.to_wire(), "maxBlocks": 0}, {}),
    ("POST", "/v1/pages/query", {**READ.to_wire(), "format": None, "blockIds": None}, {}),
    ("POST", "/v1/pages/history", {**HISTORY.to_wire(), "filter": None, "limit": None}, {}),
    ("POST", "/v1/pages/history", {**HISTORY.to_wire(), "limit": -1}, {}),
    ("POST", "/v1/pages/search", {**SEARCH.to_wire(), "limit": None, "workspaces": "ws_1"}, {}),
    ("POST", "/v1/pages/revisions", {"actorId": "user_editor", "pages": [{"workspaceId": 1}]}, {}),
    (
        "POST",
        "/v1/authorize",
        {"actorId": "u", "workspaceId": "ws_1", "documentId": "doc_1", "scope": "x"},
        {},
    ),
    ("GET", "/v1/pages", None, {}),
    ("GET", "/v1/audit?limit=abc", None, {}),
    ("GET", "/v1/audit?limit=-3", None, {}),
    ("GET", "/v1/audit?traceId=nope", None, {}),
]
BROKEN_CLI = [
    '{"op": "list_pages"}',
    '{"op": "get_page"}',
    '{"op": "audit_trail", "limit": "x"}',
    '{"op": "audit_trail", "limit": null}',
    '{"op": "execute", "command": {"command": "page.body.save"}}',
    '{"op": "authorize", "query": {"actorId": "user_viewer", "workspaceId": "ws_1", "documentId": "doc_1", "scope": "page.write"}}',
]


async def _refusals(db: Path) -> list[list[Any]]:
    seen: list[list[Any]] = []
    app = create_app(open_kernel(db), limits=LIMITS)
    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app), base_url="http://runtime"
    ) as client:
        for method, path, body, headers in BROKEN_HTTP:
            content = json.dumps(body).encode() if body is not None else None
            response = await client.request(method, path, content=content, headers=headers)
            seen.append([method, path, response.status_code, response.text])
    for raw in BROKEN_CLI:
        reply = await anyio.to_thread.run_sync(
            cli_adapter.answer, lambda: open_kernel(db, one_call=True), raw.encode()
        )
        seen.append([raw, json.dumps(reply, ensure_ascii=False, separators=(",", ":"))])
    return seen


async def test_the_wire_is_the_transcript(tmp_path: Path) -> None:
    transcript = {
        "http": await _over_http(seeded_store(tmp_path / "http.db")),
        "cli": await _over_cli(seeded_store(tmp_path / "cli.db")),
        "refusals": await _refusals(seeded_store(tmp_path / "refusals.db")),
    }
    text = _steady(json.dumps(transcript, ensure_ascii=False, indent=1)) + "\n"
    if os.environ.get("MNOTE_UPDATE_SNAPSHOTS") == "1":
        TRANSCRIPT.write_text(text, encoding="utf-8")
    assert text == TRANSCRIPT.read_text(encoding="utf-8"), "the runtime protocol's bytes changed"
