"""Issue 30: page text reaches only a connection granted `page.read`.

A connection granted `page.write` (and `artifact.write`) but not `page.read` may write a page it may not
read: `mnote.page.get` refuses it. Every answer to it must then hold no page text either: not a write's
or a dry run's result (`textDiff`, a title's `from`/`to`), not a refusal's details (`mnote.page.edit_text`'s
`candidates`), not the question a person is asked to confirm the write. The calls are every write tool's
examples (dry run and real) and every error its declaration shows by example, from the registry, on a
page whose every title and block text holds a canary; the same calls from a connection that may read
show the canaries, so the check can fail.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from mnote_mcp.tools.examples import Target
from mnote_mcp.tools.permissions import Caller
from mnote_mcp.tools.registry import ToolSpec
from mnote_mcp.vocabulary.scopes import Scope
from tests.support.helpers import FIXTURE, IDS, call, connect, store_with_pages
from tests.support.tool_calls import TOOLS, arguments, calls, error_examples
from tests.unit.calls.test_confirmation import Person

pytestmark = pytest.mark.anyio

CANARY = re.compile(r"CANARY-[A-Z]+-[0-9a-f]{4}")
PAGE: dict[str, Any] = {
    "id": "doc_canary",
    "title": "CANARY-TITLE-5e1f",
    "blocks": [
        {"id": "cn_1", "type": "heading", "text": "CANARY-HEAD-0a1b text.", "props": {"level": 1}},
        {"id": "cn_2", "type": "paragraph", "text": "CANARY-ONE-77b2 text on this page."},
        {"id": "cn_3", "type": "paragraph", "text": "CANARY-TWO-3c4d text."},
        {"id": "cn_4", "type": "paragraph", "text": "CANARY-THREE-9e8f text."},
    ],
}
CANARY_PAGE = Target("ws_1", "doc_canary", ("cn_1", "cn_2", "cn_3"))
WRITE_ONLY = frozenset({Scope.PAGE_WRITE, Scope.ARTIFACT_WRITE})
EVERY_SCOPE = frozenset(Scope)
WRITES = sorted(name for name, spec in TOOLS.items() if spec.writes)


@pytest.fixture
def canary_db(tmp_path: Path) -> Path:
    return store_with_pages(tmp_path / "canary.db", FIXTURE, PAGE)


def _actor(spec: ToolSpec) -> str:
    caller = next(c for c in (Caller.EDITOR, Caller.OWNER) if spec.permissions.refusal(c) is None)
    return {Caller.EDITOR: "user_editor", Caller.OWNER: "user_owner"}[caller]


async def _answers(db: Path, spec: ToolSpec, scopes: frozenset[Scope]) -> list[dict[str, Any]]:
    """Every declared error example, then each example's dry run (its prior written for real) and
    the real call, of `spec` on the canary page, from a connection granted `scopes`."""
    page = CANARY_PAGE
    envelopes: list[dict[str, Any]] = []
    async with connect(db, actor=_actor(spec), scopes=scopes) as client:
        for index, example in enumerate(error_examples(spec, same_page=True)):
            made = arguments(spec, page, f"error-{index}", example=example)
            envelopes.append(await call(client, spec.name, **{**IDS, **made}))
        for index, example in enumerate(spec.examples):
            for dry_run in (True, False):
                for name, made in calls(spec, page, f"ex-{index}", dry_run=dry_run, example=example):
                    envelopes.append(await call(client, name, **{**IDS, **made}))
    return envelopes


@pytest.mark.parametrize("name", WRITES)
async def test_a_connection_that_may_not_read_is_shown_no_page_text(canary_db: Path, name: str) -> None:
    envelopes = await _answers(canary_db, TOOLS[name], WRITE_ONLY)
    leaked = [
        (e["toolName"], CANARY.findall(json.dumps(e))) for e in envelopes if CANARY.search(json.dumps(e))
    ]
    assert not leaked, leaked


async def test_a_connection_that_may_read_is_shown_the_same_page_text(tmp_path: Path) -> None:
    """The control: the calls above show page text where they have any (so the check above can fail),
    in each kind of field that carries it."""
    shown: dict[str, list[dict[str, Any]]] = {}
    for name in (
        "mnote.page.edit_text",
        "mnote.block.update",
        "mnote.page.update_title",
        "mnote.page.revert",
    ):
        db = store_with_pages(tmp_path / f"{name}.db", FIXTURE, PAGE)
        shown[name] = await _answers(db, TOOLS[name], EVERY_SCOPE)
    edits = shown["mnote.page.edit_text"]
    assert any(
        CANARY.search(json.dumps(e["error"]["details"].get("candidates"))) for e in edits if e["error"]
    )
    assert any(CANARY.search((e["result"] or {}).get("textDiff", "")) for e in shown["mnote.block.update"])
    title_ops = [
        op
        for e in shown["mnote.page.update_title"] + shown["mnote.page.revert"]
        for op in (e["result"] or {}).get("diff", [])
        if op.get("field") == "title"
    ]
    assert any(CANARY.search(json.dumps(op)) for op in title_ops)


async def test_what_is_withheld_is_said(canary_db: Path) -> None:
    """Nothing is left out silently: a refusal names the details it withholds, a result warns."""
    page = CANARY_PAGE
    missing = {"edits": [{"oldText": "CANARY", "newText": "x"}]}
    async with connect(canary_db, scopes=WRITE_ONLY) as client:
        refused = await call(
            client,
            "mnote.page.edit_text",
            **{**IDS, **arguments(TOOLS["mnote.page.edit_text"], page, "m"), **missing, "blockId": None},
        )
        planned = await call(
            client,
            "mnote.block.update",
            **{**IDS, **arguments(TOOLS["mnote.block.update"], page, "u", dry_run=True)},
        )
        renamed = await call(
            client,
            "mnote.page.update_title",
            **{**IDS, **arguments(TOOLS["mnote.page.update_title"], page, "t")},
        )
    details = refused["error"]["details"]
    assert "candidates" not in details and details["withheld"] == ["candidates"], details
    assert refused["error"]["details"]["pointer"] == "/edits/0/oldText"
    assert "textDiff" not in planned["result"]
    assert [w["code"] for w in planned["result"]["warnings"]] == ["page_text_withheld"]
    assert planned["result"]["warnings"][0]["details"] == {"withheld": ["textDiff"]}
    assert renamed["result"]["diff"] == [{"op": "set", "field": "title"}]
    assert renamed["result"]["warnings"][0]["details"] == {"withheld": ["diff"]}


@pytest.mark.parametrize(("scopes", "leaks"), [(WRITE_ONLY, False), (EVERY_SCOPE, True)])
async def test_the_question_before_a_write_quotes_no_page_text_it_may_not_read(
    canary_db: Path, scopes: frozenset[Scope], leaks: bool
) -> None:
    """`--confirm always`: the person is asked with the plan's summary (the lines a delete removes,
    the title of the page); a connection that may not read is asked by the page's id and counts."""
    page = CANARY_PAGE
    person = Person("accept")
    async with connect(canary_db, scopes=scopes, elicitation_callback=person, confirm="always") as client:
        for name in ("mnote.block.delete", "mnote.page.revert"):
            for made_name, made in calls(TOOLS[name], page, "q"):
                envelope = await call(client, made_name, **{**IDS, **made})
                assert envelope["ok"], envelope
    assert person.questions
    assert bool(CANARY.search("\n".join(person.questions))) is leaks, person.questions
