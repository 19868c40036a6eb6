"""Where a person can be asked over HTTP (issue 25): a real `mnote-mcp serve --transport http` and the
SDK client declaring form elicitation, one destructive save per case.

2025-11-25 asks inside the call, so it needs a channel for a server request: `/sse` has one, `/mcp`
only with `--sse-responses` (a POST answered with one JSON body, the default, has none, nor does
`--stateless`); there the client cannot be asked and `--confirm-fallback` decides. 2026-07-28 asks
with an `input_required` result, which any answer can carry: `/mcp` in its default framing too.
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


Connect = Callable[[str, Person], AbstractAsyncContextManager[Client]]


def _mcp(mode: str) -> Connect:
    def connect(url: str, person: Person) -> AbstractAsyncContextManager[Client]:
        return mcp_http_client(url, TOKEN, mode=mode, elicitation_callback=person)

    return connect


def _sse(url: str, person: Person) -> AbstractAsyncContextManager[Client]:
    return mcp_sse(url, TOKEN, elicitation_callback=person)


# (endpoint and era, server flags, asked?)
CASES: list[tuple[str, Connect, tuple[str, ...], bool]] = [
    ("mcp-2025-json", _mcp("legacy"), (), False),
    ("mcp-2025-sse-responses", _mcp("legacy"), ("--sse-responses",), True),
    ("mcp-2025-stateless", _mcp("legacy"), ("--stateless", "--sse-responses"), False),
    ("mcp-2026-json", _mcp("auto"), (), True),
    ("sse-2025", _sse, (), True),
]


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    return write_tokens(tmp_path / "tokens.json", {TOKEN: {"actorId": "user_editor"}})


@pytest.mark.parametrize(("name", "connect", "flags", "asked"), CASES, ids=[case[0] for case in CASES])
async def test_who_can_be_asked_over_http(
    tmp_path: Path, tokens: Path, name: str, connect: Connect, flags: tuple[str, ...], asked: bool
) -> None:
    db = seeded_store(tmp_path / "mnote.db")
    before = dump(db, audit=False)
    person = Person()
    with http_server(db, "--auth-file", str(tokens), *flags) as server:
        async with connect(server.url, person) as client:
            envelope = envelope_of(await client.call_tool("mnote.page.save", write_args(name, **REPLACE)))
    if asked:
        assert len(person.questions) == 1 and "Deletes 3 block(s)" in person.questions[0]
        assert envelope["error"]["details"]["confirmation"] == "declined"
        assert dump(db, audit=False) == before, "nothing but the refusal's audit record"
    else:
        assert person.questions == [], "no channel to ask on: the client is not asked"
        assert envelope["ok"] and envelope["audit"]["effect"] == "write", "--confirm-fallback write"


async def test_a_client_that_cannot_be_asked_is_refused_under_fallback_refuse(
    tmp_path: Path, tokens: Path
) -> None:
    db = seeded_store(tmp_path / "mnote.db")
    before = dump(db, audit=False)
    person = Person()
    with http_server(db, "--auth-file", str(tokens), "--confirm-fallback", "refuse") as server:
        async with _mcp("legacy")(server.url, person) as client:
            envelope = envelope_of(await client.call_tool("mnote.page.save", write_args("refuse", **REPLACE)))
    assert person.questions == []
    assert envelope["error"]["details"] == {"confirmation": "unavailable"}
    assert dump(db) == before
