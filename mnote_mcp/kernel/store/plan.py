"""What a planned command is: the transaction view it plans in (`Tx`) and the plan it returns (`Plan`).

Shared by the command modules (`commands/`) and the store that writes plans, so that none of them
imports another one back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mnote_mcp.kernel.blocks import Block
from mnote_mcp.kernel.diff import Op, text_diff
from mnote_mcp.kernel.limits import PageLimits
from mnote_mcp.kernel.markdown import render_markdown
from mnote_mcp.kernel.port import Command, CommandOutcome, OutcomeData
from mnote_mcp.kernel.store.access import PageHead
from mnote_mcp.kernel.store.bounds import Growth
from mnote_mcp.kernel.store.history import HeadChange
from mnote_mcp.kernel.store.rows import BlockChange, PageBlocks, tree_of
from mnote_mcp.kernel.store.sql import Connection

Apply = Callable[[Connection, str], int]


@dataclass
class Tx:
    """One command's view of its page inside the transaction."""

    conn: Connection
    page: PageHead
    command: Command
    blocks: PageBlocks
    inline: bool = False
    limits: PageLimits = field(default_factory=PageLimits)

    @property
    def next_revision(self) -> int:
        return self.page.revision + 1

    def growth(self) -> Growth:
        """What the command is about to make, asked before it is made (`bounds.Growth`)."""
        return Growth(self.limits, self.page, self.inline)


@dataclass(slots=True)
class Plan:
    diff: list[Op]
    changed: bool
    blocks: list[BlockChange] = field(default_factory=list)
    head: HeadChange = field(default_factory=HeadChange)
    apply: Apply | None = None
    warnings: list[dict[str, Any]] = field(default_factory=list)
    data: OutcomeData = field(default_factory=OutcomeData)
    text_diff: Callable[[], str] | None = None

    def outcome(
        self, command: Command, command_id: str | None, revision: int, data: OutcomeData
    ) -> CommandOutcome:
        """What the command answers: this plan, made (`command_id`) or planned only (a dry run)."""
        return CommandOutcome(
            command_name=command.name,
            dry_run=command.dry_run,
            command_id=command_id,
            revision=revision,
            changed=self.changed,
            diff=self.diff,
            warnings=self.warnings,
            data=data,
        )

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
    diff: Sequence[Op],
    data: OutcomeData,
    body: list[Block] | None = None,
) -> Plan:
    return Plan(
        diff=list(diff),
        changed=bool(diff),
        blocks=changes,
        data=data,
        text_diff=text_diff_of(tx, changes, body) if diff else None,
    )
