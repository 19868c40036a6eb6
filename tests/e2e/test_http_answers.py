"""How a POST to /mcp is answered: one JSON body (the spec lets the server choose between that and an
SSE stream; clients must accept both), with and without sessions; an SSE stream with
`--sse-responses`. Driven with raw HTTP, so the content type and framing on the wire are what is
checked; the SDK client's view of the same calls is in test_http.py and the conformance suite."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import httpx2
import pytest

from tests.support.helpers import RAW_INITIALIZE, envelope_in, page_args, seeded_store
from tests.support.http_helpers import RunningServer, http_server, write_tokens
from tests.support.timing import patience

pytestmark = [pytest.mark.e2e]
HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "Authorization": "Bearer tok-editor",
}


Served = Callable[..., RunningServer]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`served(*flags)`: the server with those flags (besides `--auth-file`), started on first use, each
    on a store of its own, and kept for the module: every test here opens its own session and only reads."""
    base = tmp_path_factory.mktemp("http-answers")
    tokens = write_tokens(base / "tokens.json", {"tok-editor": {"actorId": "user_editor"}})
    started: dict[tuple[str, ...], RunningServer] = {}
    with ExitStack() as stack:

        def server(*flags: str) -> RunningServer:
            if flags not in started:
                db = seeded_store(base / f"mnote-{len(started)}.db")
                started[flags] = stack.enter_context(http_server(db, "--auth-file", str(tokens), *flags))
            return started[flags]

        yield server


def _messages(response: httpx2.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an answer, whichever way it is framed."""
    if response.headers["content-type"].startswith("text/event-stream"):
        return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    return [response.json()]


def _session(url: str) -> dict[str, str]:
    """The headers of a handshake-era session, opened with initialize and initialized."""
    opened = httpx2.post(f"{url}/mcp", json=RAW_INITIALIZE, headers=HEADERS, timeout=patience(10))
    assert opened.status_code == 200, opened.text
    headers = {**HEADERS, "mcp-protocol-version": "2025-11-25"}
    if "mcp-session-id" in opened.headers:
        headers["mcp-session-id"] = opened.headers["mcp-session-id"]
    notified = httpx2.post(
        f"{url}/mcp",
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers=headers,
        timeout=patience(10),
    )
    assert notified.status_code == 202
    return headers


def _read(url: str, headers: dict[str, str], ident: int = 7) -> httpx2.Response:
    request = {
        "jsonrpc": "2.0",
        "id": ident,
        "method": "tools/call",
        "params": {"name": "mnote.page.get", "arguments": page_args()},
    }
    return httpx2.post(f"{url}/mcp", json=request, headers=headers, timeout=patience(10))


@pytest.mark.parametrize("flags", [(), ("--stateless",)], ids=["sessions", "stateless"])
def test_a_call_is_answered_with_one_json_body(served: Served, flags: tuple[str, ...]) -> None:
    server = served(*flags)
    headers = _session(server.url)
    answer = _read(server.url, headers)
    other = _read(server.url, headers, ident=8)
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert int(answer.headers["content-length"]) == len(answer.content)
    body = answer.json()
    assert body["id"] == 7 and body["jsonrpc"] == "2.0"
    assert envelope_in(body["result"])["ok"] is True
    assert envelope_in(body["result"])["result"]["documentId"] == "doc_1"
    assert other.json()["id"] == 8
    if not flags:
        assert answer.headers["mcp-session-id"] == headers["mcp-session-id"]


def test_sse_responses_answer_each_call_with_an_event_stream(served: Served) -> None:
    server = served("--sse-responses")
    headers = _session(server.url)
    answer = _read(server.url, headers)
    assert answer.headers["content-type"].startswith("text/event-stream")
    (message,) = _messages(answer)
    assert message["id"] == 7
    assert envelope_in(message["result"])["ok"] is True


def test_both_framings_carry_the_same_answer(served: Served) -> None:
    answers = []
    for flags in ((), ("--sse-responses",)):
        server = served(*flags)
        headers = _session(server.url)
        (message,) = _messages(_read(server.url, headers))
        answers.append(message)
    assert answers[0] == answers[1]
