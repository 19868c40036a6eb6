"""Page history and revert, in process (the embedded kernel's port, no MCP): the issue's own terms.

- `mnote.page.history`'s first page of results on a page with 10,000 revisions;
- undoing a run of 50 writes on a 1,000-block page (`page.revert` with `runId`), each round a new run;
- the precise block commands (update, insert, move, delete, and a one-block read) on pages of 100, 1,000
  and 10,000 blocks, interleaved: the kernel's share of the "≤ 2× the 100-block call" target, which the
  stdio rounds of `bench.run` measure through a noisy pipe and a busy machine with single samples.

Both are kernel figures (what the call costs the server before the MCP layers, which add the same
envelope cost as any read or write): time of `LocalKernel.page_history` / `LocalKernel.execute`.
"""

from __future__ import annotations

import itertools
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.fixtures import blocks
from bench.measure import median
from mnote_mcp.kernel.local import LocalKernel
from mnote_mcp.kernel.local.fixtures import load_fixture
from mnote_mcp.kernel.port import Command, CommandName, Correlation, HistoryFilter, HistoryQuery, PageQuery

WS, ACTOR = "ws_history", "history_user"
_keys = itertools.count()
CORRELATION = Correlation("bench_session", "bench_run", "bench_call", "bench_trace")


def _command(page: str, name: str, payload: dict[str, Any], run: str) -> Command:
    return Command(
        name=name,
        workspace_id=WS,
        document_id=page,
        actor_id=ACTOR,
        correlation=Correlation("bench_session", run, f"call_{next(_keys)}", "bench_trace"),
        idempotency_key=f"k{next(_keys)}",
        dry_run=False,
        payload=payload,
    )


async def history_suite(quick: bool) -> dict[str, Any]:
    revisions = 1_000 if quick else 10_000
    rounds = 5 if quick else 20
    with tempfile.TemporaryDirectory(prefix="mnote-bench-history-") as tmp:
        kernel = LocalKernel.open(Path(tmp) / "history.db")
        try:
            load_fixture(
                kernel.store,
                {
                    "workspaces": [
                        {
                            "id": WS,
                            "members": [{"actorId": ACTOR, "role": "editor"}],
                            "pages": [
                                {"id": "long_history", "title": "many revisions", "blocks": blocks(100)},
                                {"id": "doc_1000", "title": "1,000 blocks", "blocks": blocks(1_000)},
                            ],
                        }
                    ]
                },
            )
            for n in range(revisions):
                update = {"blockId": f"b{n % 100}", "text": f"revision {n}"}
                await kernel.execute(
                    _command("long_history", CommandName.PAGE_BLOCK_UPDATE, update, f"run_{n % 7}")
                )
            query = HistoryQuery(WS, "long_history", ACTOR, Correlation("s", "r", "c", "t"))
            filtered = HistoryQuery(
                WS, "long_history", ACTOR, Correlation("s", "r", "c", "t"), HistoryFilter(run_id="run_3")
            )
            first: list[float] = []
            by_run: list[float] = []
            for _ in range(rounds):
                started = time.perf_counter()
                page = await kernel.page_history(query)
                first.append(time.perf_counter() - started)
                started = time.perf_counter()
                await kernel.page_history(filtered)
                by_run.append(time.perf_counter() - started)
            assert len(page["entries"]) == 20 and page["revision"] == revisions + 1
            reverts: list[float] = []
            for round_ in range(max(3, rounds // 4)):
                run = f"agent_run_{round_}"
                for n in range(50):
                    target = f"b{(n * 19) % 1_000}"
                    if n % 10 == 9:
                        payload: dict[str, Any] = {"blockId": target, "afterBlockId": f"b{(n * 7) % 1_000}"}
                        name = CommandName.PAGE_BLOCK_MOVE
                    else:
                        payload, name = (
                            {"blockId": target, "text": f"{run} {n}"},
                            CommandName.PAGE_BLOCK_UPDATE,
                        )
                    await kernel.execute(_command("doc_1000", name, payload, run))
                started = time.perf_counter()
                outcome = await kernel.execute(
                    _command("doc_1000", CommandName.PAGE_REVERT, {"runId": run}, "undo")
                )
                reverts.append(time.perf_counter() - started)
                assert outcome.changed and len(outcome.data["revertedRevisions"]) == 50
        finally:
            await kernel.aclose()
    return {
        "revisions": revisions,
        "history_first_page_ms": median(first) * 1e3,
        "history_by_run_ms": median(by_run) * 1e3,
        "revert_run_of_50_ms": median(reverts) * 1e3,
    }


SIZES = (100, 1_000, 10_000)
BLOCK_OPS = ("update", "insert", "move", "delete", "read one")


def _block_op(op: str, size: int, round_: int) -> tuple[str, dict[str, Any]]:
    middle = f"b{size // 2}"
    if op == "update":
        return CommandName.PAGE_BLOCK_UPDATE, {"blockId": middle, "text": f"round {round_}"}
    if op == "insert":
        block = {"id": f"new_{round_}", "type": "paragraph", "text": "inserted"}
        return CommandName.PAGE_BLOCK_INSERT, {"blocks": [block], "afterBlockId": middle}
    if op == "delete":
        return CommandName.PAGE_BLOCK_DELETE, {"blockIds": [f"new_{round_}"]}
    if round_ % 2:
        return CommandName.PAGE_BLOCK_MOVE, {"blockId": middle, "afterBlockId": f"b{size // 2 - 1}"}
    return CommandName.PAGE_BLOCK_MOVE, {"blockId": middle, "position": "end"}


async def block_ops_suite(quick: bool) -> dict[str, Any]:
    """Median ms per precise command, in process, by page size; sizes interleaved round by round."""
    rounds = 15 if quick else 60
    with tempfile.TemporaryDirectory(prefix="mnote-bench-blockops-") as tmp:
        kernel = LocalKernel.open(Path(tmp) / "blockops.db")
        try:
            pages = [
                {"id": f"page_{size}", "title": f"{size} blocks", "blocks": blocks(size)} for size in SIZES
            ]
            members = [{"actorId": ACTOR, "role": "editor"}]
            load_fixture(kernel.store, {"workspaces": [{"id": WS, "members": members, "pages": pages}]})
            samples: dict[str, list[list[float]]] = {op: [[] for _ in SIZES] for op in BLOCK_OPS}
            for round_ in range(rounds):
                for index, size in enumerate(SIZES):
                    page = f"page_{size}"
                    for op in BLOCK_OPS:
                        started = time.perf_counter()
                        if op == "read one":
                            view = await kernel.get_page(
                                PageQuery(WS, page, ACTOR, CORRELATION, block_ids=(f"b{size // 3}",))
                            )
                            assert len(view["blocks"]) == 1
                        else:
                            name, payload = _block_op(op, size, round_)
                            outcome = await kernel.execute(_command(page, name, payload, "blockops"))
                            assert outcome.changed, (op, size)
                        samples[op][index].append(time.perf_counter() - started)
        finally:
            await kernel.aclose()
    return {
        "sizes": list(SIZES),
        "ms": {op: [median(per_size) * 1e3 for per_size in samples[op]] for op in BLOCK_OPS},
    }
