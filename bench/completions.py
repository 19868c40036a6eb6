"""`python -m bench.completions [PAGES]`: what one `completion/complete` of a page costs when the caller
may read PAGES pages (10,000 by default), issue 25's "bounded and fast".

A SQLite store holds the test fixture plus PAGES one-block pages in the caller's workspace (titles
`notes 0` ... and one `项目计划 …` in a hundred). The server runs in this process and the SDK client
talks to it over memory streams (`tests.support.helpers.connect`), so a figure is the server's own
work: the kernel's `list_pages` (every page the caller may read) and the filter by prefix in
`prompts/completions.py`. Asked: a prefix matching every page (`notes`: at most `--max-completions`
come back, `hasMore`), a rare one (`项目`, one page in a hundred), one matching nothing, and the
workspace argument; after a warm-up, `ROUNDS` of each, median and 90th percentile in milliseconds.
The machine may be shared: give its load (`uptime`) with the figures.
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
    count = int(argv[0]) if argv else 10_000
    with tempfile.TemporaryDirectory() as tmp:
        db = store_with_pages(Path(tmp) / "many.db", FIXTURE, *pages(count))
        return {"pages": count, "rounds": ROUNDS, "completions": anyio.run(measure, db)}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:]), ensure_ascii=False, indent=2))
