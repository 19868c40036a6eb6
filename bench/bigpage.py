"""`python -m bench.bigpage`: a page at the size limit, as issue 9 (item 5) measured the attack.

- saving a page at the default limit (20,000 blocks, just under 8 MiB) through an in-process
  `mcp.Client`, with a ping every 10 ms meanwhile: how long the save takes, the longest a ping waited;
- the same over stdio (`mnote-mcp serve` in a subprocess, a raw JSON-RPC client): the longest ping gap;
- reading that page: peak Python memory of the kernel's `get_page` (tracemalloc) against the page's size;
- a save one block over the limit: refused, and how fast.

Figures for docs/security.md and docs/performance.md; not a test (see tests/unit/kernel/test_limits.py).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import anyio

from bench.measure import without_call_limits
from bench.rawclient import StdioPeer
from bench.targets import ROOT
from mnote_mcp.kernel.limits import DEFAULT_MAX_PAGE_BLOCKS, DEFAULT_MAX_PAGE_BYTES
from mnote_mcp.kernel.port import Correlation, PageQuery
from mnote_mcp.kernel.sqlite.opening import open_kernel

IDS = {"sessionId": "s", "runId": "r", "toolCallId": "c", "traceId": "t"}


def page_at_the_limit(extra: int = 0) -> list[dict[str, Any]]:
    size = DEFAULT_MAX_PAGE_BYTES // DEFAULT_MAX_PAGE_BLOCKS - 40
    return [
        {"id": f"b{n}", "type": "paragraph", "text": "x" * size}
        for n in range(DEFAULT_MAX_PAGE_BLOCKS + extra)
    ]


def save_args(key: str, content: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "workspaceId": "ws_1",
        "documentId": "doc_1",
        "content": content,
        "idempotencyKey": key,
        "dryRun": False,
        **IDS,
    }


async def in_process(db: Path) -> dict[str, float]:
    from tests.support.helpers import connect

    gaps: list[float] = []
    took: list[float] = []
    async with connect(db) as client:
        await client.send_ping()

        async def save() -> None:
            started = time.perf_counter()
            result = await client.call_tool("mnote.page.save", save_args("limit", page_at_the_limit()))
            took.append(time.perf_counter() - started)
            assert not result.is_error, result
            group.cancel_scope.cancel()

        async with anyio.create_task_group() as group:
            group.start_soon(save)
            while True:
                started = time.perf_counter()
                await client.send_ping()
                gaps.append(time.perf_counter() - started)
                await anyio.sleep(0.01)
        started = time.perf_counter()
        over = await client.call_tool("mnote.page.save", save_args("over", page_at_the_limit(extra=1)))
        refused = time.perf_counter() - started
        assert over.is_error
    return {"save_s": took[0], "max_ping_wait_s": max(gaps), "pings": len(gaps), "refusal_s": refused}


async def over_stdio(db: Path) -> dict[str, float]:
    argv = [
        sys.executable,
        "-m",
        "mnote_mcp",
        "serve",
        "--db",
        str(db),
        "--actor",
        "user_editor",
        "--log-level",
        "warning",
    ]
    peer = await StdioPeer.spawn(argv, cwd=str(ROOT))
    try:
        await peer.initialize()
        save = asyncio.ensure_future(peer.call("mnote.page.save", save_args("stdio", page_at_the_limit())))
        gaps: list[float] = []
        started_save = time.perf_counter()
        while not save.done():
            started = time.perf_counter()
            await peer.request("ping")
            gaps.append(time.perf_counter() - started)
            await asyncio.sleep(0.01)
        reply = await save
        assert "error" not in reply and not reply["result"].get("isError"), str(reply)[:300]
        return {
            "save_s": time.perf_counter() - started_save,
            "max_ping_wait_s": max(gaps),
            "pings": len(gaps),
        }
    finally:
        await peer.close()


async def read_memory(db: Path) -> dict[str, float]:
    kernel = open_kernel(db)
    try:
        query = PageQuery("ws_1", "doc_1", "user_editor", Correlation("s", "r", "c", "t"))
        tracemalloc.start()
        page = await kernel.get_page(query)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        await kernel.aclose()
    body = len(json.dumps(page["blocks"], ensure_ascii=False).encode())
    return {
        "page_bytes": DEFAULT_MAX_PAGE_BYTES,
        "body_json_bytes": body,
        "peak_bytes": peak,
        "peak_over_page": peak / body,
    }


async def main() -> dict[str, Any]:
    without_call_limits()
    from tests.support.helpers import seeded_store

    with tempfile.TemporaryDirectory(prefix="mnote-bigpage-") as tmp:
        results: dict[str, Any] = {"in_process": await in_process(seeded_store(Path(tmp) / "a.db"))}
        results["stdio"] = await over_stdio(seeded_store(Path(tmp) / "b.db"))
        results["read"] = await read_memory(Path(tmp) / "a.db")
    return results


if __name__ == "__main__":
    figures = anyio.run(main)
    print(json.dumps(figures, indent=2))
