"""The one door every command passes through: what it would write is bounded before it is built, and
work whose cost a client's input sets is done off the event loop.

Issue 30 found the newest command (`page.text.replace`) missing guarantees the older ones kept each for
itself: doubling `replaceAll` edits built a gigabyte string on the event loop before any limit was
looked at, and wrote blocks past the text cap the block tools keep. So the guarantees are kept here,
where `Store.run_command` runs every command, and a command cannot opt out:

- **What a plan writes** (`check_plan`, after planning, before any row is written, dry runs included):
  every block's text within `--max-block-chars`, every new block id well formed, every block placed
  within `MAX_DEPTH` levels, the page within `--max-page-blocks` and `--max-page-bytes`.
- **Growth, before it is built** (`Growth`, `Tx.growth()`): a command that makes text from a smaller
  request asks first, with the size it would reach, known before the string is made (`edit_text`: a
  replacement's length is `len(text) + count x (len(new) - len(old))`). The same limits refuse it, with
  the argument that would have grown it.
- **Where the work runs** (`inline_ok`, `Growth.work`): on the event loop, a command may only work on a
  light page (`INLINE_BLOCKS` blocks and `INLINE_BYTES` bytes at most, counting what its request
  adds) and scan or make at most `INLINE_WORK` characters; past either it raises `MoveToThread` before
  doing the work, and the kernel runs it again on a worker thread. Reads and listings follow the same
  rule in `store.py`; `kernel.StoreKernel` runs every listing, search and history read on a thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mnote_mcp.kernel.blocks import MAX_DEPTH, block_id
from mnote_mcp.kernel.errors import invalid
from mnote_mcp.kernel.limits import PageLimits
from mnote_mcp.kernel.store.access import PageHead
from mnote_mcp.kernel.store.dialect import INLINE_BLOCKS, MoveToThread
from mnote_mcp.kernel.store.rows import TOP, BlockChange, BlockRow, PageBlocks

# A page of more bytes than this is worked on off the event loop (reading, rendering, planning).
INLINE_BYTES = 256 * 1024
# The characters an inline command may scan or make before it moves to a worker thread: a few
# milliseconds of `str.count` and `str.replace`.
INLINE_WORK = 2_000_000


def inline_ok(page: PageHead, payload: Mapping[str, Any] | None = None) -> bool:
    """Whether work on `page` (and on what `payload` adds to it) is light enough for the event loop."""
    if page.block_count > INLINE_BLOCKS or page.byte_size > INLINE_BYTES:
        return False
    items, chars = payload_weight(payload or {}, INLINE_BLOCKS, INLINE_BYTES)
    return page.block_count + items <= INLINE_BLOCKS and page.byte_size + chars <= INLINE_BYTES


def heavy_request(payload: Mapping[str, Any]) -> bool:
    """Whether a request alone (many blocks or ids, long texts) is too much to check on the event loop."""
    items, chars = payload_weight(payload, INLINE_BLOCKS, INLINE_BYTES)
    return items > INLINE_BLOCKS or chars > INLINE_BYTES


def payload_weight(payload: Mapping[str, Any], max_items: int, max_chars: int) -> tuple[int, int]:
    """The items (array entries, object members) and string characters a request carries, counted
    without trusting its shape, and only as far as either bound: past it, the exact figure does not
    matter (the call is heavy), so the walk costs at most about `max_items` steps."""
    items = chars = 0
    stack: list[Any] = [payload]
    while stack and items <= max_items and chars <= max_chars:
        value = stack.pop()
        if isinstance(value, str):
            chars += len(value)
        elif isinstance(value, Mapping):
            items += len(value)
            stack += value.values()
        elif isinstance(value, list):
            items += len(value)
            stack += value
    return items, chars


class Growth:
    """The page one command is building, asked before each piece is made (see the module). One per
    pass over the page (`Tx.growth()`): a command that plans twice (its `depends`, then its plan)
    starts afresh each time."""

    __slots__ = ("_inline", "_limits", "_page_bytes", "_work")

    def __init__(self, limits: PageLimits, page: PageHead, inline: bool) -> None:
        self._limits = limits
        self._inline = inline
        self._page_bytes = page.byte_size
        self._work = 0

    def text(self, chars: int, block: str, pointer: str) -> None:
        """A block's text is about to become `chars` characters long."""
        self._limits.check_text(chars, block, pointer)

    def bytes(self, delta: int) -> None:
        """The page is about to grow by `delta` bytes (negative: shrink)."""
        self._page_bytes += delta
        if delta > 0:
            self._limits.check(0, self._page_bytes)

    def work(self, chars: int) -> None:
        """About to scan or make `chars` characters: on the event loop, only so much of that."""
        self._work += chars
        if self._inline and self._work > INLINE_WORK:
            raise MoveToThread


def check_plan(
    limits: PageLimits, changes: Sequence[BlockChange], size_after: tuple[int, int], blocks: PageBlocks
) -> None:
    """Refuse a plan that would write past any limit (see the module): its block `changes`, the page's
    block count and bytes once they are written (`size_after`), the page's other rows (`blocks`).
    Nothing is written yet."""
    if not changes:
        return
    placed: dict[str, BlockRow] = {}
    for change in changes:
        after = change.after
        if after is None:
            continue
        if change.before is None or not change.before.same_content(after):
            limits.check_text(len(after.text), after.id)
        if change.before is None:
            block_id(after.id, "/blockId")  # a new block's id: well formed, whoever made it
        if change.before is None or change.before.parent_id != after.parent_id:
            placed[after.id] = after
    limits.check(*size_after)
    if placed:
        _check_depth(changes, blocks, placed)


def _check_depth(changes: Sequence[BlockChange], blocks: PageBlocks, placed: dict[str, BlockRow]) -> None:
    """Every block placed (inserted, or moved under another parent) within `MAX_DEPTH` levels, counted
    on the page as the plan leaves it. (What lies under a moved block moves with it: the placing
    commands' slot (`placement.py`) counts its height before planning; this counts the block itself.)"""
    after = {change.id: change.after for change in changes}
    depths: dict[str, int] = {TOP: 0}

    def depth(row_id: str) -> int:
        chain: list[str] = []
        current = row_id
        while current not in depths:
            chain.append(current)
            if len(chain) > MAX_DEPTH + 1:  # deep enough to refuse: no need to reach the top
                break
            row = after[current] if current in after else blocks.get(current)
            current = row.parent_id if row is not None else TOP
        found = depths.get(current, MAX_DEPTH + 1)
        for node in reversed(chain):
            found += 1
            depths[node] = found
        return depths[row_id]

    for row in placed.values():
        deepest = depth(row.id)
        if deepest > MAX_DEPTH:
            raise invalid(
                "/blockId", f"would nest deeper than {MAX_DEPTH} levels", blockId=row.id, depth=deepest
            )
