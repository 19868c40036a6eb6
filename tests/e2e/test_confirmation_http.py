"""Where a person can be asked over HTTP (issues 25, 31): a real `mnote-mcp serve --transport http`
and the SDK client, one destructive save per case.

2025-11-25 asks inside the call, so it needs a channel for a server request: `/sse` has one, and
`/mcp` answers a write that may ask as an SSE stream whatever `--sse-responses` says (issue 31: with
the default one-JSON-body answers the question had no room and the write went through silently).
`--stateless` has no channel for the answer: there the call is answered with the confirmation result
(a handle the agent sends back after asking its person), never written unasked. 2026-07-28 asks with
an `input_required` result, which any answer can carry. A client that declares no elicitation gets
the confirmation result on every transport.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp import Client
from mcp.client.context import ClientRequestContext

from tests.support.helpers import dump, envelope_of, seeded_store, write_args
from tests.support.http_helpers import http_server, mcp_http_client, mcp_sse, write_tokens

pytestmark = pytest.mark.anyio

TOKEN = "confirm-token-0123456789abcdef"
REPLACE: dict[str, Any] = {"content": [{"type": "paragraph", "text": "Only this is left."}]}


class Person:
    def __init__(self) -> None:
        self.questions: list[str] = []

    async def __call__(
        self, ctx: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.questions.append(params.message)
        return types.ElicitResult(action="decline")


Connect = Callable[[str, Person | None], AbstractAsyncContextManager[Client]]


def _mcp(mode: str) -> Connect:
    def connect(url: str, person: Person | None) -> AbstractAsyncContextManager[Client]:
        return mcp_http_client(url, TOKEN, mode=mode, elicitation_callback=person)

    return connect


def _sse(url: str, person: Person | None) -> AbstractAsyncContextManager[Client]:
    return mcp_sse(url, TOKEN, elicitation_callback=person)


# (endpoint and era, server flags, how the write is consented: "asked" or "held" for a confirmation)
CASES: list[tuple[str, Connect, tuple[str, ...], str]] = [
    ("mcp-2025-json", _mcp("legacy"), (), "asked"),
    ("mcp-2025-sse-responses", _mcp("legacy"), ("--sse-responses",), "asked"),
    ("mcp-2025-stateless", _mcp("legacy"), ("--stateless",), "held"),
    ("mcp-2025-stateless-sse-responses", _mcp("legacy"), ("--stateless", "--sse-responses"), "held"),
    ("mcp-2026-json", _mcp("auto"), (), "asked"),
    ("mcp-2026-stateless", _mcp("auto"), ("--stateless",), "asked"),
    ("sse-2025", _sse, (), "asked"),
]


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    return write_tokens(tmp_path / "tokens.json", {TOKEN: {"actorId": "user_editor"}})


def _held(envelope: dict[str, Any]) -> None:
    """The confirmation result: nothing written, a handle to send back once the person agreed."""
    assert envelope["ok"] is False and envelope["audit"]["effect"] == "none", envelope
    error = envelope["error"]
    assert error["code"] == "mnote_tool_permission_denied", error
    assert error["details"]["confirmation"] == "required", error
    assert error["details"]["confirmationKey"].startswith("c1."), error


@pytest.mark.parametrize(("name", "connect", "flags", "consent"), CASES, ids=[case[0] for case in CASES])
async def test_who_can_be_asked_over_http(
    tmp_path: Path, tokens: Path, name: str, connect: Connect, flags: tuple[str, ...], consent: str
) -> None:
    db = seeded_store(tmp_path / "mnote.db")
    before = dump(db, audit=False)
    person = Person()
    with http_server(db, "--auth-file", str(tokens), *flags) as server:
        async with connect(server.url, person) as client:
            envelope = envelope_of(await client.call_tool("mnote.page.save", write_args(name, **REPLACE)))
    assert dump(db, audit=False) == before, "nothing written but the audit record"
    if consent == "asked":
        assert len(person.questions) == 1 and "Deletes 3 block(s)" in person.questions[0]
        assert envelope["error"]["details"]["confirmation"] == "declined"
    else:
        assert person.questions == [], "no channel to ask on: the client is not asked"
        _held(envelope)


@pytest.mark.parametrize(
    ("name", "connect", "flags"),
    [
        ("mcp-2025", _mcp("legacy"), ()),
        ("mcp-2025-stateless", _mcp("legacy"), ("--stateless",)),
        ("mcp-2026", _mcp("auto"), ()),
        ("sse-2025", _sse, ()),
    ],
    ids=["mcp-2025", "mcp-2025-stateless", "mcp-2026", "sse-2025"],
)
async def test_a_client_that_cannot_be_asked_gets_the_confirmation_result_not_a_write(
    tmp_path: Path, tokens: Path, name: str, connect: Connect, flags: tuple[str, ...]
) -> None:
    """Issue 31: a client without elicitation had the destructive write made (`--confirm-fallback
    write`, the old default). Now it is held; the handle, sent back as the key, writes it once."""
    db = seeded_store(tmp_path / "mnote.db")
    before = dump(db, audit=False)
    with http_server(db, "--auth-file", str(tokens), *flags) as server:
        async with connect(server.url, None) as client:
            held = envelope_of(await client.call_tool("mnote.page.save", write_args(name, **REPLACE)))
            _held(held)
            assert dump(db, audit=False) == before
            handle = held["error"]["details"]["confirmationKey"]
            written = envelope_of(await client.call_tool("mnote.page.save", write_args(handle, **REPLACE)))
            again = envelope_of(await client.call_tool("mnote.page.save", write_args(handle, **REPLACE)))
    assert written["ok"] and written["audit"]["effect"] == "write", written
    assert again["ok"] is False and again["error"]["details"]["confirmation"] == "used", again
    assert dump(db, audit=False) != before


async def test_a_client_that_cannot_be_asked_is_refused_under_fallback_refuse(
    tmp_path: Path, tokens: Path
) -> None:
    db = seeded_store(tmp_path / "mnote.db")
    before = dump(db, audit=False)
    with http_server(db, "--auth-file", str(tokens), "--confirm-fallback", "refuse") as server:
        async with _mcp("legacy")(server.url, None) as client:
            envelope = envelope_of(await client.call_tool("mnote.page.save", write_args("refuse", **REPLACE)))
    assert envelope["error"]["details"] == {"confirmation": "unavailable"}
    assert dump(db) == before


async def test_a_run_over_mcp_is_the_clients_unless_it_names_one(tmp_path: Path, tokens: Path) -> None:
    """Issue 31 (low-medium): over `/mcp` in the 2026-07-28 era (no session, as fastmcp and the OpenAI
    Agents SDK speak it) a client that names no run got a run per call, so undoing "my run" undid one
    of its two edits. The run is the HTTP client's now; another client's is another."""
    db = seeded_store(tmp_path / "mnote.db")
    divider: dict[str, Any] = {"blocks": [{"type": "divider"}]}

    def unnamed(key: str, **arguments: Any) -> dict[str, Any]:
        """A write that names no run (no `runId`, no `X-Mnote-Run-Id`, no `_meta`)."""
        return {
            "workspaceId": "ws_1",
            "documentId": "doc_1",
            "idempotencyKey": key,
            "dryRun": False,
            **arguments,
        }

    with http_server(db, "--auth-file", str(tokens)) as server:
        async with _mcp("auto")(server.url, None) as client:
            first = envelope_of(await client.call_tool("mnote.block.insert", unnamed("one", **divider)))
            second = envelope_of(await client.call_tool("mnote.block.insert", unnamed("two", **divider)))
            undo = {"undoRunId": first["result"]["runId"]}
            undone = envelope_of(await client.call_tool("mnote.page.revert", unnamed("undo", **undo)))
        async with _mcp("auto")(server.url, None) as other:
            theirs = envelope_of(await other.call_tool("mnote.block.insert", unnamed("three", **divider)))
    assert first["result"]["runId"] == second["result"]["runId"], (first["result"], second["result"])
    assert undone["ok"], undone
    assert sorted(undone["result"]["revertedRevisions"]) == [
        first["result"]["revision"],
        second["result"]["revision"],
    ]
    assert theirs["result"]["runId"] != first["result"]["runId"]
