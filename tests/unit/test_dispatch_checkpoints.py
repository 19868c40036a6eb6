"""Issue 11 item 4: the contract's checkpoint order — login, workspace member, page read, then page
write or artifact write — comes before argument validation, wherever following it reveals nothing.

A caller who may not make a call hears why they may not, whatever arguments they sent: bad arguments
never turn a permission refusal into an invalid-argument one (which would tell an unauthenticated or
unauthorized caller something about the tool or the page it may not use). Only the page ids must be
strings to be checked at all. A caller who may make the call hears exactly what is wrong with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnote_mcp.kernel.local import LocalKernel
from mnote_mcp.kernel.port import Command, CommandOutcome, PageQuery
from mnote_mcp.vocabulary.scopes import Scope
from tests.support.helpers import MODES, call, connect, page_args, seeded_store, write_args

pytestmark = pytest.mark.anyio
BAD_BLOCK = [{"type": "video", "text": "x"}]


def refusal(envelope: dict[str, Any]) -> tuple[str, str | None]:
    assert not envelope["ok"], envelope
    error = envelope["error"]
    return error["code"], (error.get("details") or {}).get("scope") or error["message"]


@pytest.mark.parametrize("mode", MODES)
async def test_no_actor_is_unauthenticated_whatever_the_arguments(db: Path, mode: str) -> None:
    async with connect(db, mode, actor=None) as client:
        bad_title = await call(client, "mnote.page.update_title", **write_args("k", title=42))
        no_title = await call(client, "mnote.page.update_title", **write_args("k"))
        bad_block = await call(client, "mnote.page.save", **write_args("k", content=BAD_BLOCK))
        bad_read = await call(client, "mnote.page.get", **page_args(maxBlocks=0, cursor=7))
    for envelope in (bad_title, no_title, bad_block, bad_read):
        assert envelope["error"]["code"] == "mnote_tool_unauthenticated", envelope["error"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_viewer_sending_a_bad_block_is_refused_the_write(db: Path, mode: str) -> None:
    async with connect(db, mode, actor="user_viewer") as client:
        bad_block = await call(client, "mnote.page.save", **write_args("k", content=BAD_BLOCK))
        bad_schema = await call(client, "mnote.page.update_title", **write_args("k", title=""))
        bad_insert = await call(client, "mnote.block.insert", **write_args("k", blocks=[], position="middle"))
        valid = await call(client, "mnote.page.update_title", **write_args("k", title="fine"))
    for envelope in (bad_block, bad_schema, bad_insert):
        assert envelope["error"] == valid["error"], "the same refusal as for a valid call"
    assert valid["error"]["code"] == "mnote_tool_permission_denied"
    assert valid["error"]["message"] == "no page write permission"


@pytest.mark.parametrize(
    ("actor", "document", "expected"),
    [
        ("user_stranger", "doc_1", ("mnote_tool_permission_denied", "not a member of this workspace")),
        ("user_stranger", "doc_nope", ("mnote_tool_permission_denied", "not a member of this workspace")),
        ("user_editor", "doc_nope", ("mnote_tool_not_found", "page not found")),
        ("user_editor", "doc_secret", ("mnote_tool_permission_denied", "no page read permission")),
        ("user_commenter", "doc_1", ("mnote_tool_permission_denied", "no page write permission")),
    ],
)
async def test_each_checkpoint_comes_before_validation(
    db: Path, actor: str, document: str, expected: tuple[str, str]
) -> None:
    async with connect(db, actor=actor) as client:
        cases: list[tuple[str, dict[str, Any]]] = [
            ("mnote.page.save", {"content": BAD_BLOCK}),
            ("mnote.page.update_options", {"options": {"nope": 1}}),
            ("mnote.block.move", {"blockId": "p_1", "afterBlockId": "p_1", "position": "end"}),
        ]
        for tool, bad in cases:
            envelope = await call(client, tool, **write_args("k", document_id=document, **bad))
            assert refusal(envelope) == expected, (tool, envelope["error"])
        read = await call(client, "mnote.page.get", **page_args(document, cursor="garbage"))
    if expected[1] not in ("no page write permission",):
        assert refusal(read) == expected, read["error"]
    else:
        assert refusal(read) == ("mnote_tool_invalid_argument", read["error"]["message"])


async def test_a_missing_scope_comes_before_validation(db: Path) -> None:
    async with connect(db, actor="user_owner", scopes=frozenset({Scope.PAGE_READ})) as client:
        envelope = await call(client, "mnote.page.save", **write_args("k", content=BAD_BLOCK))
    assert refusal(envelope) == ("mnote_tool_permission_denied", "page.write")


async def test_a_caller_who_may_write_hears_what_is_wrong(db: Path) -> None:
    async with connect(db, actor="user_editor") as client:
        bad_block = await call(client, "mnote.page.save", **write_args("k", content=BAD_BLOCK))
        bad_title = await call(client, "mnote.page.update_title", **write_args("k", title=42))
    assert bad_block["error"]["details"]["pointer"] == "/content/0/type"
    assert bad_title["error"]["details"]["pointer"] == "/title"


async def test_page_ids_that_are_not_strings_are_invalid_for_everyone(db: Path) -> None:
    """Nothing can be checked about a page that is not named: this reveals nothing either."""
    async with connect(db, actor="user_viewer") as client:
        envelope = await call(
            client, "mnote.page.update_title", **{**write_args("k", title="x"), "documentId": 7}
        )
    assert envelope["error"]["details"]["pointer"] == "/documentId"


class CountingKernel(LocalKernel):
    """The embedded kernel, counting the authorization questions it is asked."""

    questions = 0

    async def authorize(self, actor_id: str, workspace_id: str, document_id: str, scope: Scope) -> None:
        CountingKernel.questions += 1
        await super().authorize(actor_id, workspace_id, document_id, scope)

    async def execute(self, command: Command) -> CommandOutcome:
        return await super().execute(command)

    async def get_page(self, query: PageQuery) -> dict[str, Any]:
        return await super().get_page(query)


async def test_a_valid_call_asks_the_kernel_nothing_more(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The order costs a valid call nothing: the kernel checks permissions before it does anything, so
    the extra question is asked only when validation has something to refuse."""
    monkeypatch.setattr("tests.support.helpers.LocalKernel", CountingKernel)
    CountingKernel.questions = 0
    async with connect(db, actor="user_editor") as client:
        await call(client, "mnote.page.get", **page_args())
        await call(client, "mnote.page.update_title", **write_args("k1", title="ok"))
        await call(client, "mnote.block.delete", **write_args("k2", blockIds=["p_2"]))
        assert CountingKernel.questions == 0
        await call(client, "mnote.page.update_title", **write_args("k3", title=42))
        assert CountingKernel.questions == 1


VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=2)
)


@pytest.mark.slow
@pytest.mark.parametrize("actor", ["user_viewer", "user_stranger"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    arguments=st.dictionaries(st.sampled_from(["title", "idempotencyKey", "dryRun", "baseRevision"]), VALUES)
)
async def test_whatever_a_refused_caller_sends_the_refusal_is_the_same(
    tmp_path_factory: pytest.TempPathFactory, actor: str, arguments: dict[str, Any]
) -> None:
    db = seeded_store(tmp_path_factory.mktemp("order") / "mnote.db")
    async with connect(db, actor=actor) as client:
        valid = await call(client, "mnote.page.update_title", **write_args("k", title="x"))
        envelope = await call(
            client, "mnote.page.update_title", **{**write_args("k", title="x"), **arguments}
        )
    assert envelope["error"] == valid["error"]
