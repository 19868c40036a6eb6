"""The kernel port's wire forms, which the HTTP and mnote-cli adapters relay: new fields round-trip,
old forms still parse, `to_wire` is what pydantic makes of the declaration, and the embedded kernel
answers `page_revisions` as the port says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mnote_mcp.kernel.local import LocalKernel
from mnote_mcp.kernel.port import (
    AuditQuery,
    AuthorizeQuery,
    Command,
    CommandName,
    CommandOutcome,
    Correlation,
    HistoryFilter,
    HistoryQuery,
    Kernel,
    PageKey,
    PageQuery,
    PageRef,
    RevisionsQuery,
    SearchQuery,
    Wire,
    revisions_from_wire,
    revisions_to_wire,
)
from mnote_mcp.kernel.scopes import Scope
from mnote_mcp.kernel.wireschema import adapter

pytestmark = pytest.mark.anyio
IDS = Correlation("s", "r", "c", "t")


def test_page_query_round_trips_through_plain_json() -> None:
    query = PageQuery("ws_1", "doc_1", "user_1", IDS, False, True, True, "markdown", ("a", "b"), 50, "cur")
    wire = json.loads(json.dumps(query.to_wire()))
    assert PageQuery.from_wire(wire) == query
    assert {
        "includeBody",
        "includeOptions",
        "includeBlocks",
        "format",
        "blockIds",
        "maxBlocks",
        "cursor",
    } <= set(wire)


def test_search_query_round_trips_through_plain_json() -> None:
    for query in (
        SearchQuery("user_1", IDS, "项目 plan*", "ws_1", ("ws_1", "ws_2"), 5, "cur"),
        SearchQuery("user_1", IDS),
    ):
        assert SearchQuery.from_wire(json.loads(json.dumps(query.to_wire()))) == query
    bare = {"actorId": "user_1", "correlation": IDS.to_wire()}
    assert SearchQuery.from_wire(bare) == SearchQuery("user_1", IDS), "every other field has a default"


def test_the_old_page_query_form_still_parses_with_the_contract_defaults() -> None:
    old = {"workspaceId": "ws_1", "documentId": "doc_1", "actorId": "u", "correlation": IDS.to_wire()}
    query = PageQuery.from_wire(old)
    assert (query.format, query.block_ids, query.max_blocks, query.cursor) == ("blocks", None, None, None)
    assert query.include_body and query.include_options and query.include_blocks


@pytest.mark.parametrize("name", [c for c in CommandName if c.value.startswith("page.block.")])
def test_block_commands_travel_as_commands(name: CommandName) -> None:
    command = Command(
        name, "ws_1", "doc_1", "u", IDS, "k", True, {"blockId": "p_1", "text": "x"}, base_revision=3
    )
    assert Command.from_wire(json.loads(json.dumps(command.to_wire()))) == command


def test_revisions_travel_as_a_list() -> None:
    revisions = {PageKey("ws_1", "doc_2"): 4, PageKey("ws_1", "doc_1"): 7}
    wire = json.loads(json.dumps(revisions_to_wire(revisions)))
    assert wire[0] == {"workspaceId": "ws_1", "documentId": "doc_1", "revision": 7}
    assert revisions_from_wire(wire) == revisions
    assert PageKey.from_wire(PageKey("a", "b").to_wire()) == PageKey("a", "b")


async def test_page_revisions_answers_only_readable_pages(db: Path) -> None:
    kernel = LocalKernel.open(db)
    try:
        assert isinstance(kernel, Kernel)
        pages = [PageKey("ws_1", "doc_1"), PageKey("ws_1", "doc_secret"), PageKey("ws_1", "nope")]
        assert await kernel.page_revisions("user_editor", pages) == {PageKey("ws_1", "doc_1"): 1}
        owner = await kernel.page_revisions("user_owner", pages)
        assert set(owner) == {PageKey("ws_1", "doc_1"), PageKey("ws_1", "doc_secret")}
        assert await kernel.page_revisions("user_stranger", pages) == {}
        assert await kernel.page_revisions("", pages) == {}
    finally:
        await kernel.aclose()


WIRE_VALUES: list[Wire] = [
    PageQuery("ws_1", "doc_1", "user_1", IDS, False, True, True, "markdown", ("a", "b"), 50, "cur"),
    HistoryQuery("ws_1", "doc_1", "u", IDS, HistoryFilter(run_id="r", actor_id="a"), 3, 7, "cur"),
    SearchQuery("user_1", IDS, "项目", "ws_1", ("ws_1",), 5, "cur"),
    Command("page.revert", "ws_1", "doc_1", "u", IDS, "k", False, {"toRevision": 2}, base_revision=4),
    CommandOutcome("page.body.save", False, "c_1", 2, True, [{"op": "append", "blocks": 1}], [], True),
    PageRef("ws_1", "doc_1", "T", 3),
    AuthorizeQuery("u", "ws_1", "doc_1", Scope.ARTIFACT_WRITE),
    RevisionsQuery("u", (PageKey("ws_1", "doc_1"),)),
    AuditQuery("trace_1", None, 7),
]


@pytest.mark.parametrize("value", WIRE_VALUES, ids=lambda value: type(value).__name__)
def test_a_wire_form_is_what_pydantic_makes_of_its_declaration(value: Wire) -> None:
    """`to_wire` and `from_wire` walk the fields themselves (the embedded kernel's writes call one, and
    neither may import pydantic), so they are held here to pydantic's own reading of the same
    declaration: its dump, key order included, and its validation of the JSON."""
    wire = value.to_wire()
    dumped = adapter(type(value)).dump_python(value, mode="json", by_alias=True)
    assert json.dumps(wire) == json.dumps(dumped)
    sent = json.loads(json.dumps(wire))
    assert type(value).from_wire(sent) == adapter(type(value)).validate_python(sent) == value


def test_null_still_means_the_default_where_older_peers_sent_it() -> None:
    bare = {"workspaceId": "ws_1", "documentId": "doc_1", "actorId": "u", "correlation": IDS.to_wire()}
    for read in (HistoryQuery.from_wire, adapter(HistoryQuery).validate_python):
        history = read({**bare, "filter": None, "limit": None})
        assert (history.filter, history.limit) == (HistoryFilter(), 20)
    page = {**bare, "format": None}
    assert PageQuery.from_wire(page).format == adapter(PageQuery).validate_python(page).format == "blocks"
    search = {"actorId": "u", "correlation": IDS.to_wire(), "limit": None}
    assert SearchQuery.from_wire(search).limit == adapter(SearchQuery).validate_python(search).limit == 10
