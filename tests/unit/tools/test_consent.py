"""Which writes ask first under `--confirm destructive` (`tools/consent.py`): each tool's declared rule,
through the in-process client, counting the questions a person is asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp.client.context import ClientRequestContext

from mnote_mcp.tools.catalog import ALL_TOOLS
from mnote_mcp.tools.consent import never
from tests.support.helpers import call, connect, write_args

pytestmark = pytest.mark.anyio

LIST = {
    "id": "list",
    "type": "bulleted_list",
    "text": "A list",
    "children": [{"id": "item_1", "type": "paragraph", "text": "under it"}],
}


class Person:
    def __init__(self) -> None:
        self.questions: list[str] = []

    async def __call__(
        self, ctx: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.questions.append(params.message)
        return types.ElicitResult(action="accept", content={})


async def _asked(db: Path, tool: str, actor: str = "user_editor", **arguments: Any) -> list[str]:
    """The questions one call of `tool` asked (it is accepted, so it must be written)."""
    person = Person()
    async with connect(db, elicitation_callback=person, actor=actor) as client:
        written = await call(client, tool, **write_args(f"{tool}-{len(str(arguments))}", **arguments))
    assert written["ok"], written["error"]
    return person.questions


async def _add_blocks(db: Path, *blocks: dict[str, Any]) -> None:
    async with connect(db, confirm="never") as client:
        assert (await call(client, "mnote.block.insert", **write_args("setup", blocks=list(blocks))))["ok"]


def test_only_the_declared_writes_have_a_rule() -> None:
    rules = {spec.name: spec.consent.__name__ for spec in ALL_TOOLS if spec.consent is not never}
    assert rules == {
        "mnote.page.save": "removes_blocks",
        "mnote.page.update_title": "renames_shared_page",
        "mnote.block.delete": "deletes_subtrees_or_many",
        "mnote.page.revert": "reverts",
    }
    assert all(spec.writes for spec in ALL_TOOLS if spec.consent is not never)


async def test_a_delete_asks_for_a_subtree_or_more_than_three_blocks(db: Path) -> None:
    await _add_blocks(
        db, LIST, *({"id": f"leaf_{n}", "type": "paragraph", "text": f"leaf {n}"} for n in range(5))
    )
    assert await _asked(db, "mnote.block.delete", blockIds=["leaf_0"]) == []
    assert await _asked(db, "mnote.block.delete", blockIds=["leaf_1", "leaf_2", "leaf_3"]) == []
    (subtree,) = await _asked(db, "mnote.block.delete", blockIds=["list"])
    assert "Deletes 2 block(s)." in subtree and "  - - A list" in subtree
    (many,) = await _asked(db, "mnote.block.delete", blockIds=["leaf_4", "heading_1", "p_1", "p_2"])
    assert "Deletes 4 block(s)." in many


async def test_a_section_delete_counts_the_section_as_deleted(db: Path) -> None:
    async with connect(db, confirm="never") as client:
        chapter = [
            {"id": "sec", "type": "heading", "text": "Chapter", "props": {"level": 1}},
            {"id": "sec_p", "type": "paragraph", "text": "in it"},
            {"id": "lone", "type": "heading", "text": "Alone", "props": {"level": 1}},
        ]
        added = await call(
            client, "mnote.block.insert", **write_args("setup", blocks=chapter, position="end")
        )
        assert added["ok"], added["error"]
    assert await _asked(db, "mnote.block.delete", blockIds=["lone"], section=True) == []
    (section,) = await _asked(db, "mnote.block.delete", blockIds=["sec"], section=True)
    assert "Deletes 2 block(s)." in section and "in it" in section


async def test_a_save_asks_only_when_it_deletes_blocks(db: Path) -> None:
    kept = [
        {"id": "heading_1", "type": "heading", "text": "Chapter one", "props": {"level": 1}},
        {"id": "p_1", "type": "paragraph", "text": "First paragraph, edited."},
        {"id": "p_2", "type": "paragraph", "text": "Second paragraph."},
        {"type": "paragraph", "text": "New."},
    ]
    assert await _asked(db, "mnote.page.save", content=kept) == [], "every block kept: nothing deleted"
    assert await _asked(db, "mnote.page.save", content=[{"type": "divider"}], mode="append") == []
    (question,) = await _asked(db, "mnote.page.save", content=kept[:2])
    # p_2, then "New." and the divider the two saves above added
    assert question.split("\n")[1] == "Deletes 3 block(s)."


async def test_every_revert_asks(db: Path) -> None:
    await _add_blocks(db, {"type": "divider"})
    (question,) = await _asked(db, "mnote.page.revert", toRevision=1)
    assert "Deletes 1 block(s), undoes the writes of revision(s) 2." in question


async def test_a_rename_asks_once_someone_else_wrote_to_the_page(db: Path) -> None:
    assert await _asked(db, "mnote.page.update_title", title="Mine alone") == [], "only the caller wrote here"
    await _add_blocks(db, {"type": "divider"})  # as user_editor
    (question,) = await _asked(db, "mnote.page.update_title", actor="user_owner", title="Renamed")
    assert "Renames it from “Mine alone” to “Renamed”." in question
    assert "Other people edit this page too." in question


async def test_the_writes_without_a_rule_never_ask(db: Path) -> None:
    assert await _asked(db, "mnote.block.insert", blocks=[{"type": "divider"}]) == []
    assert await _asked(db, "mnote.block.update", blockId="p_1", text="Changed.") == []
    assert await _asked(db, "mnote.block.move", blockId="p_2", position="start") == []
    assert await _asked(db, "mnote.page.update_options", options={"showToc": True}) == []
