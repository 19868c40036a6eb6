"""A page body addressed by block id: where each block sits, and edits that keep the tree canonical.

The block commands (insert, update, delete, move) name blocks and anchors by id. This module finds
them, refuses a target that cannot exist (an anchor inside the block being moved, a parent whose type
holds no children, an anchor that is not a child of the named parent), and edits a private copy of
the body, so a refused or dry-run command never touches the page it was planned against.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Literal

from mnote_mcp.kernel.blocks import BLOCK_TYPES, MAX_DEPTH, Block, height, walk
from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason, invalid

Position = Literal["start", "end"]


@dataclass(frozen=True, slots=True)
class Place:
    block: Block
    parent_id: str | None
    depth: int


@dataclass(frozen=True, slots=True)
class Target:
    """Where blocks go: after a sibling, or at the start or end of a parent's children (or the page)."""

    parent_id: str | None
    after_id: str | None
    position: Position
    depth: int

    def check_fits(self, blocks: list[Block], pointer: str) -> None:
        deepest = self.depth - 1 + max((height(block) for block in blocks), default=0)
        if deepest > MAX_DEPTH:
            raise invalid(pointer, f"would nest deeper than {MAX_DEPTH} levels", depth=deepest)


def not_found(block_id: str, pointer: str) -> MnoteError:
    return MnoteError(ErrorCode.NOT_FOUND, Reason.BLOCK, {"blockId": block_id, "pointer": pointer})


class BlockTree:
    """A mutable copy of a page body, indexed by block id."""

    def __init__(self, blocks: list[Block]) -> None:
        self.blocks: list[Block] = copy.deepcopy(blocks)
        self._index()

    def _index(self) -> None:
        self.places = {block["id"]: Place(block, parent, depth) for block, parent, depth in walk(self.blocks)}

    def find(self, block_id: str, pointer: str) -> Place:
        place = self.places.get(block_id)
        if place is None:
            raise not_found(block_id, pointer)
        return place

    def within(self, block_id: str, ancestor_id: str) -> bool:
        """Whether `block_id` is `ancestor_id` or one of its descendants."""
        current: str | None = block_id
        while current is not None:
            if current == ancestor_id:
                return True
            current = self.places[current].parent_id
        return False

    def target(
        self,
        *,
        after_id: str | None,
        parent_id: str | None,
        position: Position,
        moving: str | None = None,
    ) -> Target:
        """Resolve where blocks would go, refusing what cannot be: nothing is changed here."""
        parent_depth = 0
        if parent_id is not None:
            parent = self.find(parent_id, "/parentId")
            if moving is not None and self.within(parent_id, moving):
                raise invalid("/parentId", "is the moved block or inside it", blockId=parent_id)
            if not BLOCK_TYPES[parent.block["type"]].has_children:
                raise invalid(
                    "/parentId",
                    f"a {parent.block['type']} block has no children",
                    typesWithChildren=[name for name, spec in BLOCK_TYPES.items() if spec.has_children],
                )
            parent_depth = parent.depth
        if after_id is None:
            return Target(parent_id, None, position, parent_depth + 1)
        anchor = self.find(after_id, "/afterBlockId")
        if moving is not None and self.within(after_id, moving):
            raise invalid("/afterBlockId", "is the moved block or inside it", blockId=after_id)
        if parent_id is not None and anchor.parent_id != parent_id:
            raise invalid(
                "/afterBlockId",
                "is not a direct child of parentId",
                blockId=after_id,
                parentId=parent_id,
                actualParentId=anchor.parent_id,
            )
        return Target(anchor.parent_id, after_id, position, anchor.depth)

    def _container(self, parent_id: str | None) -> list[Block]:
        if parent_id is None:
            return self.blocks
        parent = self.places[parent_id].block
        children: list[Block] = parent.setdefault("children", [])
        return children

    def detach(self, block_id: str) -> Block:
        """Take a block (with its children) out of the tree and return it."""
        place = self.places[block_id]
        container = self._container(place.parent_id)
        container[:] = [block for block in container if block is not place.block]
        if place.parent_id is not None and not container:
            del self.places[place.parent_id].block["children"]
        self._index()
        return place.block

    def attach(self, target: Target, blocks: list[Block]) -> None:
        container = self._container(target.parent_id)
        if target.after_id is not None:
            anchor = self.places[target.after_id].block
            index = next(i for i, block in enumerate(container) if block is anchor) + 1
        else:
            index = 0 if target.position == "start" else len(container)
        container[index:index] = blocks
        self._index()

    def previous_sibling(self, block_id: str) -> str | None:
        container = self._container(self.places[block_id].parent_id)
        index = next(i for i, block in enumerate(container) if block["id"] == block_id)
        return container[index - 1]["id"] if index else None
