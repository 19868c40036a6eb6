"""What a planned command is: the transaction view it plans in (`Tx`) and the plan it returns (`Plan`).

Shared by the command modules (`commands.py`, `revert.py`) and the store that writes plans, so that
none of them imports another one back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mnote_mcp.kernel.blocks import Block
from mnote_mcp.kernel.diff import text_diff
from mnote_mcp.kernel.errors import Reason
from mnote_mcp.kernel.local.access import PageHead
from mnote_mcp.kernel.local.connection import INLINE_BLOCKS, MoveToThread
from mnote_mcp.kernel.local.history import HeadChange
from mnote_mcp.kernel.local.rows import BlockChange, PageBlocks, tree_of
from mnote_mcp.kernel.local.sql import Connection
from mnote_mcp.kernel.markdown import render_markdown
from mnote_mcp.kernel.port import Command

Apply = Callable[[Connection, str], int]


@dataclass
class Tx:
    """One command's view of its page inside the transaction."""

    conn: Connection
    page: PageHead
    command: Command
    blocks: PageBlocks
    inline: bool = False

    @property
    def next_revision(self) -> int:
        return self.page.revision + 1

    def whole_page(self, extra_blocks: int = 0) -> None:
        """About to work on the whole page: a long one is worked on off the event loop."""
        if self.inline and self.page.block_count + extra_blocks > INLINE_BLOCKS:
            raise MoveToThread


@dataclass(slots=True)
class Plan:
    diff: list[dict[str, Any]]
    changed: bool
    blocks: list[BlockChange] = field(default_factory=list)
    head: HeadChange = field(default_factory=HeadChange)
    apply: Apply | None = None
    warnings: list[dict[str, Any]] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    text_diff: Callable[[], str] | None = None

    def size_after(self, page: PageHead) -> tuple[int, int]:
        """The page's block count and bytes once this plan is written (what the size limit checks)."""
        blocks, size = page.block_count, page.byte_size
        for change in self.blocks:
            before, after = change.before, change.after
            blocks += (before is None) - (after is None)
            if before is not None and after is not None and before.same_content(after):
                continue
            size += (after.size if after else 0) - (before.size if before else 0)
        return blocks, size


Planner = Callable[[Tx, dict[str, Any]], Plan]
Depends = Callable[[Tx, dict[str, Any]], list[str]]


@dataclass(frozen=True, slots=True)
class CommandSpec:
    validate: Callable[[Mapping[str, Any]], dict[str, Any]]
    plan: Planner
    conflict_reason: Reason = Reason.GENERIC
    # Block edits: the blocks they rely on. A stale baseRevision is fine if none changed since.
    depends: Depends | None = None


def text_diff_of(
    tx: Tx, changes: list[BlockChange], new_body: list[Block] | None = None
) -> Callable[[], str]:
    """The Markdown diff of the body before and after `changes`: a function, for dry runs only."""

    def compute() -> str:
        rows = {row.id: row for row in tx.blocks.all()}
        before = tree_of(rows.values())
        if new_body is None:
            for change in changes:
                if change.after is None:
                    rows.pop(change.id, None)
                else:
                    rows[change.id] = change.after
        after = new_body if new_body is not None else tree_of(rows.values())
        return text_diff(render_markdown(before), render_markdown(after))

    return compute


def body_plan(
    tx: Tx,
    changes: list[BlockChange],
    diff: list[dict[str, Any]],
    data: dict[str, Any],
    body: list[Block] | None = None,
) -> Plan:
    return Plan(
        diff=diff,
        changed=bool(diff),
        blocks=changes,
        data=data,
        text_diff=text_diff_of(tx, changes, body) if diff else None,
    )


def payload_blocks(payload: Mapping[str, Any]) -> int:
    """How many blocks a (not yet validated) payload carries or names (`blockIds`), counted without
    trusting its shape, and only as far as `INLINE_BLOCKS`: past it, the call is heavy."""
    named = payload.get("blockIds")
    total, stack = (
        len(named) if isinstance(named, list) else 0,
        [payload.get("content", payload.get("blocks"))],
    )
    while stack and total <= INLINE_BLOCKS:  # past the threshold the exact count does not matter
        items = stack.pop()
        if isinstance(items, list):
            total += len(items)
            if total <= INLINE_BLOCKS:
                stack += [item["children"] for item in items if isinstance(item, dict) and "children" in item]
    return total
