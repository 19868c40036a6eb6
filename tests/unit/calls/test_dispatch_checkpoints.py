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

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.port import Command, CommandOutcome, PageQuery, PageView
from mnote_mcp.kernel.store.kernel import StoreKernel
from mnote_mcp.tools.catalog import ALL_TOOLS
from mnote_mcp.tools.permissions import Caller, Refusal
from mnote_mcp.tools.registry import ToolSpec
from mnote_mcp.vocabulary.messages import render_error
from mnote_mcp.vocabulary.scopes import Scope
from tests.support.helpers import IDS, MODES, call, connect, seeded_store, write_args
from tests.support.tool_calls import arguments, call_example, error_examples, target, wrong_types

pytestmark = pytest.mark.anyio
BAD_BLOCK = [{"type": "video", "text": "x"}]


# (actor, connection scopes, page, who that is) -> each tool's declared permission case decides what
# it hears; on a page that does not exist, a member may still hear only that.
ROWS: list[tuple[str | None, frozenset[Scope] | None, str, Caller | None]] = [
    (None, None, "doc_1", Caller.ANONYMOUS),
    ("user_stranger", None, "doc_1", Caller.NON_MEMBER),
    ("user_stranger", None, "doc_nope", Caller.NON_MEMBER),
    ("user_editor", None, "doc_nope", None),
    ("user_editor", None, "doc_secret", Caller.NOT_LISTED),
    ("user_commenter", None, "doc_1", Caller.COMMENTER),
    ("user_viewer", None, "doc_1", Caller.VIEWER),
    ("user_owner", frozenset({Scope.PAGE_READ}), "doc_1", Caller.PAGE_READ_SCOPE),
]
PAGE_NOT_FOUND = Refusal(ErrorCode.NOT_FOUND, Reason.PAGE, "")


_EVERY_CALL = {*IDS, "workspaceId", "documentId", "idempotencyKey", "dryRun"}


def _without_required(spec: ToolSpec, made: dict[str, Any]) -> dict[str, Any] | None:
    """`made` without the tool's own required arguments; None for a tool that requires none."""
    own = set(spec.contract_schema.get("required", ())) - _EVERY_CALL
    return {name: value for name, value in made.items() if name not in own} if own else None


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("actor", "scopes", "document", "caller"), ROWS)
async def test_each_checkpoint_comes_before_validation(
    db: Path,
    mode: str,
    actor: str | None,
    scopes: frozenset[Scope] | None,
    document: str,
    caller: Caller | None,
) -> None:
    """Every tool, called with every argument of the wrong type, without its own required arguments,
    and with each call its declared errors are shown by: a caller the tool refuses hears its declared
    refusal whatever it sent; one it admits hears what is wrong with the arguments."""
    page = target(document, "ws_1")
    config = {"scopes": scopes} if scopes is not None else {}
    async with connect(db, mode, actor=actor, **config) as client:
        for spec in ALL_TOOLS:
            refusal = PAGE_NOT_FOUND if caller is None else spec.permissions.refusal(caller)
            if refusal is PAGE_NOT_FOUND and not spec.page_bound:
                refusal = None  # no page named: nothing to be missing
            wrong = wrong_types(spec)  # (a tool with no argument of its own has none to get wrong)
            bad = [{**arguments(spec, page, "k"), **wrong}] if wrong else []
            if refusal is not None and (missing := _without_required(spec, arguments(spec, page, "k"))):
                bad.append(missing)
            if refusal is not None:
                bad += [arguments(spec, page, "k", example=e) for e in error_examples(spec, same_page=True)]
            for made in bad:
                envelope = await call(client, spec.name, **{**IDS, **made})
                error = envelope["error"]
                assert error is not None, (spec.name, made)
                if refusal is None:
                    assert error["code"] == "mnote_tool_invalid_argument", (spec.name, error)
                    continue
                said = MnoteError(refusal.code, refusal.reason, error.get("details"))
                assert error == render_error(said, "en"), (spec.name, made, error)


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


class CountingKernel(StoreKernel):
    """The embedded kernel, counting the authorization questions it is asked."""

    questions = 0

    async def authorize(self, actor_id: str, workspace_id: str, document_id: str, scope: Scope) -> None:
        CountingKernel.questions += 1
        await super().authorize(actor_id, workspace_id, document_id, scope)

    async def execute(self, command: Command) -> CommandOutcome:
        return await super().execute(command)

    async def get_page(self, query: PageQuery) -> PageView:
        return await super().get_page(query)


async def test_a_valid_call_asks_the_kernel_nothing_more(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The order costs a valid call nothing: the kernel checks permissions before it does anything, so
    the extra question is asked only when validation has something to refuse."""
    monkeypatch.setattr("tests.support.helpers.StoreKernel", CountingKernel)
    CountingKernel.questions = 0
    async with connect(db, actor="user_editor") as client:
        for spec in ALL_TOOLS:  # every tool's example, valid
            assert (await call_example(client, spec, target("doc_1"), "valid"))["ok"], spec.name
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
