"""`python -m bench.consent [BLOCKS]`: what consent costs a client that cannot be asked (issue 31).

Before issue 31 such a client's writes were made unasked, with no plan first (`--confirm-fallback
write`, then the default). Now (`handle`, the default) a write of a tool whose rule can ask is planned
first (a dry run, as for a client that can be asked since issue 25), so that a destructive one is held
and a harmless one made. Measured side by side in each round, on a page of BLOCKS blocks (1,000 by
default), through the SDK client over memory streams (`tests.support.helpers.connect`), so a figure is
the server's own work: a `mnote.page.update_title` of a page only the caller writes and a
`mnote.block.delete` of one leaf (each planned first under `handle`, neither asks), and the held
delete of a list with its children (the confirmation result, under `handle` only; under `write` it
would be written). An `append` save and the undo of one's own run are not planned (`before_plan`).
Then the kernel's own cost of such a plan (`plan_costs`): a dry run with its `textDiff`, one without
(what the check makes), and the write, side by side. After a warm-up,
`ROUNDS` of each; median and 90th percentile in milliseconds, and the ratio handle / write. The machine
may be shared: give its load (`uptime`) with the figures.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from itertools import count
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from mnote_mcp.kernel.port import Command, Correlation
from mnote_mcp.kernel.sqlite.opening import open_kernel
from tests.support.helpers import FIXTURE, call, connect, store_with_pages

ROUNDS = 30
PAGE: dict[str, Any] = {"workspaceId": "ws_1", "documentId": "doc_bench"}


def page(blocks: int) -> dict[str, Any]:
    """`blocks` paragraphs, then a list with two children (what the held delete names)."""
    body: list[dict[str, Any]] = [
        {"id": f"b{index}", "type": "paragraph", "text": f"Paragraph {index}."} for index in range(blocks)
    ]
    body.append(
        {
            "id": "list",
            "type": "bulleted_list",
            "text": "A list",
            "children": [{"type": "paragraph", "text": f"Item {n}."} for n in (1, 2)],
        }
    )
    return {"id": PAGE["documentId"], "title": "Bench", "blocks": body}


async def measure(blocks: int, fallback: str, rounds: int) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory() as scratch:
        fixture = page(blocks)
        db = store_with_pages(Path(scratch) / "mnote.db", FIXTURE, fixture)
        keys = count()

        async def rename(client: Client) -> None:
            key = f"title-{next(keys)}"
            answer = await call(
                client, "mnote.page.update_title", **PAGE, idempotencyKey=key, dryRun=False, title=key
            )
            assert answer["ok"], answer

        async def delete_leaf(client: Client) -> None:
            key = f"leaf-{next(keys)}"
            inserted = await call(
                client,
                "mnote.block.insert",
                **PAGE,
                idempotencyKey=f"i-{key}",
                dryRun=False,
                blocks=[{"type": "paragraph", "text": key}],
                position="end",
            )
            leaf = inserted["result"]["blockIds"][0]
            started = time.perf_counter()
            answer = await call(
                client, "mnote.block.delete", **PAGE, idempotencyKey=key, dryRun=False, blockIds=[leaf]
            )
            timings["block.delete (one leaf)"].append(time.perf_counter() - started)
            assert answer["ok"], answer

        timings: dict[str, list[float]] = {"page.update_title": [], "block.delete (one leaf)": []}
        cases: list[tuple[str, Callable[[Client], Awaitable[None]]]] = [("page.update_title", rename)]
        async with connect(db, confirm_fallback=fallback, refusals="result", result_form="text") as client:
            for _ in range(3):  # warm-up
                await rename(client)
                await delete_leaf(client)
            timings = {name: [] for name in timings}
            for _ in range(rounds):
                for name, case in cases:
                    started = time.perf_counter()
                    await case(client)
                    timings[name].append(time.perf_counter() - started)
                await delete_leaf(client)
            if fallback == "handle":
                timings["block.delete of a list, held"] = []
                for _ in range(rounds):
                    started = time.perf_counter()
                    answer = await call(
                        client,
                        "mnote.block.delete",
                        **PAGE,
                        idempotencyKey=f"h-{next(keys)}",
                        dryRun=False,
                        blockIds=["list"],
                    )
                    timings["block.delete of a list, held"].append(time.perf_counter() - started)
                    assert answer["error"]["details"]["confirmation"] == "required", answer
    return {name: _stats(values) for name, values in timings.items()}


async def plan_costs(blocks: int, rounds: int) -> dict[str, dict[str, float]]:
    """The kernel's own cost of the check's plan, side by side in each round: an `append` save of one
    paragraph to the page as a dry run with its `textDiff` (what a dry run answers), as the check's
    dry run without it (`Command.text_diff`), and written."""
    with tempfile.TemporaryDirectory() as scratch:
        db = store_with_pages(Path(scratch) / "mnote.db", FIXTURE, page(blocks))
        kernel = open_kernel(db)
        ids = Correlation("sess_bench", "run_bench", "call_bench", "trace_bench")
        keys = count()

        def save(dry_run: bool, text_diff: bool = True) -> Command:
            return Command(
                name="page.body.save",
                workspace_id="ws_1",
                document_id=PAGE["documentId"],
                actor_id="user_editor",
                correlation=ids,
                idempotency_key=f"k{next(keys)}",
                dry_run=dry_run,
                text_diff=text_diff,
                payload={"mode": "append", "content": [{"type": "paragraph", "text": "Appended."}]},
            )

        kinds = {
            "dry run with textDiff": (True, True),
            "dry run without (the check)": (True, False),
            "write": (False, True),
        }
        timings: dict[str, list[float]] = {name: [] for name in kinds}
        try:
            for round_ in range(rounds + 3):
                for name, (dry_run, text_diff) in kinds.items():
                    started = time.perf_counter()
                    await kernel.execute(save(dry_run, text_diff))
                    if round_ >= 3:  # after a warm-up
                        timings[name].append(time.perf_counter() - started)
        finally:
            await kernel.aclose()
    return {name: _stats(values) for name, values in timings.items()}


def _stats(values: list[float]) -> dict[str, float]:
    ms = sorted(value * 1000 for value in values)
    return {"median_ms": round(statistics.median(ms), 3), "p90_ms": round(ms[int(len(ms) * 0.9) - 1], 3)}


async def main(blocks: int) -> dict[str, Any]:
    write = await measure(blocks, "write", ROUNDS)
    handle = await measure(blocks, "handle", ROUNDS)
    ratios = {
        name: round(handle[name]["median_ms"] / write[name]["median_ms"], 2)
        for name in write
        if name in handle
    }
    plans = await plan_costs(blocks, ROUNDS)
    return {"blocks": blocks, "write": write, "handle": handle, "handle_over_write": ratios, "plan": plans}


if __name__ == "__main__":
    print(json.dumps(anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 1000), indent=2))
