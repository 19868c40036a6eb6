"""`mnote.page.get` beyond the contract's defaults: subsets by id, Markdown, and reading a long page in
pieces with maxBlocks/cursor, no block lost or repeated, and a cursor that refuses to outlive its
revision. Without the new arguments the answer is the contract's, unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mnote_mcp.kernel.markdown import parse_markdown
from tests.support.helpers import MODES, call, connect, page_args, write_args
from tests.unit.tools.test_block import TREE, ids, seed_tree

pytestmark = pytest.mark.anyio
BIG = 10_000


def big_body() -> list[dict[str, Any]]:
    """10,000 blocks: mostly paragraphs, with nested lists sprinkled in (a top-level list of 1 + 4)."""
    body: list[dict[str, Any]] = []
    count = 0
    while count < BIG:
        if count % 50 == 0 and BIG - count >= 5:
            children = [{"id": f"c{count}_{i}", "type": "paragraph", "text": f"child {i}"} for i in range(4)]
            body.append(
                {"id": f"b{count}", "type": "bulleted_list", "text": f"list {count}", "children": children}
            )
            count += 5
        else:
            body.append({"id": f"b{count}", "type": "paragraph", "text": f"paragraph {count}"})
            count += 1
    return body


async def read_in_pieces(client: Client, max_blocks: int, **extra: Any) -> list[dict[str, Any]]:
    pieces: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        args = page_args(maxBlocks=max_blocks, **extra, **({"cursor": cursor} if cursor else {}))
        envelope = await call(client, "mnote.page.get", **args)
        assert envelope["ok"], envelope["error"]
        pieces.append(envelope["result"])
        cursor = envelope["result"].get("nextCursor")
        if cursor is None:
            return pieces


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
async def test_a_10000_block_page_reads_in_pieces_with_nothing_lost_or_repeated(db: Path, mode: str) -> None:
    body = big_body()
    # The whole page in one answer needs a budget larger than the default (test_budget.py
    # covers the default: a long page read comes in pieces by itself).
    async with connect(db, mode, max_result_chars=10**9) as client:
        saved = await call(client, "mnote.page.save", **write_args("big", content=body))
        assert saved["ok"], saved["error"]
        whole = (await call(client, "mnote.page.get", **page_args()))["result"]["blocks"]
        pieces = await read_in_pieces(client, 512)
        markdown = await read_in_pieces(client, 2_000, format="markdown", includeOptions=False)
    assert len(ids(whole)) == BIG
    got = [block for piece in pieces for block in piece["blocks"]]
    assert ids(got) == ids(whole), "every block once, in order"
    assert got == whole
    assert len(pieces) >= BIG // 512
    for piece in pieces:
        assert len(ids(piece["blocks"])) <= 512
        assert piece["revision"] == saved["result"]["revision"]
    assert [block for piece in markdown for block in parse_markdown(piece["markdown"])] == whole
    assert all("pageOptions" not in piece for piece in markdown)


async def test_a_piece_holds_whole_top_level_blocks(db: Path) -> None:
    async with connect(db) as client:
        await seed_tree(client)
        pieces = await read_in_pieces(client, 2)
    # h (1 block), then l1 with its 3 descendants (4 blocks: more than 2, but never split), then l2 + p.
    assert [[block["id"] for block in piece["blocks"]] for piece in pieces] == [["h"], ["l1"], ["l2", "p"]]
    assert pieces[1]["blocks"][0] == TREE[1]


@pytest.mark.parametrize("mode", MODES)
async def test_block_ids_select_blocks_with_their_children(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        await seed_tree(client)
        subset = await call(client, "mnote.page.get", **page_args(blockIds=["p", "l1b", "l1b1"]))
        missing = await call(client, "mnote.page.get", **page_args(blockIds=["p", "nope"]))
        empty = await call(client, "mnote.page.get", **page_args(blockIds=[]))
        whole = await call(client, "mnote.page.get", **page_args())
    assert subset["result"]["blocks"] == [TREE[1]["children"][1], TREE[3]], "document order, each once"
    assert missing["error"]["code"] == "mnote_tool_not_found"
    assert missing["error"]["details"] == {"blockId": "nope", "pointer": "/blockIds/1"}
    # no block ids is the whole page (a strict host must send the field: [] is how it leaves it out)
    assert empty["result"] == whole["result"]


async def test_block_ids_and_pieces_combine(db: Path) -> None:
    async with connect(db) as client:
        await seed_tree(client)
        pieces = await read_in_pieces(client, 1, blockIds=["p", "h", "l2"])
    assert [[block["id"] for block in piece["blocks"]] for piece in pieces] == [["h"], ["l2"], ["p"]]


@pytest.mark.parametrize("mode", MODES)
async def test_a_cursor_from_another_revision_is_a_conflict(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        revision = await seed_tree(client)
        first = await call(client, "mnote.page.get", **page_args(maxBlocks=1))
        cursor = first["result"]["nextCursor"]
        await call(client, "mnote.block.update", **write_args("k", blockId="p", text="moved on"))
        stale = await call(client, "mnote.page.get", **page_args(maxBlocks=1, cursor=cursor))
    assert stale["error"]["code"] == "mnote_tool_conflict"
    assert stale["error"]["details"] == {"currentRevision": revision + 1, "cursorRevision": revision}
    assert "cursor" in stale["error"]["hint"]


@pytest.mark.parametrize(
    ("cursor", "extra"),
    [
        ("not-a-cursor", {}),
        ("eyJyIjoxfQ", {}),  # base64 JSON, but not one of ours
        (None, {"blockIds": ["h", "p"]}),  # ours, for another selection
        (None, {"documentId": "doc_secret"}),  # ours, for another page (user_owner may read both)
    ],
)
async def test_a_cursor_is_refused_outside_its_own_query(
    db: Path, cursor: str | None, extra: dict[str, Any]
) -> None:
    async with connect(db, actor="user_owner") as client:
        await seed_tree(client)
        first = await call(client, "mnote.page.get", **page_args(maxBlocks=1))
        args = {**page_args(maxBlocks=1), **extra, "cursor": cursor or first["result"]["nextCursor"]}
        envelope = await call(client, "mnote.page.get", **args)
    assert envelope["error"]["code"] == "mnote_tool_invalid_argument"
    assert envelope["error"]["details"]["pointer"] == "/cursor"


@pytest.mark.parametrize("mode", MODES)
async def test_the_contract_defaults_are_unchanged(db: Path, mode: str) -> None:
    async with connect(db, mode) as client:
        envelope = await call(client, "mnote.page.get", **page_args())
    result = envelope["result"]
    assert set(result) == {
        "documentId",
        "workspaceId",
        "title",
        "revision",
        "bodySummary",
        "pageOptions",
        "blocks",
    }
    assert [block["id"] for block in result["blocks"]] == ["heading_1", "p_1", "p_2"]


@pytest.mark.parametrize(
    ("args", "pointer"), [({"format": "html"}, "/format"), ({"maxBlocks": 0}, "/maxBlocks")]
)
async def test_bad_reading_arguments_are_refused(db: Path, args: dict[str, Any], pointer: str) -> None:
    async with connect(db) as client:
        envelope = await call(client, "mnote.page.get", **page_args(**args))
    assert envelope["error"]["code"] == "mnote_tool_invalid_argument"
    assert envelope["error"]["details"]["pointer"] == pointer
