"""The block tools through the real MCP client, in both protocol eras: each edit, its dry run, a stale
revision, an idempotent retry, a viewer's refusal, and every refusal case, with the store unchanged
whenever the call did not write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mnote_mcp.kernel.sqlite.opening import open_store
from tests.support.helpers import MODES, call, connect, dump, page_args, write_args

pytestmark = pytest.mark.anyio

TREE: list[dict[str, Any]] = [
    {"id": "h", "type": "heading", "text": "Title", "props": {"level": 1}},
    {
        "id": "l1",
        "type": "bulleted_list",
        "text": "one",
        "children": [
            {"id": "l1a", "type": "paragraph", "text": "child a"},
            {
                "id": "l1b",
                "type": "todo",
                "text": "child b",
                "props": {"checked": False},
                "children": [{"id": "l1b1", "type": "paragraph", "text": "grandchild"}],
            },
        ],
    },
    {"id": "l2", "type": "numbered_list", "text": "two"},
    {"id": "p", "type": "paragraph", "text": "end"},
]
NEW = [{"type": "paragraph", "text": "new"}]

# One real change per tool, and the ids its result must name.
EDITS: dict[str, tuple[dict[str, Any], list[str] | None]] = {
    "mnote.block.insert": ({"blocks": NEW, "afterBlockId": "l1a"}, None),
    "mnote.block.update": ({"blockId": "p", "text": "changed"}, ["p"]),
    "mnote.block.delete": ({"blockIds": ["l1b"]}, ["l1b", "l1b1"]),
    "mnote.block.move": ({"blockId": "p", "afterBlockId": "h"}, ["p"]),
}


async def seed_tree(client: Client) -> int:
    """Give doc_1 the TREE body; returns the revision it is at."""
    envelope = await call(client, "mnote.page.save", **write_args("seed_tree", content=TREE))
    assert envelope["ok"], envelope["error"]
    return int(envelope["result"]["revision"])


async def blocks_of(client: Client) -> list[dict[str, Any]]:
    envelope = await call(client, "mnote.page.get", **page_args())
    return list(envelope["result"]["blocks"])


def ids(blocks: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for block in blocks:
        out.append(block["id"])
        out.extend(ids(block.get("children", [])))
    return out


@pytest.mark.parametrize("mode", MODES)
async def test_insert_after_a_nested_block(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        revision = await seed_tree(client)
        envelope = await call(
            client, "mnote.block.insert", **write_args("k", blocks=NEW * 2, afterBlockId="l1a")
        )
        blocks = await blocks_of(client)
    result = envelope["result"]
    assert envelope["ok"] and result["commandName"] == "page.block.insert"
    assert result["revision"] == revision + 1 and result["changed"] is True
    children = [child["id"] for child in blocks[1]["children"]]
    assert children == ["l1a", *result["blockIds"], "l1b"], "inserted right after the anchor, in order"
    assert [op["op"] for op in result["diff"]] == ["insert", "insert"]
    assert [op["blockId"] for op in result["diff"]] == result["blockIds"]
    assert all(op["parentId"] == "l1" for op in result["diff"])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("placement", "where"),
    [
        ({}, (None, 0)),
        ({"position": "end"}, (None, 4)),
        ({"parentId": "l1"}, ("l1", 0)),
        ({"parentId": "l2", "position": "end"}, ("l2", 0)),
        ({"parentId": "l1", "afterBlockId": "l1b"}, ("l1", 2)),
    ],
)
async def test_insert_at_the_start_the_end_or_under_a_parent(
    db: Path, mode: str, placement: dict[str, Any], where: tuple[str | None, int]
) -> None:
    async with connect(db, mode) as client:
        await seed_tree(client)
        envelope = await call(client, "mnote.block.insert", **write_args("k", blocks=NEW, **placement))
        blocks = await blocks_of(client)
    parent, index = where
    siblings = blocks if parent is None else next(b for b in blocks if b["id"] == parent)["children"]
    assert siblings[index]["id"] == envelope["result"]["blockIds"][0]
    assert siblings[index]["text"] == "new"


@pytest.mark.parametrize("mode", MODES)
async def test_update_changes_only_what_is_given(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        await seed_tree(client)
        text = await call(client, "mnote.block.update", **write_args("k1", blockId="l1b", text="done"))
        props = await call(
            client, "mnote.block.update", **write_args("k2", blockId="l1b", props={"checked": True})
        )
        retype = await call(client, "mnote.block.update", **write_args("k3", blockId="h", type="paragraph"))
        blocks = await blocks_of(client)
    assert text["result"]["diff"] == [{"op": "update", "blockId": "l1b", "fields": ["text"]}]
    assert props["result"]["diff"] == [{"op": "update", "blockId": "l1b", "fields": ["props"]}]
    assert retype["result"]["diff"] == [{"op": "update", "blockId": "h", "fields": ["type", "props"]}]
    todo = blocks[1]["children"][1]
    assert todo["text"] == "done" and todo["props"] == {"checked": True}
    assert todo["children"] == TREE[1]["children"][1]["children"], "children stay"
    assert blocks[0] == {"id": "h", "type": "paragraph", "text": "Title"}, "a heading's level goes with it"


@pytest.mark.parametrize("mode", MODES)
async def test_delete_takes_children_along(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        await seed_tree(client)
        envelope = await call(client, "mnote.block.delete", **write_args("k", blockIds=["l1", "p"]))
        blocks = await blocks_of(client)
    assert envelope["result"]["blockIds"] == ["l1", "l1a", "l1b", "l1b1", "p"]
    assert {op["blockId"] for op in envelope["result"]["diff"]} == set(envelope["result"]["blockIds"])
    assert ids(blocks) == ["h", "l2"]


@pytest.mark.parametrize("mode", MODES)
async def test_move_carries_the_subtree(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        await seed_tree(client)
        into = await call(
            client, "mnote.block.move", **write_args("k1", blockId="l1b", parentId="l2", position="end")
        )
        top = await call(client, "mnote.block.move", **write_args("k2", blockId="p"))
        blocks = await blocks_of(client)
    assert into["result"]["diff"] == [{"op": "move", "blockId": "l1b", "after": None, "parentId": "l2"}]
    assert top["result"]["diff"] == [{"op": "move", "blockId": "p", "after": None}]
    assert ids(blocks) == ["p", "h", "l1", "l1a", "l2", "l1b", "l1b1"]


@pytest.mark.parametrize("mode", MODES)
async def test_an_edit_that_changes_nothing_says_so(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        revision = await seed_tree(client)
        same_text = await call(client, "mnote.block.update", **write_args("k1", blockId="p", text="end"))
        same_place = await call(
            client, "mnote.block.move", **write_args("k2", blockId="l2", afterBlockId="l1")
        )
        assert (await call(client, "mnote.page.get", **page_args()))["result"]["revision"] == revision
    for envelope in (same_text, same_place):
        assert envelope["ok"]
        result = envelope["result"]
        assert (result["changed"], result["diff"], result["blockIds"]) == (False, [], [])
        assert result["revision"] == revision


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool", sorted(EDITS))
async def test_dry_run_writes_nothing_and_names_the_blocks(db: Path, mode: str, tool: str) -> None:
    args, named = EDITS[tool]
    async with connect(db, mode) as client:
        revision = await seed_tree(client)
        before = dump(db)
        plan = await call(client, tool, **write_args("k_dry", dry_run=True, **args))
        assert dump(db) == before
        real = await call(client, tool, **write_args("k_dry", **args))
    assert plan["audit"]["effect"] == "dry_run" and plan["audit"]["commandId"] is None
    result = plan["result"]
    assert result["dryRun"] is True and result["currentRevision"] == revision and result["changed"] is True
    assert result["blockIds"] == real["result"]["blockIds"]
    if named is not None:
        assert result["blockIds"] == named
    assert {op["blockId"] for op in result["diff"]} <= set(result["blockIds"])
    assert result["diff"] == real["result"]["diff"], "a dry run shows the real call's diff"
    assert result["textDiff"].startswith("--- a/page")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool", sorted(EDITS))
async def test_stale_base_revision_is_a_conflict(db: Path, mode: str, tool: str) -> None:
    args, _ = EDITS[tool]
    async with connect(db, mode) as client:
        revision = await seed_tree(client)
        before = dump(db)
        stale = await call(client, tool, **write_args("k", baseRevision=revision - 1, **args))
        assert dump(db) == before
        fresh = await call(client, tool, **write_args("k", baseRevision=revision, **args))
    assert stale["error"]["code"] == "mnote_tool_conflict"
    assert stale["error"]["details"]["currentRevision"] == revision
    assert f"baseRevision={revision}" in stale["error"]["hint"]
    assert fresh["ok"] and fresh["result"]["revision"] == revision + 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool", sorted(EDITS))
async def test_retry_replays_and_other_arguments_conflict(db: Path, mode: str, tool: str) -> None:
    args, _ = EDITS[tool]
    async with connect(db, mode) as client:
        await seed_tree(client)
        first = await call(client, tool, **write_args("k_retry", **args))
        before = dump(db, audit=False)
        retry = await call(client, tool, **{**write_args("k_retry", **args), "toolCallId": "call_retry"})
        other = await call(client, tool, **write_args("k_retry", baseRevision=0, **args))
        assert dump(db, audit=False) == before
    assert retry["result"]["idempotentReplay"] is True
    assert retry["audit"]["commandId"] == first["audit"]["commandId"]
    assert retry["result"]["revision"] == first["result"]["revision"]
    assert retry["result"]["blockIds"] == first["result"]["blockIds"]
    assert other["error"]["code"] == "mnote_tool_idempotency_conflict"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool", sorted(EDITS))
async def test_a_viewer_may_not_edit_blocks(db: Path, mode: str, tool: str) -> None:
    args, _ = EDITS[tool]
    async with connect(db, mode) as client:
        await seed_tree(client)
    before = dump(db)
    async with connect(db, mode, actor="user_viewer") as viewer:
        envelope = await call(viewer, tool, **write_args("k", **args))
    assert envelope["error"]["code"] == "mnote_tool_permission_denied"
    assert envelope["error"]["message"] == "no page write permission"
    assert dump(db) == before


@pytest.mark.parametrize("tool", sorted(EDITS))
async def test_each_edit_leaves_an_audit_record(db: Path, tool: str) -> None:
    args, _ = EDITS[tool]
    async with connect(db) as client:
        revision = await seed_tree(client)
        envelope = await call(client, tool, **write_args("k_audit", traceId="trace_audit", **args))
    store = open_store(db)
    try:
        (record,) = store.audit_trail(trace_id="trace_audit")
    finally:
        store.close()
    command = tool.replace("mnote.block.", "page.block.")
    assert record["commandName"] == command == envelope["result"]["commandName"]
    assert record["commandId"] == envelope["audit"]["commandId"]
    assert record["commandId"].startswith(command.replace(".", "_") + "_trace_audit_")
    assert (record["revisionBefore"], record["revisionAfter"]) == (revision, revision + 1)
    assert record["idempotencyKey"] == "k_audit" and record["outcome"] == "applied"


# (tool, arguments, error code, JSON pointer in details)
REFUSALS: dict[str, tuple[str, dict[str, Any], str, str]] = {
    "update a missing block": (
        "mnote.block.update",
        {"blockId": "nope", "text": "x"},
        "not_found",
        "/blockId",
    ),
    "delete a missing block": (
        "mnote.block.delete",
        {"blockIds": ["l1", "nope"]},
        "not_found",
        "/blockIds/1",
    ),
    "move a missing block": ("mnote.block.move", {"blockId": "nope"}, "not_found", "/blockId"),
    "insert after a missing block": (
        "mnote.block.insert",
        {"blocks": NEW, "afterBlockId": "nope"},
        "not_found",
        "/afterBlockId",
    ),
    "move under a missing parent": (
        "mnote.block.move",
        {"blockId": "p", "parentId": "nope"},
        "not_found",
        "/parentId",
    ),
    "move after a block inside itself": (
        "mnote.block.move",
        {"blockId": "l1", "afterBlockId": "l1b1"},
        "invalid_argument",
        "/afterBlockId",
    ),
    "move after itself": (
        "mnote.block.move",
        {"blockId": "l1", "afterBlockId": "l1"},
        "invalid_argument",
        "/afterBlockId",
    ),
    "move under its own child": (
        "mnote.block.move",
        {"blockId": "l1", "parentId": "l1b"},
        "invalid_argument",
        "/parentId",
    ),
    "update with nothing to change": ("mnote.block.update", {"blockId": "p"}, "invalid_argument", "/text"),
    "update with empty props only": (
        "mnote.block.update",
        {"blockId": "p", "props": {}},
        "invalid_argument",
        "/props",
    ),
    "delete zero blocks": ("mnote.block.delete", {"blockIds": []}, "invalid_argument", "/blockIds"),
    "delete a block listed twice": (
        "mnote.block.delete",
        {"blockIds": ["p", "p"]},
        "invalid_argument",
        "/blockIds/1",
    ),
    "insert zero blocks": ("mnote.block.insert", {"blocks": []}, "invalid_argument", "/blocks"),
    "anchor that is not a child of the parent": (
        "mnote.block.insert",
        {"blocks": NEW, "afterBlockId": "h", "parentId": "l1"},
        "invalid_argument",
        "/afterBlockId",
    ),
    "insert under a paragraph": (
        "mnote.block.insert",
        {"blocks": NEW, "parentId": "p"},
        "invalid_argument",
        "/parentId",
    ),
    "move under a heading": (
        "mnote.block.move",
        {"blockId": "p", "parentId": "h"},
        "invalid_argument",
        "/parentId",
    ),
    "children under a type without any": (
        "mnote.block.insert",
        {"blocks": [{"type": "quote", "text": "q", "children": NEW}]},
        "invalid_argument",
        "/blocks/0/children",
    ),
    "retype a block with children to one without": (
        "mnote.block.update",
        {"blockId": "l1", "type": "quote"},
        "invalid_argument",
        "/type",
    ),
    "a prop the type does not have": (
        "mnote.block.update",
        {"blockId": "p", "props": {"level": 2}},
        "invalid_argument",
        "/props/level",
    ),
    "text on a divider": (
        "mnote.block.update",
        {"blockId": "p", "type": "divider", "text": "x"},
        "invalid_argument",
        "/text",
    ),
    "insert an id already on the page": (
        "mnote.block.insert",
        {"blocks": [{"id": "l1a", "type": "paragraph"}]},
        "invalid_argument",
        "/blocks/0/id",
    ),
    "a malformed block id": (
        "mnote.block.update",
        {"blockId": "no spaces", "text": "x"},
        "invalid_argument",
        "/blockId",
    ),
    # Python's `$` also matches before a final newline: "p\n" once passed for the block "p"'s form
    "insert a block id ending in a newline": (
        "mnote.block.insert",
        {"blocks": [{"id": "evil\n", "type": "paragraph", "text": "x"}]},
        "invalid_argument",
        "/blocks/0/id",
    ),
    "update a block id ending in a newline": (
        "mnote.block.update",
        {"blockId": "p\n", "text": "x"},
        "invalid_argument",
        "/blockId",
    ),
    "delete a block id ending in a newline": (
        "mnote.block.delete",
        {"blockIds": ["p\n"]},
        "invalid_argument",
        "/blockIds/0",
    ),
    "move after a block id ending in a newline": (
        "mnote.block.move",
        {"blockId": "p", "afterBlockId": "h\n"},
        "invalid_argument",
        "/afterBlockId",
    ),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(REFUSALS))
async def test_refusals_are_clear_and_write_nothing(db: Path, mode: str, case: str) -> None:
    tool, args, code, pointer = REFUSALS[case]
    async with connect(db, mode) as client:
        await seed_tree(client)
        before = dump(db)
        envelope = await call(client, tool, **write_args("k", **args))
        plan = await call(client, tool, **write_args("k", dry_run=True, **args))
        assert dump(db) == before
    for refused in (envelope, plan):
        assert refused["ok"] is False and refused["result"] is None
        assert refused["error"]["code"] == f"mnote_tool_{code}", refused["error"]
        assert refused["error"]["details"]["pointer"] == pointer, refused["error"]
    if code == "not_found":
        assert "nope" in envelope["error"]["message"]


async def test_nesting_stops_at_the_depth_limit(db: Path) -> None:
    chain: dict[str, Any] = {"id": "d8", "type": "bulleted_list", "text": "8"}
    for level in range(7, 0, -1):
        chain = {"id": f"d{level}", "type": "bulleted_list", "text": str(level), "children": [chain]}
    async with connect(db) as client:
        await call(
            client, "mnote.page.save", **write_args("deep", content=[chain, {"id": "x", "type": "todo"}])
        )
        before = dump(db)
        too_deep = await call(client, "mnote.block.insert", **write_args("k1", blocks=NEW, parentId="d8"))
        moved = await call(client, "mnote.block.move", **write_args("k2", blockId="x", parentId="d8"))
        assert dump(db) == before
        fits = await call(client, "mnote.block.insert", **write_args("k3", blocks=NEW, parentId="d7"))
    assert too_deep["error"]["details"]["pointer"] == "/blocks"
    assert moved["error"]["details"]["pointer"] == "/blockId"
    assert fits["ok"], fits["error"]


async def test_dry_run_names_the_ids_a_real_insert_creates(db: Path) -> None:
    async with connect(db) as client:
        plan = await call(client, "mnote.block.insert", **write_args("k", dry_run=True, blocks=NEW * 3))
        real = await call(client, "mnote.block.insert", **write_args("k", blocks=NEW * 3))
        blocks = await blocks_of(client)
    assert plan["result"]["blockIds"] == real["result"]["blockIds"] == ids(blocks)[:3]
    assert len(set(real["result"]["blockIds"])) == 3
