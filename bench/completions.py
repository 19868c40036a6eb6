"""`python -m bench.completions [PAGES ...]`: what one `completion/complete` costs when the caller may
read PAGES pages (100 and 10,000 by default), issue 25's "bounded and fast".

A SQLite store holds the test fixture plus PAGES one-block pages in the caller's workspace (titles
`notes 0` ... and one `项目计划 …` in a hundred). The server runs in this process and the SDK client
talks to it over memory streams (`tests.support.helpers.connect`), so a figure is the server's own
work: the kernel's `list_pages` and the filter in `surface/prompts/completions.py`. Each store is measured
twice, side by side: `narrowed` (the kernel asked for the prefix, workspace and limit, in SQL) and
`whole listing` (a kernel that ignores them, as a runtime older than them does, and so as before
issue 25's fix: every readable page, filtered in Python). Asked: a prefix matching every page
(`notes`: at most `--max-completions` come back, `hasMore`), a rare one (`项目`, one page in a
hundred), one matching nothing, and the workspace argument (not narrowed: the whole listing either
way); after a warm-up, `ROUNDS` of each, median and 90th percentile in milliseconds. The machine may
be shared: give its load (`uptime`) with the figures.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types

from tests.support.helpers import FIXTURE, connect, store_with_pages
from tests.support.older import whole_listing

ROUNDS = 30
PROMPT = types.PromptReference(type="ref/prompt", name="summarise_page")
ASKED: tuple[tuple[str, str, dict[str, str] | None], ...] = (
    ("documentId", "notes", {"workspaceId": "ws_1"}),
    ("documentId", "项目", None),
    ("documentId", "zzz-nothing", None),
    ("workspaceId", "ws", None),
)


def pages(count: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"p{n:05d}",
            "title": f"项目计划 {n}" if n % 100 == 0 else f"notes {n}",
            "blocks": [{"id": f"b{n:05d}", "type": "paragraph", "text": f"line {n}"}],
        }
        for n in range(count)
    ]


async def measure(db: Path) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    async with connect(db) as client:
        for name, typed, context in ASKED:
            argument = {"name": name, "value": typed}
            await client.complete(PROMPT, argument, context)  # warm-up
            took: list[float] = []
            values = 0
            for _ in range(ROUNDS):
                start = time.perf_counter()
                answer = await client.complete(PROMPT, argument, context)
                took.append((time.perf_counter() - start) * 1000)
                values = len(answer.completion.values)
            took.sort()
            figures[f"{name}={typed}"] = {
                "median_ms": round(statistics.median(took), 2),
                "p90_ms": round(took[int(len(took) * 0.9) - 1], 2),
                "values": values,
            }
    return figures


def main(argv: list[str]) -> dict[str, Any]:
    counts = [int(arg) for arg in argv] or [100, 10_000]
    figures: dict[str, Any] = {"rounds": ROUNDS}
    with tempfile.TemporaryDirectory() as tmp:
        for count in counts:
            db = store_with_pages(Path(tmp) / f"pages{count}.db", FIXTURE, *pages(count))
            narrowed = anyio.run(measure, db)
            with whole_listing():
                whole = anyio.run(measure, db)
            figures[f"{count} pages"] = {"narrowed": narrowed, "whole listing": whole}
    return figures


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:]), ensure_ascii=False, indent=2))
