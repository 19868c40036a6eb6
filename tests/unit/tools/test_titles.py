"""A page named by its title in the call that acts on it (issue 35, `tools/titles.py`): `documentId`
is the page's id or its whole title (case-folded), `workspaceId` may be "" when the model does not know
it; an id is tried first, so a call by id costs what it did; several readable pages with the title are
refused with the candidates, never guessed; pages the caller may not read are never found, named or
counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

from mnote_mcp.kernel.port import PageRef, PagesQuery
from mnote_mcp.kernel.store.kernel import StoreKernel
from mnote_mcp.tools.titles import MAX_CANDIDATES
from mnote_mcp.vocabulary.identity import Identity
from tests.support.helpers import FIXTURE, IDS, MODES, call, connect, dump, make_app, store_with_pages

pytestmark = pytest.mark.anyio


def named(page: str, workspace: str = "", **extra: Any) -> dict[str, Any]:
    return {"workspaceId": workspace, "documentId": page, **IDS, **extra}


def write(page: str, key: str, workspace: str = "", **extra: Any) -> dict[str, Any]:
    return named(page, workspace, idempotencyKey=key, dryRun=False, **extra)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("title", "workspace"), [("Project plan", ""), ("pROJECT PLAN", ""), ("Project plan", "ws_1")]
)
async def test_a_read_by_title_reads_that_page(db: Path, mode: str, title: str, workspace: str) -> None:
    async with connect(db, mode) as client:
        envelope = await call(client, "mnote.page.get", **named(title, workspace))
    assert envelope["ok"], envelope["error"]
    assert envelope["result"]["documentId"] == "doc_1" and envelope["result"]["title"] == "Project plan"
    assert (envelope["audit"]["workspaceId"], envelope["audit"]["documentId"]) == ("ws_1", "doc_1")


async def _page(client: Any, document_id: str) -> dict[str, Any]:
    envelope = await call(client, "mnote.page.get", **named(document_id, "ws_1"))
    result: dict[str, Any] = envelope["result"]
    return result


async def test_a_write_by_title_writes_that_page(db: Path) -> None:
    async with connect(db) as client:
        added = await call(
            client,
            "mnote.block.insert",
            **write(
                "Project plan", "k1", blocks=[{"type": "todo", "text": "Book the venue"}], position="end"
            ),
        )
        renamed = await call(client, "mnote.page.update_title", **write("project plan", "k2", title="Plan B"))
        fixed = await call(
            client,
            "mnote.page.edit_text",
            **write("Plan B", "k3", edits=[{"oldText": "Book", "newText": "Hire"}]),
        )
        page = await _page(client, "doc_1")
    assert added["ok"] and renamed["ok"] and fixed["ok"], (added, renamed, fixed)
    assert (
        added["audit"]["documentId"]
        == renamed["audit"]["documentId"]
        == fixed["audit"]["documentId"]
        == "doc_1"
    )
    assert page["title"] == "Plan B" and page["blocks"][-1]["text"] == "Hire the venue"


def with_page(tmp_path: Path, document_id: str, title: str) -> Path:
    """The test fixture, with one more page of ws_1 that every member may read."""
    return store_with_pages(
        tmp_path / "titles.db",
        FIXTURE,
        {
            "id": document_id,
            "title": title,
            "blocks": [{"id": f"{document_id}_p", "type": "paragraph", "text": "x"}],
        },
    )


@pytest.mark.parametrize("mode", MODES)
async def test_an_ambiguous_title_is_refused_with_the_candidates_and_nothing_is_written(
    tmp_path: Path, mode: str
) -> None:
    """Issue 35: never a guess. Two readable pages titled alike (in any case): the call names both and
    writes nothing, whether the workspace is given or not; each is still reached by its id."""
    db = with_page(tmp_path, "doc_copy", "PROJECT PLAN")
    before = dump(db)
    async with connect(db, mode) as client:
        for workspace in ("", "ws_1"):
            envelope = await call(
                client,
                "mnote.block.insert",
                **write(
                    "Project plan", f"k-{workspace}", workspace, blocks=[{"type": "paragraph", "text": "y"}]
                ),
            )
            assert not envelope["ok"] and envelope["audit"]["effect"] == "none"
            error = envelope["error"]
            assert error["code"] == "mnote_tool_invalid_argument" and "2 pages" in error["message"]
            assert error["details"]["pointer"] == "/documentId" and error["details"]["matches"] == 2
            assert sorted(c["documentId"] for c in error["details"]["candidates"]) == ["doc_1", "doc_copy"]
            assert all(
                set(c) == {"workspaceId", "documentId", "title"} for c in error["details"]["candidates"]
            )
            assert "documentId" in error["hint"]
        by_id = await call(client, "mnote.page.get", **named("doc_copy", "ws_1"))
    assert by_id["ok"], "an id still names one page"
    assert dump(db, audit=False) == "\n".join(
        line for line in before.splitlines() if not line.startswith('INSERT INTO "audit"')
    )


async def test_a_page_the_caller_may_not_read_is_never_found_named_or_counted(tmp_path: Path) -> None:
    secret = "SECRET-TITLE-7f3a"  # doc_secret's: only its owner may read it
    db = with_page(tmp_path, "doc_copy", secret)  # a page every member may read, titled alike
    async with connect(db) as client:
        found = await call(client, "mnote.page.get", **named(secret))
        stranger = await call(client, "mnote.page.get", **named("OTHER-SECRET-TITLE-c0de"))
    assert found["ok"] and found["result"]["documentId"] == "doc_copy", "the restricted one is no candidate"
    assert (stranger["error"]["code"], stranger["error"]["message"]) == (
        "mnote_tool_not_found",
        "page not found",
    )
    async with connect(db, actor="user_owner") as client:
        both = await call(client, "mnote.page.get", **named(secret))
    assert both["error"]["details"]["matches"] == 2, "its owner reads both"


async def test_no_such_page_or_title_is_not_found_as_before(db: Path) -> None:
    async with connect(db) as client:
        missing = await call(client, "mnote.page.get", **named("No such page", "ws_1"))
        anywhere = await call(client, "mnote.page.get", **named("No such page"))
        a_prefix = await call(client, "mnote.page.get", **named("Project"))
        elsewhere = await call(client, "mnote.page.get", **named("Project plan", "ws_other"))
    for envelope in (missing, anywhere, a_prefix):
        assert (envelope["error"]["code"], envelope["error"]["message"]) == (
            "mnote_tool_not_found",
            "page not found",
        )
    assert elsewhere["error"]["code"] == "mnote_tool_permission_denied", (
        "a workspace not the caller's is not looked past"
    )


async def test_a_token_limited_to_some_workspaces_finds_pages_there_only(db: Path) -> None:
    app = make_app(db)
    try:
        limited = Identity("user_owner", workspaces=frozenset({"ws_other"}))
        refused = await app.dispatcher.call("mnote.page.get", named("Project plan"), None, limited)
        mine = Identity("user_owner", workspaces=frozenset({"ws_1"}))
        found = await app.dispatcher.call("mnote.page.get", named("Project plan"), None, mine)
    finally:
        await app.kernel.aclose()
    error = refused["error"]
    assert error is not None and error["code"] == "mnote_tool_not_found"
    assert found["ok"] and found["audit"]["documentId"] == "doc_1"


class CountingKernel(StoreKernel):
    listings: ClassVar[list[PagesQuery]] = []

    async def list_pages(self, query: PagesQuery) -> list[PageRef]:
        CountingKernel.listings.append(query)
        return await super().list_pages(query)


async def test_a_call_by_id_looks_up_no_title(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tests.support.helpers.StoreKernel", CountingKernel)
    CountingKernel.listings = []
    async with connect(db) as client:
        by_id = await call(client, "mnote.page.get", **named("doc_1", "ws_1"))
        assert by_id["ok"] and CountingKernel.listings == []
        nothing = await call(client, "mnote.page.get", **named(" "))
        assert nothing["error"]["code"] == "mnote_tool_not_found" and CountingKernel.listings == [], (
            "an empty name lists no pages"
        )
        by_title = await call(client, "mnote.page.get", **named("Project plan", "ws_1"))
    assert by_title["ok"] and [query.named for query in CountingKernel.listings] == ["Project plan"]


def test_the_candidates_are_few() -> None:
    assert 2 <= MAX_CANDIDATES <= 10
