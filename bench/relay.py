"""`python -m bench.relay`: what a relayed kernel call costs in this process, and the embedded kernel's.

A relay call is timed whole, in one process: `HttpKernel` (request written from the port's types,
the reply checked and read) against the reference runtime's ASGI app (the request checked and read,
the kernel called, the answer written), over httpx2's in-process ASGI transport, so no socket and
no other process adds noise. Beside it, the same calls on the embedded kernel (`StoreKernel`), which
never reads or writes a wire form but the ledger's, and `list_pages` through the `cli:` relay: one
`mnote-mcp runtime cli` process per call, so its start is in the figure. Each figure is the median
of `--rounds` rounds, each the median of `--calls` sequential calls (`--cli-calls` for the `cli:`
relay) in microseconds, and this process's CPU time per call (`cpu`: steadier than wall time on a
shared machine; for the `cli:` relay only the relay's side, not the process it starts).

`--tree DIR` (repeatable) times another checkout instead, each in a fresh interpreter with DIR first on
its path, interleaved round by round (A B A B ...), and prints each tree's medians and their ratio to
the first tree's: how a change moved the figures, measured side by side on the same machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.measure import without_call_limits

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent


async def _timed(
    figures: dict[str, float], name: str, call: Callable[[int], Awaitable[object]], calls: int
) -> None:
    """Median wall microseconds of `calls` sequential calls (after a few to warm up), and CPU
    microseconds per call of this process."""
    for n in range(min(5, calls)):
        await call(-1 - n)
    samples = []
    cpu = time.process_time()
    for n in range(calls):
        started = time.perf_counter()
        await call(n)
        samples.append(time.perf_counter() - started)
    figures[name] = statistics.median(samples) * 1e6
    figures[f"{name} cpu"] = (time.process_time() - cpu) / calls * 1e6


async def _one_round(calls: int, cli_calls: int, fixture: Path) -> dict[str, float]:
    """One round of every figure, for the `mnote_mcp` this interpreter imports."""
    import httpx2

    from mnote_mcp.base.httpguard import ClientLimits
    from mnote_mcp.kernel.databases.stores import open_kernel as open_seeded
    from mnote_mcp.kernel.port import Command, Correlation, PageQuery, PagesQuery
    from mnote_mcp.kernel.relays.cli import CliKernel
    from mnote_mcp.kernel.relays.http import HttpKernel
    from mnote_mcp.runtime.http_app import create_app

    ids = Correlation("s", "r", "c", "trace_bench")
    query = PageQuery("ws_1", "doc_1", "user_editor", ids)
    # `list_pages` takes its query since issue 25's narrowing; before, the actor alone
    listing: Any = PagesQuery("user_editor") if "prefix" in PagesQuery.__dataclass_fields__ else "user_editor"

    def update(n: int, tag: str) -> Command:
        payload = {"blockId": "p_1", "text": f"edit {tag} {n}"}
        return Command("page.block.update", "ws_1", "doc_1", "user_editor", ids, f"{tag}_{n}", False, payload)

    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        local = open_seeded(Path(tmp) / "local.db", seed=fixture)
        served = open_seeded(Path(tmp) / "served.db", seed=fixture)
        limits = ClientLimits(100, 10.0, 32 * 1024 * 1024, 30.0)
        transport = httpx2.ASGITransport(app=create_app(served, limits=limits))
        relay = HttpKernel("http://runtime", transport=transport)
        argv = [sys.executable, "-m", "mnote_mcp", "runtime", "cli", "--db", str(Path(tmp) / "served.db")]
        cli = CliKernel(argv, timeout=60)
        try:
            await _timed(figures, "http relay get_page", lambda n: relay.get_page(query), calls)
            await _timed(figures, "http relay execute", lambda n: relay.execute(update(n, "relay")), calls)
            await _timed(figures, "http relay list_pages", lambda n: relay.list_pages(listing), calls)
            await _timed(figures, "cli relay list_pages", lambda n: cli.list_pages(listing), cli_calls)
            await _timed(figures, "local get_page", lambda n: local.get_page(query), calls)
            await _timed(figures, "local execute", lambda n: local.execute(update(n, "local")), calls)
        finally:
            await relay.aclose()
            await served.aclose()
            await local.aclose()
    return figures


def _worker(calls: int, cli_calls: int, fixture: Path) -> None:
    print(json.dumps(asyncio.run(_one_round(calls, cli_calls, fixture))))


def _median(rounds: list[dict[str, float]]) -> dict[str, float]:
    return {name: statistics.median(r[name] for r in rounds) for name in rounds[0]}


def main(argv: list[str] | None = None) -> int:
    without_call_limits()
    parser = argparse.ArgumentParser(prog="python -m bench.relay", description=__doc__)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cli-calls", type=int, default=10)
    parser.add_argument("--tree", type=Path, action="append", default=[], help="a checkout to time")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--fixture", type=Path, default=ROOT / "tests" / "fixtures" / "workspace.json")
    options = parser.parse_args(argv)
    if options.worker:
        _worker(options.calls, options.cli_calls, options.fixture)
        return 0
    trees = [tree.resolve() for tree in options.tree] or [ROOT]
    rounds: dict[Path, list[dict[str, float]]] = {tree: [] for tree in trees}
    for _ in range(options.rounds):
        for tree in trees:
            env = {**os.environ, "PYTHONPATH": str(tree)}
            argv_ = [sys.executable, str(HERE), "--worker", "--calls", str(options.calls)]
            argv_ += ["--cli-calls", str(options.cli_calls)]
            argv_ += ["--fixture", str(options.fixture)]
            out = subprocess.run(argv_, env=env, cwd=tree, capture_output=True, text=True, check=True)
            rounds[tree].append(json.loads(out.stdout.strip().splitlines()[-1]))
    medians = {tree: _median(samples) for tree, samples in rounds.items()}
    first = medians[trees[0]]
    print(" | ".join(["median µs per call", *(str(tree) for tree in trees)]))
    for name, base in first.items():
        cells = [f"{medians[tree][name]:.1f} ({medians[tree][name] / base:.2f}×)" for tree in trees]
        print(" | ".join([name, *cells]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
