"""`python -m bench.soak [--minutes 10] [--baseline DIR] [--arena-max N] [--quick]`: burst-then-idle cycles
against real `mnote-mcp serve --transport http` processes, their open files and resident memory sampled
over time.

A cycle is a burst of calls in flight at once on a store of `--pages` pages of 50 blocks (searches,
which run on worker threads, with page reads and writes among them), then an idle pause longer than anyio's ten seconds after which a worker
thread ends, so the next burst runs on new threads. Issue 26 found that every new thread opened a
SQLite connection that was never closed: a ten-minute soak grew the server from 32 to 94 files and
from 88 to 108 MB, linearly. With `--baseline DIR` (a checkout of an earlier commit) the same cycles
drive a server of that code too, side by side, at the same moments (each on a store of its own). With
`--arena-max N` a server of this code with `MALLOC_ARENA_MAX=N` runs beside them: glibc gives each
thread that allocates its own arena (up to eight per core) and keeps what is freed in it, so resident
memory that grows there while every count of what is in use stays flat is the allocator's, not a leak
(issue 30).

Prints a table (files and MB at the start, after the first cycle, at the end, and the growth per
cycle after the first) and writes bench/results/soak.json. `--quick`: two cycles, a smoke run (not
part of `python -m bench --quick`: even two cycles wait out anyio's idle time twice).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2

from bench.attacks import rss_mb
from bench.fixtures import ACTOR
from bench.measure import without_call_limits
from bench.rawclient import HttpPeer
from bench.search import make_store, queries
from bench.targets import ROOT
from tests.support.flood import open_fds
from tests.support.helpers import IDS, envelope_in

IDLE_SECONDS = 11.0  # anyio ends a worker thread idle for ten seconds
QUERIES = [query for query in queries().values() if query]
PAGE = {"workspaceId": "ws_0", "documentId": "doc_0"}


@dataclass
class Server:
    name: str
    process: subprocess.Popen[bytes]
    url: str
    samples: list[dict[str, float]] = field(default_factory=list)
    answers: Counter[str] = field(default_factory=Counter)

    def sample(self, cycle: int, started: float) -> None:
        pid = self.process.pid
        self.samples.append(
            {
                "cycle": cycle,
                "seconds": round(time.monotonic() - started, 1),
                "fds": open_fds(pid),
                "rss_mb": rss_mb(pid),
            }
        )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve(
    name: str, db: Path, log: Path, source: Path | None, extra_env: dict[str, str] | None = None
) -> Iterator[Server]:
    """`mnote-mcp serve` over HTTP on `db`, from this tree or from `source` (`python -m` puts the
    working directory first on sys.path), with `extra_env` in its environment."""
    port = _free_port()
    env = {**os.environ, **({"PYTHONPATH": str(source)} if source else {}), **(extra_env or {})}
    argv = [sys.executable, "-m", "mnote_mcp", "serve", "--transport", "http", "--port", str(port)]
    argv += ["--db", str(db), "--actor", ACTOR, "--unsafe-no-auth", "--log-level", "warning"]
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            argv,
            cwd=source or ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx2.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start: {log.read_text()[-2000:]}")
            time.sleep(0.1)
        yield Server(name, process, url)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _label(answer: dict[str, Any]) -> str:
    result = answer.get("result")
    if not isinstance(result, dict) or not (result.get("content") or result.get("structuredContent")):
        return "protocol_error"
    envelope = envelope_in(result)
    return "ok" if envelope.get("ok") else str(envelope["error"]["code"])


async def burst(peer: HttpPeer, server: Server, cycle: int, size: int) -> None:
    """`size` calls at once: searches (worker threads), with a page read and a write every fourth."""

    async def one(n: int) -> None:
        if n % 4 == 1:
            answer = await peer.call("mnote.page.get", {**PAGE, **IDS})
        elif n % 4 == 3:
            key = f"soak_{cycle}_{n}"
            arguments: dict[str, Any] = {
                **PAGE,
                **IDS,
                "content": key,
                "idempotencyKey": key,
                "dryRun": False,
            }
            answer = await peer.call("mnote.artifact.create_ai_note", arguments)
        else:
            answer = await peer.call("mnote.page.search", {"query": QUERIES[n % len(QUERIES)], **IDS})
        server.answers[_label(answer)] += 1

    await asyncio.gather(*(one(n) for n in range(size)))


async def soak(servers: list[Server], cycles: int, idle: float, size: int) -> None:
    peers = [HttpPeer(f"{server.url}/mcp") for server in servers]
    try:
        for peer in peers:
            await peer.initialize()
        started = time.monotonic()
        for server in servers:
            server.sample(0, started)
        for cycle in range(1, cycles + 1):
            await asyncio.gather(
                *(burst(peer, s, cycle, size) for peer, s in zip(peers, servers, strict=True))
            )
            await asyncio.sleep(idle)  # the burst's worker threads end after ten idle seconds
            for server in servers:
                server.sample(cycle, started)
            print(
                f"cycle {cycle}/{cycles}: "
                + ", ".join(
                    f"{s.name} {s.samples[-1]['fds']} files {s.samples[-1]['rss_mb']:.0f} MB" for s in servers
                ),
                file=sys.stderr,
                flush=True,
            )
    finally:
        for peer in peers:
            await peer.close()


def summary(server: Server) -> dict[str, Any]:
    first, warm, last = server.samples[0], server.samples[min(1, len(server.samples) - 1)], server.samples[-1]
    later = max(1, len(server.samples) - 2)  # cycles after the first
    return {
        "fds": {"start": first["fds"], "after_first_cycle": warm["fds"], "end": last["fds"]},
        "rss_mb": {
            "start": round(first["rss_mb"], 1),
            "after_first_cycle": round(warm["rss_mb"], 1),
            "end": round(last["rss_mb"], 1),
        },
        "fds_per_cycle_after_first": round((last["fds"] - warm["fds"]) / later, 2),
        "rss_mb_per_cycle_after_first": round((last["rss_mb"] - warm["rss_mb"]) / later, 2),
        "answers": dict(server.answers),
        "samples": server.samples,
    }


def main() -> None:
    without_call_limits()
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long to soak (default 10)")
    parser.add_argument("--idle", type=float, default=IDLE_SECONDS, help="pause after each burst, seconds")
    parser.add_argument(
        "--burst", type=int, default=24, help="calls in flight at once per burst (default 24)"
    )
    parser.add_argument(
        "--pages", type=int, default=2_000, help="pages of 50 blocks in the store (default 2,000)"
    )
    parser.add_argument("--baseline", type=Path, help="a checkout of earlier code, soaked side by side")
    parser.add_argument(
        "--arena-max", type=int, help="also soak this code with MALLOC_ARENA_MAX=N, side by side"
    )
    parser.add_argument("--quick", action="store_true", help="two cycles: a smoke run")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "soak.json")
    args = parser.parse_args()
    cycles = 2 if args.quick else max(2, round(args.minutes * 60 / (args.idle + 1)))
    with tempfile.TemporaryDirectory(prefix="mnote-soak-") as tmp, ExitStack() as stack:
        root = Path(tmp)
        store = root / "seed.db"
        facts = make_store(store, 400 if args.quick else args.pages)
        sources: list[tuple[str, Path | None, dict[str, str]]] = [("mnote", None, {})]
        if args.baseline is not None:
            sources.append(("mnote-baseline", args.baseline.resolve(), {}))
        if args.arena_max is not None:
            sources.append((f"arena-max-{args.arena_max}", None, {"MALLOC_ARENA_MAX": str(args.arena_max)}))
        servers = []
        for name, source, extra_env in sources:
            db = root / f"{name}.db"
            shutil.copy(store, db)
            servers.append(stack.enter_context(serve(name, db, root / f"{name}.log", source, extra_env)))
        started = time.monotonic()
        asyncio.run(soak(servers, cycles, args.idle, args.burst))
        results = {
            "cycles": cycles,
            "idle_seconds": args.idle,
            "burst": args.burst,
            "pages": facts["pages"],
            "blocks": facts["blocks"],
            "seconds": round(time.monotonic() - started, 1),
            "load": os.getloadavg(),
            "servers": {server.name: summary(server) for server in servers},
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(
        f"{cycles} cycles of {args.burst} calls then {args.idle:g} s idle, {results['seconds']:.0f} s,"
        f" {facts['blocks']:,} blocks, load {' '.join(f'{x:.2f}' for x in results['load'])}"
    )
    print(
        f"{'server':<16} {'files: start':>12} {'1st':>5} {'end':>5} {'/cycle':>7}   MB: start   1st   end  /cycle"
    )
    for name, got in results["servers"].items():
        fds, rss = got["fds"], got["rss_mb"]
        print(
            f"{name:<16} {fds['start']:>12} {fds['after_first_cycle']:>5} {fds['end']:>5}"
            f" {got['fds_per_cycle_after_first']:>7}   {rss['start']:>9} {rss['after_first_cycle']:>5}"
            f" {rss['end']:>5} {got['rss_mb_per_cycle_after_first']:>7}   answers {got['answers']}"
        )


if __name__ == "__main__":
    main()
