"""Hostile networks (issue 9): authentication before the body, header and body deadlines, the
connection cap, session caps per token (429) and overall (503), idle sessions closed, sessions bound to
the token that opened them, and watches released when their session ends (both transports and
`--stateless`). Real servers over real sockets."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import MCPError

from tests.support.helpers import RAW_INITIALIZE, call, page_args, seeded_store
from tests.support.http_helpers import (
    RunningServer,
    address,
    cut_off,
    http_server,
    mcp_http,
    mcp_sse,
    raw_connection,
    read_until_closed,
    trickle,
    wait_until,
    waits_until_one_ends,
    write_tokens,
)
from tests.support.timing import patience

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
TOKENS: dict[str, dict[str, Any]] = {
    "tok-a": {"actorId": "user_editor"},
    "tok-a-limited": {"actorId": "user_editor", "workspaces": ["ws_other"], "scopes": ["page.read"]},
    "tok-b": {"actorId": "user_viewer", "scopes": ["page.read"]},
}
PAGE_URI = "mnote://workspaces/ws_1/pages/doc_1"


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    return write_tokens(tmp_path / "tokens.json", TOKENS)


def _post_head(url: str, token: str | None, length: int, host: str = "127.0.0.1") -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    port = address(url)[1]
    return (
        f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\n{auth}Content-Length: {length}\r\n\r\n"
    ).encode()


def _open_session(url: str, token: str) -> httpx2.Response:
    return httpx2.post(
        f"{url}/mcp",
        json=RAW_INITIALIZE,
        headers={**JSON_HEADERS, "Authorization": f"Bearer {token}"},
        timeout=patience(10),
    )


def _health(url: str) -> dict[str, Any]:
    answer: dict[str, Any] = httpx2.get(f"{url}/healthz", timeout=patience(10)).json()
    return answer


PARSERS = pytest.mark.parametrize("parser", ["httptools", "h11"])


@pytest.fixture(scope="module", params=["httptools", "h11"])
def deadlines(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, RunningServer]]:
    """A server with one-second header and body deadlines on each parser, made once for the tests
    of the deadlines: each waits for its own connections to be closed, none counts connections or
    sessions or reads the log."""
    parser: str = request.param
    base = tmp_path_factory.mktemp(f"deadlines-{parser}")
    tokens = write_tokens(base / "tokens.json", TOKENS)
    args = (
        "--auth-file",
        str(tokens),
        "--header-timeout",
        "1",
        "--body-timeout",
        "1",
        "--http-parser",
        parser,
    )
    with http_server(seeded_store(base / "mnote.db"), *args) as server:
        yield parser, server


def test_slow_clients_are_refused_early_and_cut_off(deadlines: tuple[str, RunningServer]) -> None:
    _, server = deadlines
    # Unauthenticated, announcing 4 MiB and sending none of it: refused from the headers, closed.
    unauthenticated = raw_connection(server.url, _post_head(server.url, None, 4 * 1024 * 1024))
    reply, took = read_until_closed(unauthenticated)
    assert reply.startswith(b"HTTP/1.1 401") and took < patience(1), (reply[:80], took)
    wrong = raw_connection(server.url, _post_head(server.url, "tok-nope", 4 * 1024 * 1024) + b"{")
    reply, took = read_until_closed(wrong)
    assert reply.startswith(b"HTTP/1.1 401") and took < patience(1), (reply[:80], took)
    # Half-sent headers: 408 and closed after --header-timeout.
    slow_headers = raw_connection(server.url, b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    reply, took = read_until_closed(slow_headers)
    assert reply.startswith(b"HTTP/1.1 408") and 0.8 < took < patience(5), (reply[:80], took)
    # Authenticated, but the body never completes: 408 and closed after --body-timeout.
    slow_body = raw_connection(server.url, _post_head(server.url, "tok-a", 1000) + b'{"jsonrpc"')
    reply, took = read_until_closed(slow_body)
    assert reply.startswith(b"HTTP/1.1 408") and 0.8 < took < patience(5), (reply[:80], took)
    assert _open_session(server.url, "tok-a").status_code == 200, "a good client still gets in"


@PARSERS
def test_connections_over_the_cap_make_room_or_wait_to_be_accepted(
    db: Path, tokens: Path, parser: str
) -> None:
    """At --max-connections, the longest-waiting half-sent request is cut to let a new client in; when
    every connection is busy with a request (open streams), a new one is not accepted (nothing of it
    is read, it costs the server nothing) until one of them ends, and is served then."""
    args = ("--auth-file", str(tokens), "--max-connections", "4", "--http-parser", parser)
    with http_server(db, *args) as server:
        port = address(server.url)[1]
        held = [raw_connection(server.url, b"POST /mcp HTTP/1.1\r\n") for _ in range(4)]
        time.sleep(0.3)
        health_request = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
        health = raw_connection(server.url, health_request)
        assert health.recv(64).startswith(b"HTTP/1.1 200"), "a client that sends its request gets in"
        health.close()
        # the oldest was cut to make room (a 408, already there), the others wait
        assert cut_off(held) == [True, False, False, False]
        stream = f"GET /sse HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer tok-a\r\n\r\n"
        busy = [raw_connection(server.url, stream.encode()) for _ in range(4)]
        for sock in busy:
            assert sock.recv(64).startswith(b"HTTP/1.1 200")
        waits_until_one_ends(raw_connection(server.url, health_request), busy)
        assert "every one busy with a request" in server.log


def test_headers_are_bounded_and_keep_alive_requests_get_the_header_deadline(
    deadlines: tuple[str, RunningServer],
) -> None:
    """A request line and headers held over 16 KiB are refused (400) and the connection closed;
    pipelined requests are served; a keep-alive connection whose next request stalls in its headers
    gets 408 after --header-timeout."""
    parser, server = deadlines
    port = address(server.url)[1]
    padding = b"X-Padding: " + b"a" * 8000 + b"\r\n"
    big = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % port + padding * 3 + b"\r\n"
    if parser == "httptools":  # h11 bounds only what is still incomplete: one read may hold more
        reply, took = read_until_closed(raw_connection(server.url, big))
        assert reply.startswith(b"HTTP/1.1 400") and took < patience(1), (reply[:80], took)
    reply, took = trickle(server.url, big)
    assert reply.startswith(b"HTTP/1.1 400"), reply[:80]
    fits = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % port + padding + b"\r\n"
    pipelined = raw_connection(server.url, fits + fits)
    pipelined.settimeout(5)
    received = b""
    while received.count(b"HTTP/1.1 200") < 2:
        chunk = pipelined.recv(65536)
        assert chunk, received
        received += chunk
    pipelined.close()
    stalled = raw_connection(server.url, fits + b"GET /healthz HTTP/1.1\r\n")  # served, then the next stalls
    reply, took = read_until_closed(stalled)
    assert reply.startswith(b"HTTP/1.1 200"), reply[:80]
    assert reply.endswith(b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    assert 0.5 < took < patience(5), took


def test_session_caps_per_token_and_overall(db: Path, tokens: Path) -> None:
    args = ("--auth-file", str(tokens), "--max-sessions-per-token", "2", "--max-sessions", "3")
    with http_server(db, *args) as server:
        first, second = _open_session(server.url, "tok-a"), _open_session(server.url, "tok-a")
        third = _open_session(server.url, "tok-a")
        other = _open_session(server.url, "tok-b")
        over_all = _open_session(server.url, "tok-b")
        assert [r.status_code for r in (first, second, third, other, over_all)] == [200, 200, 429, 200, 503]
        assert third.headers["retry-after"] and third.json()["error"]["code"] != 0
        assert _health(server.url)["sessions"] == 3
        ended = httpx2.delete(
            f"{server.url}/mcp",
            headers={"Authorization": "Bearer tok-a", "Mcp-Session-Id": first.headers["mcp-session-id"]},
            timeout=patience(10),
        )
        assert ended.status_code == 200
        assert _open_session(server.url, "tok-a").status_code == 200, "room again once one ends"


async def test_a_session_belongs_to_the_token_that_opened_it(db: Path, tokens: Path) -> None:
    """Same actor, another token (limited to another workspace, read-only): 404 on every verb, over
    both transports; what it may do with its own session is what its own grants allow."""
    with http_server(db, "--auth-file", str(tokens)) as server:
        session = _open_session(server.url, "tok-a").headers["mcp-session-id"]
        as_other = {**JSON_HEADERS, "Authorization": "Bearer tok-a-limited", "Mcp-Session-Id": session}
        post = httpx2.post(
            f"{server.url}/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=as_other
        )
        stream = httpx2.get(f"{server.url}/mcp", headers=as_other, timeout=patience(10))
        delete = httpx2.delete(f"{server.url}/mcp", headers=as_other, timeout=patience(10))
        assert [post.status_code, stream.status_code, delete.status_code] == [404, 404, 404]
        own = httpx2.post(
            f"{server.url}/mcp",
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers={**as_other, "Authorization": "Bearer tok-a"},
            timeout=patience(10),
        )
        assert own.status_code == 202, "the owner still uses it"
        with httpx2.stream("GET", f"{server.url}/sse", headers={"Authorization": "Bearer tok-a"}) as stream:
            endpoint = next(line[6:] for line in stream.iter_lines() if line.startswith("data: /messages/"))
            ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
            stolen = httpx2.post(f"{server.url}{endpoint}", json=ping, headers=as_other)
            assert stolen.status_code == 404
        async with mcp_sse(server.url, "tok-a") as client:
            assert (await call(client, "mnote.page.get", **page_args()))["ok"]
        async with mcp_http(server.url, "tok-a-limited") as limited:
            refused = await call(limited, "mnote.page.get", **page_args())
        assert refused["error"]["code"] == "mnote_tool_permission_denied"


async def _subscribe_and_leave(url: str, transport: str, token: str = "tok-a") -> None:
    """Subscribe over `transport` (2025 era: a session, streamable or SSE; 2026 era: a listen stream),
    check the server holds the watch, then leave."""
    if transport == "listen":
        async with (
            mcp_http(url, token, mode="auto") as client,
            client.listen(resource_subscriptions=[PAGE_URI]),
        ):
            assert wait_until(lambda: _health(url)["watches"] == 1, timeout=5)
        return
    opener = mcp_sse(url, token) if transport == "sse" else mcp_http(url, token)
    async with opener as client:
        await client.subscribe_resource(PAGE_URI)
        assert _health(url)["watches"] == 1


@pytest.mark.parametrize(("transport", "stateless"), [("http", False), ("sse", False), ("listen", True)])
async def test_watches_end_with_their_session(
    db: Path, tokens: Path, transport: str, stateless: bool
) -> None:
    with http_server(db, "--auth-file", str(tokens), *(["--stateless"] if stateless else [])) as server:
        for _ in range(3):
            await _subscribe_and_leave(server.url, transport)
        assert wait_until(lambda: _health(server.url)["watches"] == 0, timeout=10), _health(server.url)
        assert wait_until(lambda: _health(server.url)["sessions"] == 0, timeout=10), _health(server.url)


async def test_idle_sessions_are_closed_and_their_watches_released(db: Path, tokens: Path) -> None:
    """A client that subscribes and disappears without a DELETE: its session is closed after
    --session-idle-timeout, its watch released, and its session id answers 404."""
    with http_server(db, "--auth-file", str(tokens), "--session-idle-timeout", "1") as server:
        session = _open_session(server.url, "tok-a").headers["mcp-session-id"]
        headers = {**JSON_HEADERS, "Authorization": "Bearer tok-a", "Mcp-Session-Id": session}
        httpx2.post(
            f"{server.url}/mcp",
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers=headers,
        )
        subscribed = httpx2.post(
            f"{server.url}/mcp",
            json={"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": PAGE_URI}},
            headers=headers,
            timeout=patience(10),
        )
        assert subscribed.status_code == 200 and '"result"' in subscribed.text, subscribed.text
        assert _health(server.url)["watches"] == 1
        assert wait_until(lambda: _health(server.url)["watches"] == 0, timeout=10)
        assert _health(server.url)["sessions"] == 0
        late = httpx2.post(
            f"{server.url}/mcp",
            json={"jsonrpc": "2.0", "id": 3, "method": "ping"},
            headers=headers,
            timeout=patience(10),
        )
        assert late.status_code == 404


async def test_stateless_servers_refuse_subscriptions_outside_a_listen_stream(db: Path, tokens: Path) -> None:
    with http_server(db, "--auth-file", str(tokens), "--stateless") as server:
        async with mcp_http(server.url, "tok-a") as client:
            with pytest.raises(Exception, match="needs a session"):
                await client.subscribe_resource(PAGE_URI)
            assert (await call(client, "mnote.page.get", **page_args()))["ok"]
        assert _health(server.url)["watches"] == 0


def test_without_httptools_the_guard_parses_with_h11(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from uvicorn.protocols.http.h11_impl import H11Protocol
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from mnote_mcp.base.httpguard import guarded_protocol

    assert issubclass(guarded_protocol(4, 1.0, "httptools"), HttpToolsProtocol)
    assert issubclass(guarded_protocol(4, 1.0, "h11"), H11Protocol)
    monkeypatch.setitem(sys.modules, "uvicorn.protocols.http.httptools_impl", None)  # import fails
    with caplog.at_level("WARNING", logger="mnote_mcp"):
        fallback = guarded_protocol(4, 1.0, "httptools")
    assert issubclass(fallback, H11Protocol)
    assert "httptools is not installed" in caplog.text


@pytest.mark.parametrize("stateless", [False, True])
async def test_listen_streams_are_capped_per_token(db: Path, tokens: Path, stateless: bool) -> None:
    """2026-era `subscriptions/listen` streams: one token holds at most --max-listen-streams-per-token
    of them (one more is refused 429 from its headers, its other calls still work), another token
    is not affected, and a stream that ends makes room."""
    env = {"MNOTE_MAX_LISTEN_STREAMS_PER_TOKEN": "2"}
    args = ("--auth-file", str(tokens), *(["--stateless"] if stateless else []))
    with http_server(db, *args, env=env) as server:
        async with AsyncExitStack() as streams:
            for _ in range(2):
                client = await streams.enter_async_context(mcp_http(server.url, "tok-a", mode="auto"))
                await streams.enter_async_context(client.listen(resource_subscriptions=[PAGE_URI]))
            async with mcp_http(server.url, "tok-a", mode="auto") as third:
                with pytest.raises(MCPError, match="Too many open listen streams for this token"):
                    async with third.listen(resource_subscriptions=[PAGE_URI]):
                        pass
                assert (await call(third, "mnote.page.get", **page_args()))["ok"], "its calls still work"
            assert wait_until(lambda: _health(server.url)["watches"] == 2, timeout=5)
            assert _health(server.url)["listenStreams"] == 2
            async with (
                mcp_http(server.url, "tok-b", mode="auto") as other,
                other.listen(resource_subscriptions=[PAGE_URI]),
            ):
                assert _health(server.url)["listenStreams"] == 3
        assert wait_until(lambda: _health(server.url)["listenStreams"] == 0, timeout=10), _health(server.url)
        assert wait_until(lambda: _health(server.url)["watches"] == 0, timeout=10), _health(server.url)
        async with (
            mcp_http(server.url, "tok-a", mode="auto") as again,
            again.listen(resource_subscriptions=[PAGE_URI]),
        ):
            assert _health(server.url)["listenStreams"] == 1, "room again once they end"
