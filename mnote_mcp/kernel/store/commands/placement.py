"""Where new or moved blocks go: a parent, an anchor or a position, resolved to a slot between two
order keys, refused with a pointer when it cannot be (a missing parent or anchor, a parent without
children, a block moved into itself, nesting too deep); and the order keys for the blocks placed
there. Shared by `page.body.save` (append), `page.block.insert` and `page.block.move`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import Literal, TypedDict

from mnote_mcp.kernel.blocks import BLOCK_TYPES, MAX_DEPTH, block_id, block_not_found
from mnote_mcp.kernel.errors import invalid
from mnote_mcp.kernel.store.orderkeys import keys_between, too_long
from mnote_mcp.kernel.store.plan import Tx
from mnote_mcp.kernel.store.rows import TOP, BlockChange, BlockRow, PageBlocks

Position = Literal["start", "end"]


class Placement(TypedDict):
    """Where a payload puts blocks: after a block, or at the start or end of a parent (or the page)."""

    afterBlockId: str | None
    parentId: str | None
    position: Position


def placement(payload: Mapping[str, object]) -> Placement:
    """The placement arguments of a payload, checked (`afterBlockId` and `position` exclude each other)."""
    after = _optional_id(payload, "afterBlockId")
    position = payload.get("position")
    if position is not None and position not in ("start", "end"):
        raise invalid("/position", "must be 'start' or 'end'")
    if after is not None and position is not None:
        raise invalid("/position", "give afterBlockId or position, not both")
    return {
        "afterBlockId": after,
        "parentId": _optional_id(payload, "parentId"),
        "position": "end" if position == "end" else "start",
    }


def _optional_id(payload: Mapping[str, object], name: str) -> str | None:
    value = payload.get(name)
    return None if value is None else block_id(value, f"/{name}")


class PageIds:
    """The ids on the page (asked one at a time) plus the ones being added (`blocks.IdSet`)."""

    def __init__(self, blocks: PageBlocks, adding: set[str]) -> None:
        self.blocks = blocks
        self.adding = adding

    def __contains__(self, block: object) -> bool:
        return block in self.adding or (isinstance(block, str) and self.blocks.exists(block))

    def add(self, block: str) -> None:
        self.adding.add(block)


@dataclass(frozen=True, slots=True)
class Slot:
    """Where blocks go: under `parent_id` (TOP: the page), between the order keys `low` and `high`,
    right after the block `after_id` (None: first). `depth` is the depth of a block placed there."""

    parent_id: str
    after_id: str | None
    low: str | None
    high: str | None
    depth: int

    def check_fits(self, heights: int, pointer: str) -> None:
        deepest = self.depth - 1 + heights
        if deepest > MAX_DEPTH:
            raise invalid(pointer, f"would nest deeper than {MAX_DEPTH} levels", depth=deepest)


def slot(tx: Tx, p: Placement, moving: Collection[str] = ()) -> Slot:
    """Resolve where blocks would go, refusing what cannot be: the parent first, then the anchor.
    `moving` are the blocks being moved there (each with its subtree): the slot is among the others."""
    blocks = tx.blocks
    parent_id = p["parentId"]
    after_id = p["afterBlockId"]
    moved = set(moving)
    parent_depth = 0
    if parent_id is not None:
        parent = blocks.get(parent_id)
        if parent is None:
            raise block_not_found(parent_id, "/parentId")
        if _inside(blocks, parent_id, moved):
            raise invalid("/parentId", "is the moved block or inside it", blockId=parent_id)
        if not BLOCK_TYPES[parent.type].has_children:
            raise invalid(
                "/parentId",
                f"a {parent.type} block has no children",
                typesWithChildren=[name for name, spec in BLOCK_TYPES.items() if spec.has_children],
            )
        parent_depth = blocks.depth(parent_id)
    if after_id is None:
        container = parent_id if parent_id is not None else TOP
        if p["position"] == "start":
            first = _passing(blocks, blocks.edge_child(container, last=False), moved, following=True)
            return Slot(container, None, None, first.position if first else None, parent_depth + 1)
        last = _passing(blocks, blocks.edge_child(container, last=True), moved, following=False)
        return Slot(
            container, last.id if last else None, last.position if last else None, None, parent_depth + 1
        )
    anchor = blocks.get(after_id)
    if anchor is None:
        raise block_not_found(after_id, "/afterBlockId")
    if _inside(blocks, after_id, moved):
        raise invalid("/afterBlockId", "is the moved block or inside it", blockId=after_id)
    if parent_id is not None and anchor.parent_id != parent_id:
        raise invalid(
            "/afterBlockId",
            "is not a direct child of parentId",
            blockId=after_id,
            parentId=parent_id,
            actualParentId=anchor.parent_id or None,
        )
    following = _passing(blocks, blocks.sibling(anchor, following=True), moved, following=True)
    return Slot(
        anchor.parent_id,
        anchor.id,
        anchor.position,
        following.position if following else None,
        blocks.depth(after_id),
    )


def _inside(blocks: PageBlocks, block_id: str, moved: set[str]) -> bool:
    """Whether `block_id` is one of the moved blocks or under one."""
    return block_id in moved or any(a.id in moved for a in blocks.ancestors(block_id))


def _passing(
    blocks: PageBlocks, row: BlockRow | None, moved: set[str], *, following: bool
) -> BlockRow | None:
    """`row`, or the nearest sibling past it (in that direction) that is not being moved."""
    while row is not None and row.id in moved:
        row = blocks.sibling(row, following=following)
    return row


def keys(tx: Tx, at: Slot, count: int, moving: Collection[str] = ()) -> tuple[list[str], list[BlockChange]]:
    """Order keys for `count` blocks placed at `at`; if the gap is worn thin, the siblings are
    respaced and their new keys come back as `rekey` changes."""
    new = keys_between(at.low, at.high, count)
    if not too_long(new):
        return new, []
    moved = set(moving)
    siblings = [row for row in tx.blocks.children(at.parent_id) if row.id not in moved]
    index = 0 if at.after_id is None else 1 + next(i for i, r in enumerate(siblings) if r.id == at.after_id)
    fresh = keys_between(None, None, len(siblings) + count)
    others = fresh[:index] + fresh[index + count :]
    rekeys = [
        BlockChange(row.id, row, replace(row, position=key), rekey=True)
        for row, key in zip(siblings, others, strict=True)
        if row.position != key
    ]
    return fresh[index : index + count], rekeys
