"""Block-level diffs: the plan a write shows before it is made, and the record of what it changed.

A replace is matched by block id: ids only in the new body are inserts, ids only in the old are
deletes, ids in both may be updated (type, text, props) and may be moved (new parent, or out of order
among the siblings they kept). "Out of order" is measured against a longest increasing subsequence,
so a single block moved to the top is one move, not a cascade; the whole diff is O(n log n).
"""

from __future__ import annotations

import difflib
from bisect import bisect_left
from collections.abc import Iterator
from typing import Literal, NotRequired

from typing_extensions import TypedDict  # pydantic reads these (kernel/port.py) and needs this one on 3.11

from mnote_mcp.kernel.blocks import Block, count_blocks, walk

UpdatedField = Literal["type", "text", "props"]
FIELDS: tuple[UpdatedField, ...] = ("type", "text", "props")


class AppendOp(TypedDict):
    """Blocks added at the end of the page: how many (children included)."""

    op: Literal["append"]
    blocks: int


class DeleteOp(TypedDict):
    """A block gone from the page (its children are deletes of their own)."""

    op: Literal["delete"]
    blockId: str


class PlacedOp(TypedDict):
    """A block inserted or moved: where it now sits (after a sibling, under a parent; top level if no
    `parentId`)."""

    op: Literal["insert", "move"]
    blockId: str
    after: str | None
    parentId: NotRequired[str]


class UpdateOp(TypedDict):
    """A block kept in place whose named fields changed."""

    op: Literal["update"]
    blockId: str
    fields: list[UpdatedField]


# A revert also sets the page's head back: its title, and each page option (a boolean, `None` unset).
SetTitleOp = TypedDict(
    "SetTitleOp", {"op": Literal["set"], "field": Literal["title"], "from": str, "to": str}
)
SetOptionOp = TypedDict(
    "SetOptionOp", {"op": Literal["set"], "option": str, "from": bool | None, "to": bool | None}
)


class ArtifactOp(TypedDict):
    """An artifact made or rewritten by a write that is not a body edit."""

    op: Literal["create", "update"]
    artifact: Literal["summary", "ai_note"]
    artifactId: str


class EdgeOp(TypedDict):
    """The page's edge to an artifact: made, or found already there."""

    op: Literal["create", "confirm"]
    edge: Literal["reference"]
    edgeId: str


BlockOp = DeleteOp | PlacedOp | UpdateOp  # what `replace_diff` finds: ops that name a block
# One item of a write's `diff` (the wire says only "an object": these are what the kernel writes).
Op = AppendOp | BlockOp | SetTitleOp | SetOptionOp | ArtifactOp | EdgeOp

# Line pairs a text diff may leave to difflib (its worst case is ~0.1 us a pair: 0.1 s at this bound).
MAX_DIFF_PAIRS = 1_000_000


def append_diff(added: list[Block]) -> list[Op]:
    """The contract's exact shape: `[{"op": "append", "blocks": N}]`."""
    return [{"op": "append", "blocks": count_blocks(added)}]


def replace_diff(old: list[Block], new: list[Block]) -> list[BlockOp]:
    old_info = _flatten(old)
    new_info = _flatten(new)
    ops: list[BlockOp] = [{"op": "delete", "blockId": bid} for bid in old_info if bid not in new_info]
    moved = _moved(old_info, new_info)
    for bid, (parent, after, block) in new_info.items():
        if bid not in old_info:
            ops.append(placed("insert", bid, parent, after))
            continue
        if bid in moved:
            ops.append(placed("move", bid, parent, after))
        before = old_info[bid][2]
        fields = [name for name in FIELDS if before.get(name) != block.get(name)]
        if fields:
            ops.append({"op": "update", "blockId": bid, "fields": fields})
    return ops


def placed(op: Literal["insert", "move"], bid: str, parent: str | None, after: str | None) -> PlacedOp:
    """An insert or move op: the block, and where it now sits (after a sibling, under a parent)."""
    entry: PlacedOp = {"op": op, "blockId": bid, "after": after}
    if parent is not None:
        entry["parentId"] = parent
    return entry


def _flatten(blocks: list[Block]) -> dict[str, tuple[str | None, str | None, Block]]:
    """id -> (parent id, previous sibling id, block), in document order."""
    info: dict[str, tuple[str | None, str | None, Block]] = {}
    last_child: dict[str | None, str] = {}
    for block, parent, _ in walk(blocks):
        info[block["id"]] = (parent, last_child.get(parent), block)
        last_child[parent] = block["id"]
    return info


def _moved(
    old_info: dict[str, tuple[str | None, str | None, Block]],
    new_info: dict[str, tuple[str | None, str | None, Block]],
) -> set[str]:
    """Ids kept under a new parent, or kept under the same parent but outside the in-order core."""
    position = {bid: i for i, bid in enumerate(old_info)}
    moved: set[str] = set()
    same_parent: dict[str | None, list[str]] = {}
    for bid, (parent, _, _) in new_info.items():
        if bid not in old_info:
            continue
        if old_info[bid][0] != parent:
            moved.add(bid)
        else:
            same_parent.setdefault(parent, []).append(bid)
    for siblings in same_parent.values():
        keep = _longest_increasing(siblings, position)
        moved.update(bid for bid in siblings if bid not in keep)
    return moved


def _longest_increasing(ids: list[str], position: dict[str, int]) -> set[str]:
    """Ids forming a longest run that is in the same relative order as before (patience sorting)."""
    tails: list[int] = []
    tail_index: list[int] = []
    previous: list[int] = [-1] * len(ids)
    for i, bid in enumerate(ids):
        value = position[bid]
        k = bisect_left(tails, value)
        if k == len(tails):
            tails.append(value)
            tail_index.append(i)
        else:
            tails[k] = value
            tail_index[k] = i
        previous[i] = tail_index[k - 1] if k > 0 else -1
    keep: set[str] = set()
    i = tail_index[-1] if tail_index else -1
    while i >= 0:
        keep.add(ids[i])
        i = previous[i]
    return keep


def text_diff(before: str, after: str, *, name: str = "page", limit: int = 4000) -> str:
    """A unified diff of two renderings, cut at `limit` characters so a result stays small.

    difflib's matcher is quadratic at worst, and a dry run's caller chooses the new body: a page of
    20,000 blocks reordered so that its lines interleave took 88 s (issue 26). When the lines between
    the two renderings' common opening and ending make more than `MAX_DIFF_PAIRS` pairs, the diff is
    one hunk instead: those lines removed, then added (still a valid diff, cut at `limit` as any)."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    head, tail = _common_ends(old, new)
    if (len(old) - head - tail) * (len(new) - head - tail) <= MAX_DIFF_PAIRS:
        lines: Iterator[str] = difflib.unified_diff(old, new, f"a/{name}", f"b/{name}", n=1)
    else:
        lines = _one_hunk(old, new, head, tail, name)
    out: list[str] = []
    size = 0
    for line in lines:
        if not line.endswith("\n"):
            line += "\n"
        size += len(line)
        if size > limit:
            out.append("… (diff truncated)\n")
            break
        out.append(line)
    return "".join(out)


def _common_ends(old: list[str], new: list[str]) -> tuple[int, int]:
    """How many lines the two open with alike, and how many of the rest they end with alike."""
    shortest = min(len(old), len(new))
    head = 0
    while head < shortest and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < shortest - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    return head, tail


def _one_hunk(old: list[str], new: list[str], head: int, tail: int, name: str) -> Iterator[str]:
    """The unified diff of `old` to `new` as one hunk: the lines between their common ends removed,
    then added, with the one line of context on either side that difflib's `n=1` shows."""
    start = max(head - 1, 0)
    old_stop, new_stop = min(len(old), len(old) - tail + 1), min(len(new), len(new) - tail + 1)
    yield f"--- a/{name}\n"
    yield f"+++ b/{name}\n"
    yield f"@@ -{_range(start, old_stop)} +{_range(start, new_stop)} @@\n"
    if head:
        yield " " + old[head - 1]
    yield from ("-" + line for line in old[head : len(old) - tail])
    yield from ("+" + line for line in new[head : len(new) - tail])
    if tail:
        yield " " + old[len(old) - tail]


def _range(start: int, stop: int) -> str:
    """A hunk's line range as unified diffs write it (difflib's own rule)."""
    beginning, length = start + 1, stop - start
    if length == 1:
        return str(beginning)
    return f"{beginning - 1 if not length else beginning},{length}"
