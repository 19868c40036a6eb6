"""The stages of the result-budget scenarios: pages of data made large, which a tool's `oversized`
examples name (`examples.Stage`) and tests/unit/tools/test_budget_everywhere.py runs them on.

They live in one store, built once (`build`) and copied for every scenario: a 2,000-block page, a page
written 60 times with 30 blocks each, a page whose middle block is 65,000 characters with two
children, 60 pages matching "plan" in long titles and text, and 100 empty pages sharing a prefix
(for completions), beside the tests' fixture.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from mnote_mcp.tools.examples import Stage, Target
from tests.support.helpers import FIXTURE, call, connect, store_with_pages, write_args

WORKSPACE = "ws_1"
BIG, HISTORY, HUGE = "doc_big", "doc_history", "doc_huge_block"
BIG_IDS = tuple(f"big_block_{index:05d}" for index in range(2_000))
HISTORY_WRITES = 60
SEARCHED = 60  # pages matching "plan"
COMPLETED = [f"doc_completes_{index:03d}_{'c' * 40}" for index in range(100)]
# One block of 65,000 characters (prose, Chinese, emoji, quotes, line breaks: what JSON escapes and
# what a host counts differently) with two children, between two small blocks.
HUGE_TEXT = ('Notes on the plan, "quoted" \\ 计划与迁移 🙂👍🏽\n' * 2_000)[:65_000]
HUGE_BLOCK = {
    "id": "huge_root",
    "type": "bulleted_list",
    "text": HUGE_TEXT,
    "children": [
        {"id": "huge_child_1", "type": "paragraph", "text": "first child"},
        {"id": "huge_child_2", "type": "paragraph", "text": "second child 第二"},
    ],
}

TARGETS: dict[Stage, Target] = {
    Stage.BIG: Target(WORKSPACE, BIG, BIG_IDS[:3], every_block=BIG_IDS),
    Stage.HISTORY: Target(WORKSPACE, HISTORY, ("h_0",)),  # its seeded revision, before the 60 writes
    Stage.HUGE_BLOCK: Target(WORKSPACE, HUGE, ("huge_before", "huge_root", "huge_after")),
    Stage.MANY_PAGES: Target(WORKSPACE, BIG, BIG_IDS[:3]),  # for a tool that names no page
}


def _pages() -> list[dict[str, Any]]:
    text = "Notes on the plan and the migration, written as people write meeting minutes."
    big = {
        "id": BIG,
        "title": "A 2,000-block page",
        "blocks": [
            {"id": block_id, "type": "paragraph", "text": f"{i} {text}"} for i, block_id in enumerate(BIG_IDS)
        ],
    }
    history = {
        "id": HISTORY,
        "title": "Written often",
        "blocks": [{"id": "h_0", "type": "paragraph", "text": "x"}],
    }
    searched = [
        {
            "id": f"doc_plan_{index:02d}",
            "title": f"Plan {index} " + "planning " * 50,
            "blocks": [
                {"id": f"plan_{index}_{n}", "type": "paragraph", "text": "plan " * 100} for n in range(3)
            ],
        }
        for index in range(SEARCHED)
    ]
    huge = {
        "id": HUGE,
        "title": "One huge block",
        "blocks": [
            {"id": "huge_before", "type": "paragraph", "text": "before"},
            HUGE_BLOCK,
            {"id": "huge_after", "type": "paragraph", "text": "after"},
        ],
    }
    completed = [
        {"id": document_id, "title": f"Completes {index}", "blocks": []}
        for index, document_id in enumerate(COMPLETED)
    ]
    return [big, history, huge, *searched, *completed]


def build(path: Path) -> Path:
    """Every stage in one store at `path`: the pages above, then the history page's writes."""
    db = store_with_pages(path, FIXTURE, *_pages())

    async def write_history() -> None:
        async with connect(db) as client:
            for write in range(HISTORY_WRITES):
                blocks = [{"type": "paragraph", "text": f"write {write}, block {n}"} for n in range(30)]
                arguments = write_args(f"history-{write}", document_id=HISTORY, content=blocks, mode="append")
                assert (await call(client, "mnote.page.save", **arguments))["ok"]

    anyio.run(write_history)
    return db
