"""A token taken out of the tokens file, or left without `page.read`, loses its open streams and
sessions within the reload interval (issue 26, finding 7: they stayed connected 45 s and more): the
2026-era `subscriptions/listen` stream, the GET stream of a streamable-HTTP session and the legacy
`/sse` stream, each held over a real server while the file is edited. Another token's stream stays."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client.subscriptions import SubscriptionLost

from mnote_mcp.base.secretfiles import write_private
from tests.support.helpers import RAW_INITIALIZE
from tests.support.http_helpers import http_server, mcp_http, wait_until, write_tokens
from tests.support.timing import patience

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
RELOAD = 1.0  # --auth-reload-interval
WITHIN = RELOAD + patience(6.0)  # the reload interval plus a margin for a loaded machine
PAGE_URI = "mnote://workspaces/ws_1/pages/doc_1"
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
GRANTS: dict[str, dict[str, Any]] = {
    "tok-a": {"actorId": "user_editor"},
    "tok-b": {"actorId": "user_viewer", "scopes": ["page.read"]},
}
EDITS: dict[str, dict[str, dict[str, Any]]] = {
    "removed": {"tok-b": GRANTS["tok-b"]},
    "without-page.read": {
        "tok-a": {"actorId": "user_editor", "scopes": ["page.write"]},
        "tok-b": GRANTS["tok-b"],
    },
}


def _replace_tokens(path: Path, tokens: dict[str, dict[str, Any]]) -> None:
    """Edit the tokens file as `mnote-mcp token` does: a new file replaces the old one whole."""
    entries = [{"token": token, **grant} for token, grant in tokens.items()]
    write_private(path, json.dumps({"tokens": entries}))


def _health(url: str) -> dict[str, int]:
    answer: dict[str, int] = httpx2.get(f"{url}/healthz", timeout=patience(10)).json()
    return answer


@asynccontextmanager
async def _raw_stream(url: str, token: str, kind: str) -> AsyncIterator[httpx2.Response]:
    """The GET stream of a new streamable-HTTP session, or a legacy /sse stream, held open."""
    auth = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(base_url=url, timeout=patience(60)) as http:
        path, headers = "/sse", auth
        if kind == "get":
            opened = await http.post("/mcp", json=RAW_INITIALIZE, headers={**JSON_HEADERS, **auth})
            session = {**auth, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await http.post("/mcp", json=initialized, headers={**JSON_HEADERS, **session})
            path, headers = "/mcp", {**session, "Accept": "text/event-stream"}
        async with http.stream("GET", path, headers=headers) as stream:
            assert stream.status_code == 200, stream.status_code
            yield stream


async def _ended(stream: httpx2.Response) -> None:
    with contextlib.suppress(httpx2.HTTPError):  # ended cleanly, or cut
        async for _ in stream.aiter_bytes():
            pass


async def _listen_ended(url: str, token: str, revoke: Callable[[], float]) -> float:
    async with (
        mcp_http(url, token, mode="auto") as client,
        client.listen(resource_subscriptions=[PAGE_URI]) as sub,
    ):
        assert wait_until(lambda: _health(url)["listenStreams"] == 2, timeout=10)
        started = revoke()
        with anyio.fail_after(WITHIN), contextlib.suppress(SubscriptionLost):
            async for _ in sub:
                pass
        return time.monotonic() - started


@pytest.mark.parametrize("edit", EDITS)
@pytest.mark.parametrize("kind", ["listen", "get", "sse"])
async def test_a_revoked_tokens_streams_are_closed(db: Path, tmp_path: Path, kind: str, edit: str) -> None:
    tokens = write_tokens(tmp_path / "tokens.json", GRANTS)
    args = ("--auth-file", str(tokens), "--auth-reload-interval", str(RELOAD))

    def revoke() -> float:
        _replace_tokens(tokens, EDITS[edit])
        return time.monotonic()

    with http_server(db, *args) as server:
        # tok-b, untouched by the edit, holds a stream of the same kind throughout
        async with contextlib.AsyncExitStack() as other:
            if kind == "listen":
                client = await other.enter_async_context(mcp_http(server.url, "tok-b", mode="auto"))
                await other.enter_async_context(client.listen(resource_subscriptions=[PAGE_URI]))
                took = await _listen_ended(server.url, "tok-a", revoke)
                assert _health(server.url)["listenStreams"] == 1, "tok-b's stream is still open"
            else:
                await other.enter_async_context(_raw_stream(server.url, "tok-b", kind))
                async with _raw_stream(server.url, "tok-a", kind) as stream:
                    assert wait_until(lambda: _health(server.url)["sessions"] == 2, timeout=10)
                    started = revoke()
                    with anyio.fail_after(WITHIN):
                        await _ended(stream)
                    took = time.monotonic() - started
                assert wait_until(lambda: _health(server.url)["sessions"] == 1, timeout=5), (
                    "its session is gone"
                )
        assert took < WITHIN
        assert "Traceback" not in server.log, server.log[-3000:]
