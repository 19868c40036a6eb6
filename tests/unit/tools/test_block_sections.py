"""Sections and several blocks in one call (`section` and `blockIds` on mnote.block.move and
mnote.block.delete), through the real MCP client in both protocol eras: a chapter moved to the top,
several blocks moved in the order given, a section deleted, nested heading levels, a heading at the
end of the page, the dry run and a stale revision, each with the page order read back; on SQLite and
on PostgreSQL (the kernel finds the section in the transaction)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.support.helpers import FIXTURE, MODES, call, connect, dump, page_args, write_args
from tests.support.postgres import STORES, store_fixture
from tests.unit.tools.test_block import ids

pytestmark = pytest.mark.anyio


@pytest.fixture(params=STORES)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """The test workspace on each store (PostgreSQL cases are marked `postgres`)."""
    return store_fixture(request, tmp_path, FIXTURE)


def heading(block_id: str, level: int) -> dict[str, Any]:
    return {"id": block_id, "type": "heading", "text": block_id, "props": {"level": level}}


def para(block_id: str, **extra: Any) -> dict[str, Any]:
    return {"id": block_id, "type": "paragraph", "text": block_id, **extra}


# intro; chapter a (h1) with two sub-chapters (h2, an h3 inside the first); chapter b (h1) with a
# list (a child inside) and, last on the page, an h2.
PAGE: list[dict[str, Any]] = [
    para("intro"),
    heading("a", 1),
    para("a_p"),
    heading("a1", 2),
    para("a1_p"),
    heading("a1x", 3),
    para("a1x_p"),
    heading("a2", 2),
    para("a2_p"),
    heading("b", 1),
    {
        "id": "b_list",
        "type": "bulleted_list",
        "text": "list",
        "children": [para("b_item")],
    },
    heading("last", 2),
]


async def seed(client: Client) -> int:
    envelope = await call(client, "mnote.page.save", **write_args("seed_sections", content=PAGE))
    assert envelope["ok"], envelope["error"]
    return int(envelope["result"]["revision"])


async def order(client: Client) -> list[str]:
    return ids((await call(client, "mnote.page.get", **page_args()))["result"]["blocks"])


@pytest.mark.parametrize("mode", MODES)
async def test_a_section_moves_to_the_top_in_one_call(db: Path | str, mode: str) -> None:
    async with connect(db, mode) as client:
        revision = await seed(client)
        moved = await call(client, "mnote.block.move", **write_args("k", blockId="b", section=True))
        after = await order(client)
    result = moved["result"]
    assert moved["ok"] and result["revision"] == revision + 1
    assert result["blockIds"] == ["b", "b_list", "last"], "the h1 with the h2 under it, to the page's end"
    assert [op["after"] for op in result["diff"]] == [None, "b", "b_list"]
    assert after == [
        "b",
        "b_list",
        "b_item",
        "last",
        "intro",
        "a",
        "a_p",
        "a1",
        "a1_p",
        "a1x",
        "a1x_p",
        "a2",
        "a2_p",
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_nested_levels_end_at_the_same_or_a_higher_heading(db: Path | str, mode: str) -> None:
    async with connect(db, mode) as client:
        await seed(client)
        sub = await call(
            client, "mnote.block.move", **write_args("k1", blockId="a1", section=True, position="end")
        )
        after = await order(client)
        chapter = await call(
            client, "mnote.block.move", **write_args("k2", blockId="a", section=True, afterBlockId="last")
        )
        final = await order(client)
    assert sub["result"]["blockIds"] == ["a1", "a1_p", "a1x", "a1x_p"], "an h2 takes its h3, stops at h2"
    assert after == [
        "intro",
        "a",
        "a_p",
        "a2",
        "a2_p",
        "b",
        "b_list",
        "b_item",
        "last",
        *sub["result"]["blockIds"],
    ]
    # chapter a is now a, a_p, a2, a2_p (the h1 ends at b); the moved h2 at the end stays put
    assert chapter["result"]["blockIds"] == ["a", "a_p", "a2", "a2_p"]
    assert final == [
        "intro",
        "b",
        "b_list",
        "b_item",
        "last",
        "a",
        "a_p",
        "a2",
        "a2_p",
        "a1",
        "a1_p",
        "a1x",
        "a1x_p",
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_several_blocks_move_in_the_order_given(db: Path | str, mode: str) -> None:
    async with connect(db, mode) as client:
        revision = await seed(client)
        moved = await call(
            client,
            "mnote.block.move",
            **write_args(
                "k", blockId="a2_p", blockIds=["intro", "a_p"], afterBlockId="b_item", parentId="b_list"
            ),
        )
        after = await order(client)
        again = await call(
            client,
            "mnote.block.move",
            **write_args("k2", blockId="a2_p", blockIds=["intro", "a_p"], afterBlockId="b_item"),
        )
    assert moved["result"]["blockIds"] == ["a2_p", "intro", "a_p"]
    assert [(op["blockId"], op["after"], op["parentId"]) for op in moved["result"]["diff"]] == [
        ("a2_p", "b_item", "b_list"),
        ("intro", "a2_p", "b_list"),
        ("a_p", "intro", "b_list"),
    ]
    assert after[after.index("b_list") :] == ["b_list", "b_item", "a2_p", "intro", "a_p", "last"]
    assert moved["result"]["revision"] == revision + 1, "one call, one revision"
    assert again["result"]["changed"] is False, "already there, in that order: nothing to do"


@pytest.mark.parametrize("mode", MODES)
async def test_a_section_delete_takes_the_section(db: Path | str, mode: str) -> None:
    async with connect(db, mode, confirm="never") as client:
        await seed(client)
        deleted = await call(client, "mnote.block.delete", **write_args("k", blockIds=["a1"], section=True))
        after = await order(client)
    assert deleted["result"]["blockIds"] == ["a1", "a1_p", "a1x", "a1x_p"]
    assert after == ["intro", "a", "a_p", "a2", "a2_p", "b", "b_list", "b_item", "last"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_heading_at_the_end_of_the_page_is_its_own_section(db: Path | str, mode: str) -> None:
    async with connect(db, mode, confirm="never") as client:
        await seed(client)
        moved = await call(client, "mnote.block.move", **write_args("k1", blockId="last", section=True))
        deleted = await call(client, "mnote.block.delete", **write_args("k2", blockIds=["b"], section=True))
        after = await order(client)
    assert moved["result"]["blockIds"] == ["last"]
    assert deleted["result"]["blockIds"] == ["b", "b_list", "b_item"], "the section ends at the page's end"
    assert after[0] == "last" and "b" not in after


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("mnote.block.move", {"blockId": "a1", "section": True}),
        ("mnote.block.delete", {"blockIds": ["a1"], "section": True}),
    ],
)
async def test_a_section_dry_run_shows_the_plan_and_writes_nothing(
    db: Path | str, mode: str, tool: str, args: dict[str, Any]
) -> None:
    async with connect(db, mode, confirm="never") as client:
        revision = await seed(client)
        before = dump(db)
        plan = await call(client, tool, **write_args("k_dry", dry_run=True, **args))
        assert dump(db) == before
        real = await call(client, tool, **write_args("k_dry", **args))
    result = plan["result"]
    assert result["dryRun"] is True and result["currentRevision"] == revision
    assert result["blockIds"] == ["a1", "a1_p", "a1x", "a1x_p"] == real["result"]["blockIds"]
    assert result["diff"] == real["result"]["diff"]
    assert result["textDiff"].startswith("--- a/page")


@pytest.mark.parametrize("mode", MODES)
async def test_a_section_changed_since_the_revision_read_is_a_conflict(db: Path | str, mode: str) -> None:
    async with connect(db, mode, confirm="never") as client:
        revision = await seed(client)
        grown = await call(
            client, "mnote.block.insert", **write_args("k0", blocks=[para("new")], afterBlockId="a1x_p")
        )
        before = dump(db)
        stale = await call(
            client,
            "mnote.block.move",
            **write_args("k1", blockId="a1", section=True, baseRevision=revision),
        )
        assert dump(db) == before
        elsewhere = await call(
            client,
            "mnote.block.move",
            **write_args("k2", blockId="b", section=True, baseRevision=revision),
        )
    assert grown["ok"]
    assert stale["error"]["code"] == "mnote_tool_conflict"
    assert "new" in stale["error"]["details"]["blockIds"], "a block added to the section since"
    assert elsewhere["ok"] and elsewhere["result"]["rebasedFrom"] == revision, "another section: rebased"


@pytest.mark.parametrize(
    ("args", "pointer"),
    [
        ({"blockId": "a", "blockIds": ["a"]}, "/blockIds/0"),
        ({"blockId": "b_list", "blockIds": ["b_item"]}, "/blockIds/0"),
        ({"blockId": "a", "section": True, "afterBlockId": "a1x_p"}, "/afterBlockId"),
        ({"blockId": "a", "blockIds": ["nope"]}, "/blockIds/0"),
    ],
)
async def test_moves_that_cannot_be_made_are_refused(
    db: Path | str, args: dict[str, Any], pointer: str
) -> None:
    async with connect(db) as client:
        await seed(client)
        before = dump(db)
        refused = await call(client, "mnote.block.move", **write_args("k", **args))
    assert refused["ok"] is False and refused["error"]["details"]["pointer"] == pointer
    assert dump(db) == before
