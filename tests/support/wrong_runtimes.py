"""Deliberately wrong runtimes for the conformance kit's tests: the reference runtime with one defect.

Each is the reference runtime's ASGI app (`runtime/http_app.py`, on a SQLite store seeded with the
kit's seed) behind a `Rewriting` front that spoils one thing a Rust runtime could get wrong, and
nothing else: it ignores `idempotencyKey` (every command gets a key of its own, and the audit trail
shows the key as sent), drops `baseRevision`, leaks a restricted page's title in its refusals, answers
`page_revisions` in the wrong shape, misreports the protocol version, or names commandIds in its
outcomes that its audit trail does not hold. `no_page_limit` is the reference runtime with no page
size limit to speak of. Everything runs in process (`httpx2.ASGITransport`): no socket, no port.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp

from mnote_mcp.base.httpguard import ClientLimits
from mnote_mcp.conformance.seed import Scratch
from mnote_mcp.kernel.limits import PageLimits
from mnote_mcp.kernel.protocol import decode_key, encode_key
from mnote_mcp.kernel.sqlite.opening import open_store
from mnote_mcp.kernel.store.fixtures import load_fixture
from mnote_mcp.kernel.store.kernel import StoreKernel
from mnote_mcp.kernel.store.store import Store
from mnote_mcp.runtime.http_app import create_app

CLIENT_LIMITS = ClientLimits(100, 10.0, 32 * 1024 * 1024, 30.0)
# Small, so that a run writes pages at the limit in a moment; the kit is given the same.
LIMITS = PageLimits(max_blocks=60, max_bytes=6000)
UNLIMITED = PageLimits(max_blocks=10**9, max_bytes=10**12)


class Rewriting:
    """An ASGI front of a runtime app that may rewrite a request before it and a reply after it."""

    def __init__(self, inner: ASGIApp, store: Store) -> None:
        self.store = store
        self._inner = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=inner), base_url="http://inner")
        self.app = Starlette(routes=[Route("/{path:path}", self._forward, methods=["GET", "POST"])])

    async def aclose(self) -> None:
        await self._inner.aclose()

    def request(self, path: str, headers: dict[str, str], body: Any) -> tuple[dict[str, str], Any]:
        return headers, body

    def reply(self, path: str, request: Any, status: int, body: Any) -> Any:
        return body

    async def _forward(self, request: Request) -> Response:
        raw = await request.body()
        body = json.loads(raw) if raw else None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("content-length", "host")}
        headers, body = self.request(request.url.path, headers, body)
        content = json.dumps(body).encode() if body is not None else None
        reply = await self._inner.request(
            request.method,
            request.url.path,
            params=dict(request.query_params),
            content=content,
            headers=headers,
        )
        try:
            answer = reply.json()
        except ValueError:
            return Response(reply.content, status_code=reply.status_code, headers=dict(reply.headers))
        answer = self.reply(request.url.path, body, reply.status_code, answer)
        passed = {
            k: v for k, v in reply.headers.items() if k.lower() not in ("content-length", "content-type")
        }
        return Response(
            json.dumps(answer), status_code=reply.status_code, headers=passed, media_type="application/json"
        )


class IgnoresKeys(Rewriting):
    """Every command runs under a key of its own, so nothing is ever replayed; the audit trail names
    the key the command was sent with (the defect is in the ledger, not in what is recorded)."""

    _MARK = re.compile(r"#double\d+$")
    _count = itertools.count()

    def request(self, path: str, headers: dict[str, str], body: Any) -> tuple[dict[str, str], Any]:
        if path == "/v1/commands" and isinstance(body, dict):
            mark = f"#double{next(self._count)}"
            body = {**body, "idempotencyKey": f"{body['idempotencyKey']}{mark}"}
            sent = headers.get("idempotency-key")
            if sent is not None:  # a header that differed from the body still differs
                headers = {**headers, "idempotency-key": encode_key(decode_key(sent) + mark)}
        return headers, body

    def reply(self, path: str, request: Any, status: int, body: Any) -> Any:
        if path == "/v1/audit" and isinstance(body, dict):
            for record in body.get("records", []):
                record["idempotencyKey"] = self._MARK.sub("", record["idempotencyKey"])
        return body


class DropsBaseRevision(Rewriting):
    def request(self, path: str, headers: dict[str, str], body: Any) -> tuple[dict[str, str], Any]:
        if path == "/v1/commands" and isinstance(body, dict):
            body = {**body, "baseRevision": None}
        return headers, body


class LeaksTitle(Rewriting):
    """A refusal of a page the actor may not read names the page's title in its details."""

    def reply(self, path: str, request: Any, status: int, body: Any) -> Any:
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict) and error.get("reason") == "page_read" and isinstance(request, dict):
            query = request.get("query", request)
            with self.store.transaction(write=False) as conn:
                row = conn.execute(
                    "SELECT title FROM pages WHERE workspace_id = ? AND id = ?",
                    (query.get("workspaceId"), query.get("documentId")),
                ).fetchone()
            if row is not None:
                error.setdefault("details", {})["title"] = row[0]
        return body


class WrongRevisionsShape(Rewriting):
    """page_revisions answers each revision as a string."""

    def reply(self, path: str, request: Any, status: int, body: Any) -> Any:
        if path == "/v1/pages/revisions" and status == 200:
            for entry in body["revisions"]:
                entry["revision"] = str(entry["revision"])
        return body


class WrongVersion(Rewriting):
    def reply(self, path: str, request: Any, status: int, body: Any) -> Any:
        if path == "/v1/health":
            body = {**body, "protocol": "mnote-runtime/v2"}
        return body


class ForeignCommandIds(Rewriting):
    """The outcomes of commands name commandIds of their own making, which the audit trail (and the
    history) never heard of; consistently, so a replay still names its write's."""

    def reply(self, path: str, request: Any, status: int, body: Any) -> Any:
        if path == "/v1/commands" and status == 200:
            _rename_command_ids(body)
        return body


def _rename_command_ids(node: Any) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "commandId" and isinstance(value, str):
                node[key] = "cmd-" + hashlib.sha256(value.encode()).hexdigest()[:20]
            else:
                _rename_command_ids(value)
    elif isinstance(node, list):
        for item in node:
            _rename_command_ids(item)


@dataclass
class InProcessRuntime:
    """A runtime app in this process: its transport for the kit, and the store under it."""

    transport: httpx2.AsyncBaseTransport
    store: Store


Front = Callable[[ASGIApp, Store], Rewriting]


@asynccontextmanager
async def runtime(
    directory: Path, tag: str, *, front: Front | None = None, limits: PageLimits = LIMITS
) -> AsyncIterator[InProcessRuntime]:
    """The reference runtime on a new store with the kit's seed for `tag` loaded, behind `front`."""
    store = open_store(directory / f"runtime-{tag}.db", limits=limits)
    load_fixture(store, Scratch(tag).fixture())
    kernel = StoreKernel(store)
    app: ASGIApp = create_app(kernel, limits=CLIENT_LIMITS)
    rewriting = front(app, store) if front is not None else None
    try:
        yield InProcessRuntime(httpx2.ASGITransport(app=rewriting.app if rewriting else app), store)
    finally:
        if rewriting is not None:
            await rewriting.aclose()
        await kernel.aclose()
