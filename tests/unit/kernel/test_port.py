"""The kernel port's wire forms, which the HTTP and mnote-cli adapters relay: new fields round-trip,
old forms still parse, and the embedded kernel answers `page_revisions` as the port says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mnote_mcp.kernel.port import (
    Command,
    CommandName,
    Correlation,
    Kernel,
    PageKey,
    PageQuery,
    SearchQuery,
    revisions_from_wire,
    revisions_to_wire,
)
from mnote_mcp.kernel.sqlite.opening import open_kernel

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
    command = Command(name, "ws_1", "doc_1", "u", IDS, "k", True, {"blockId": "p_1", "text": "x"}, 3)
    assert Command.from_wire(json.loads(json.dumps(command.to_wire()))) == command


def test_revisions_travel_as_a_list() -> None:
    revisions = {PageKey("ws_1", "doc_2"): 4, PageKey("ws_1", "doc_1"): 7}
    wire = json.loads(json.dumps(revisions_to_wire(revisions)))
    assert wire[0] == {"workspaceId": "ws_1", "documentId": "doc_1", "revision": 7}
    assert revisions_from_wire(wire) == revisions
    assert PageKey.from_wire(PageKey("a", "b").to_wire()) == PageKey("a", "b")


async def test_page_revisions_answers_only_readable_pages(db: Path) -> None:
    kernel = open_kernel(db)
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
