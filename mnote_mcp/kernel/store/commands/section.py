"""A heading's section, and the blocks a move or delete of several blocks takes (`section: true`).

A heading's section is the heading and the blocks after it among its siblings, up to the next heading
of the same or a higher level (a smaller or equal `level`) or the end of its parent; the blocks under
those come along as their children. Any other block's section is the block alone. `page.block.move`
and `page.block.delete` expand each named block into its section when asked, so one call moves or
deletes a chapter, and the block-level concurrency check relies on the blocks found and on the
heading that ends each section (a block that became a heading since would end it elsewhere).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mnote_mcp.kernel.blocks import block_not_found
from mnote_mcp.kernel.errors import invalid
from mnote_mcp.kernel.store.plan import Tx
from mnote_mcp.kernel.store.rows import BlockRow, PageBlocks

HEADING = "heading"
_BATCH = 64  # siblings read at a time while looking for a section's end


def level(row: BlockRow) -> int:
    return int(row.props.get("level", 1))


def section(blocks: PageBlocks, row: BlockRow) -> tuple[list[BlockRow], BlockRow | None]:
    """The blocks of `row`'s section (itself first, in order) and the heading that ends it (None at
    the end of its parent, or for a block that is not a heading)."""
    if row.type != HEADING:
        return [row], None
    top = level(row)
    out = [row]
    after = row.position
    while True:
        batch = blocks.children(row.parent_id, after=after, limit=_BATCH)
        for sibling in batch:
            if sibling.type == HEADING and level(sibling) <= top:
                return out, sibling
            out.append(sibling)
        if len(batch) < _BATCH:
            return out, None
        after = batch[-1].position


@dataclass(frozen=True, slots=True)
class Chosen:
    """The blocks one call takes, in the order given (each named block, with its section if asked,
    once), and the headings that end those sections."""

    rows: list[BlockRow]
    ends: list[BlockRow]

    @property
    def ids(self) -> list[str]:
        return [row.id for row in self.rows]


def choose(
    tx: Tx, named: Sequence[str], pointers: Sequence[str], *, sections: bool, strict: bool = True
) -> Chosen:
    """The named blocks, each expanded to its section when `sections`; a block already taken (in an
    earlier one's section) is not taken twice. `strict`: a missing block is `not_found` at its pointer
    (else it is left out, for the concurrency check, which finds it in the history)."""
    found = tx.blocks.get_many(named)
    rows: list[BlockRow] = []
    ends: list[BlockRow] = []
    taken: set[str] = set()
    for block_id, pointer in zip(named, pointers, strict=True):
        row = found.get(block_id)
        if row is None:
            if strict:
                raise block_not_found(block_id, pointer)
            continue
        members, end = section(tx.blocks, row) if sections else ([row], None)
        rows += [member for member in members if member.id not in taken]
        taken.update(member.id for member in members)
        if end is not None:
            ends.append(end)
    return Chosen(rows, ends)


def refuse_nested(blocks: PageBlocks, named: Sequence[str], pointers: Sequence[str], chosen: Chosen) -> None:
    """A named block under another block the call takes cannot be placed on its own: refused."""
    taken = set(chosen.ids)
    for block_id, pointer in zip(named, pointers, strict=True):
        above = next((a.id for a in blocks.ancestors(block_id) if a.id in taken), None)
        if above is not None:
            raise invalid(pointer, "is inside another moved block", blockId=block_id, insideBlockId=above)
