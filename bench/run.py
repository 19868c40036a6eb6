"""`python -m bench [--quick]`: mnote-mcp against the floor (an echo server on the same SDK) and the
official Node reference server (server-memory), in one run, targets interleaved (A B C A B C ...),
medians reported. Writes bench/results/latest.json and latest.png, prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import platform
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import fixtures
from bench.fixtures import ACTOR, SCALING, WORKSPACE, page_id
from bench.history import block_ops_suite, history_suite
from bench.measure import (
    checked,
    cpu_per_call,
    in_flight,
    median,
    percentiles,
    sequential,
    without_call_limits,
)
from bench.rawclient import HttpPeer, StdioPeer, cold_start
from bench.report import plot, save, table
from bench.search import search_suite
from bench.search import targets as search_targets
from bench.targets import ROOT, Target, echo, echo_text, memory, mnote

TOKEN = "bench-token"


class Plan:
    """How much each suite measures. `--quick` is CI's smoke run: every suite and table, few samples.

    Its cost is mostly server starts (about a CPU second each), so the quick plan starts as few as it
    can: the stdio suite's cold start is each target's own first start (no extra starts, no untimed one
    to fill the bytecode cache first), the SDK client suite runs on `sdk_targets` alone, the scaling
    suite skips its warm-up call per op and size, and the validation cost reuses the probe's read.
    """

    def __init__(self, quick: bool) -> None:
        self.quick = quick
        self.cold_rounds = 0 if quick else 10  # 0: the suite's own first start of each target
        self.warm_calls = 10 if quick else 30
        self.rounds = 1 if quick else 5
        self.calls = 20 if quick else 300
        self.throughput_calls = 96 if quick else 3200
        # server CPU per call comes in clock ticks (10 ms): enough calls for several
        self.cpu_calls = 100 if quick else 2 * self.calls
        self.sdk_calls = 15 if quick else 200
        self.sdk_targets: tuple[str, ...] | None = ("echo", "mnote") if quick else None  # None: every one
        self.scaling_warm = not quick
        self.scaling_rounds = 1 if quick else 7
        self.scaling_calls = {100: 1, 1_000: 1, 10_000: 1} if quick else {100: 6, 1_000: 3, 10_000: 1}


async def spawn(target: Target) -> StdioPeer:
    peer = await StdioPeer.spawn(target.argv, target.env, str(target.cwd))
    await peer.initialize()
    await peer.request("tools/list")
    return peer


def call_of(peer: StdioPeer | HttpPeer, spec: tuple[str, Any]) -> Any:
    tool, args = spec
    return lambda n: checked(peer.call(tool, args(n)))


async def stdio_suite(
    plan: Plan, targets: list[Target], samples: dict[str, dict[str, list[float]]]
) -> dict[str, Any]:
    cold: dict[str, list[float]] = {t.name: [] for t in targets}
    if plan.cold_rounds:
        for target in targets:  # untimed: fills the bytecode cache (`targets.PYCACHE`) and the page cache
            await cold_start(target.argv, target.env, str(target.cwd))
    for _ in range(plan.cold_rounds):
        for target in targets:
            cold[target.name].append(await cold_start(target.argv, target.env, str(target.cwd)))
    peers: dict[str, StdioPeer] = {}
    for target in targets:
        started = time.perf_counter()
        peers[target.name] = await spawn(target)
        if not plan.cold_rounds:  # the quick plan's cold start: this first one (what `cold_start` times)
            cold[target.name].append(time.perf_counter() - started)
    try:
        for target in targets:  # warm up: first calls compile, cache, page in
            await sequential(call_of(peers[target.name], target.read), plan.warm_calls)
            await sequential(call_of(peers[target.name], target.write), plan.warm_calls)
        for target in targets:
            samples[target.name] = {"read": [], "write": []}
        for _ in range(plan.rounds):
            for target in targets:
                peer = peers[target.name]
                samples[target.name]["read"] += await sequential(call_of(peer, target.read), plan.calls)
                samples[target.name]["write"] += await sequential(call_of(peer, target.write), plan.calls)
        throughput: dict[str, list[float]] = {t.name: [] for t in targets}
        throughput_write: dict[str, list[float]] = {t.name: [] for t in targets}
        for _ in range(max(1, plan.rounds // 2)):
            for target in targets:
                throughput[target.name].append(
                    await in_flight(call_of(peers[target.name], target.read), plan.throughput_calls)
                )
                throughput_write[target.name].append(
                    await in_flight(call_of(peers[target.name], target.write), plan.throughput_calls)
                )
        out: dict[str, Any] = {}
        for target in targets:
            peer = peers[target.name]
            out[target.name] = {
                "cold_start_ms": median(cold[target.name]) * 1e3,
                "read": percentiles(samples[target.name]["read"]),
                "write": percentiles(samples[target.name]["write"]),
                "throughput": median(throughput[target.name]),
                "throughput_write": median(throughput_write[target.name]),
                "cpu_read_us": await cpu_per_call(peer, *target.read, plan.cpu_calls),
                "cpu_write_us": await cpu_per_call(peer, *target.write, plan.cpu_calls),
            }
        return out
    finally:
        for peer in peers.values():
            await peer.close()


def sdk_call(client: Any, spec: tuple[str, Any]) -> Any:
    tool, args = spec
    return lambda n: client.call_tool(tool, args(n))


async def sdk_suite(plan: Plan, targets: list[Target]) -> dict[str, Any]:
    from contextlib import AsyncExitStack

    from mcp import Client, StdioServerParameters

    if plan.sdk_targets is not None:
        targets = [t for t in targets if t.name in plan.sdk_targets]
    async with AsyncExitStack() as stack:
        clients = {}
        for target in targets:
            params = StdioServerParameters(
                command=target.argv[0],
                args=target.argv[1:],
                env={**os.environ, **target.env},
                cwd=str(target.cwd),
            )
            client = await stack.enter_async_context(Client(params, mode="legacy", read_timeout_seconds=60))
            await client.list_tools()
            clients[target.name] = client
        reads: dict[str, list[float]] = {t.name: [] for t in targets}
        writes: dict[str, list[float]] = {t.name: [] for t in targets}
        for _ in range(plan.rounds):
            for target in targets:
                client = clients[target.name]
                reads[target.name] += await sequential(sdk_call(client, target.read), plan.sdk_calls)
                writes[target.name] += await sequential(sdk_call(client, target.write), plan.sdk_calls)
        return {
            t.name: {"read": percentiles(reads[t.name]), "write": percentiles(writes[t.name])}
            for t in targets
        }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _wait_for_port(port: int, process: asyncio.subprocess.Process, within: float = 30) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if process.returncode is not None:
            raise RuntimeError("the HTTP server exited at start")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


async def http_suite(plan: Plan, db: Path) -> dict[str, Any]:
    """mnote (stateful sessions, as the echo's SDK app, with a bearer token) and mnote --stateless."""
    quiet: dict[str, Any] = {
        "stdout": asyncio.subprocess.DEVNULL,
        "stderr": asyncio.subprocess.DEVNULL,
        "cwd": ROOT,
    }
    mnote_argv = [
        sys.executable,
        "-m",
        "mnote_mcp",
        "serve",
        "--transport",
        "http",
        "--db",
        str(db),
        "--actor",
        ACTOR,
    ]
    commands = {
        "mnote": [*mnote_argv, "--port"],
        "mnote --stateless": [*mnote_argv, "--stateless", "--port"],
        "echo": [sys.executable, str(ROOT / "bench" / "echo_server.py"), "http"],
    }
    ports = {name: _free_port() for name in commands}
    servers = {
        name: await asyncio.create_subprocess_exec(
            *argv, str(ports[name]), env={**os.environ, "MNOTE_TOKEN": TOKEN}, **quiet
        )
        for name, argv in commands.items()
    }
    try:
        for name, process in servers.items():
            await _wait_for_port(ports[name], process)
        auth = {"Authorization": f"Bearer {TOKEN}"}
        peers = {
            name: HttpPeer(f"http://127.0.0.1:{ports[name]}/mcp", auth if name.startswith("mnote") else None)
            for name in commands
        }
        calls = {name: (mnote(db).read, mnote(db).write) for name in commands}
        calls["echo"] = (echo().read, echo().write)
        for peer in peers.values():
            await peer.initialize()
        samples: dict[str, dict[str, list[float]]] = {
            name: {"read": [], "write": [], "tp": []} for name in peers
        }
        for name, peer in peers.items():
            await sequential(call_of(peer, calls[name][0]), 20)
        for _ in range(plan.rounds):
            for name, peer in peers.items():
                read, write = calls[name]
                samples[name]["read"] += await sequential(call_of(peer, read), plan.calls // 2)
                samples[name]["write"] += await sequential(call_of(peer, write), plan.calls // 2)
        for _ in range(max(1, plan.rounds // 2)):
            for name, peer in peers.items():
                samples[name]["tp"].append(
                    await in_flight(call_of(peer, calls[name][0]), plan.throughput_calls // 2)
                )
        for peer in peers.values():
            await peer.close()
        return {
            name: {
                "read": percentiles(s["read"]),
                "write": percentiles(s["write"]),
                "throughput": median(s["tp"]),
            }
            for name, s in samples.items()
        }
    finally:
        for process in servers.values():
            process.terminate()
            await asyncio.wait_for(process.wait(), 20)


BLOCK_OPS = ("block.update", "block.insert", "block.delete", "block.move", "page.get one block")


async def scaling_suite(plan: Plan, db: Path, baseline: Path | None = None) -> dict[str, Any]:
    """Time per call on pages of 100, 1,000 and 10,000 blocks, the sizes interleaved round by round.

    Whole-page calls (get, dry-run and real replace) and the precise ones (a one-block update, insert,
    delete and move, a one-block read by `blockIds`). Inserts and deletes alternate (the page keeps its
    size), moves go back and forth. With `baseline`, the same calls on the earlier release, each op
    right after the same op on this one.
    """
    peers = {"mnote": await spawn(mnote(db))}
    if baseline is not None:
        peers["mnote-baseline"] = await spawn(mnote(baseline_store(db), baseline))
    unique = iter(range(10**9))
    bodies = {size: fixtures.blocks(size) for size in SCALING}

    def content(size: int) -> list[dict[str, Any]]:
        base = bodies[size]
        return [base[0], dict(base[1], text=f"changed {next(unique)}"), *base[2:]]

    def write(extra: dict[str, Any]) -> dict[str, Any]:
        return {**extra, "idempotencyKey": f"op_{next(unique)}", "dryRun": False}

    inserted: dict[tuple[str, int], list[str]] = {}

    def insert(name: str, page: dict[str, Any], size: int) -> dict[str, Any]:
        fresh = f"x{next(unique)}"
        inserted.setdefault((name, size), []).append(fresh)
        block = {"id": fresh, "type": "paragraph", "text": "inserted"}
        return write({**page, "blocks": [block], "afterBlockId": "b5"})

    def delete(name: str, page: dict[str, Any], size: int) -> dict[str, Any]:
        return write({**page, "blockIds": [inserted[(name, size)].pop()]})

    moves = itertools.cycle(["b7", "b4"])

    def specs(size: int, name: str = "mnote") -> dict[str, tuple[str, Any]]:
        doc = page_id(size)
        page = {"workspaceId": WORKSPACE, "documentId": doc}
        return {
            "page.get": ("mnote.page.get", lambda n: page),
            "page.save dryRun replace": (
                "mnote.page.save",
                lambda n: {**page, "content": content(size), "idempotencyKey": "plan", "dryRun": True},
            ),
            "page.save replace": (
                "mnote.page.save",
                lambda n: {
                    **page,
                    "content": content(size),
                    "idempotencyKey": f"save_{next(unique)}",
                    "dryRun": False,
                },
            ),
            "block.update": (
                "mnote.block.update",
                lambda n: write({**page, "blockId": "b5", "text": f"updated {next(unique)}"}),
            ),
            "block.insert": ("mnote.block.insert", lambda n: insert(name, page, size)),
            "block.delete": ("mnote.block.delete", lambda n: delete(name, page, size)),
            "block.move": (
                "mnote.block.move",
                lambda n: write({**page, "blockId": "b5", "afterBlockId": next(moves)}),
            ),
            "page.get one block": ("mnote.page.get", lambda n: {**page, "blockIds": ["b5"]}),
        }

    ops = list(specs(100))
    samples: dict[str, dict[str, dict[int, list[float]]]] = {
        name: {op: {size: [] for size in SCALING} for op in ops} for name in peers
    }
    try:
        for name, peer in peers.items():  # warm every path once
            for size in SCALING if plan.scaling_warm else ():
                for spec in specs(size, name).values():
                    await sequential(call_of(peer, spec), 1)
        for _ in range(plan.scaling_rounds):
            for size in SCALING:
                for op in ops:
                    for name, peer in peers.items():
                        calls = plan.scaling_calls[size] * (3 if op in BLOCK_OPS else 1)
                        spec = specs(size, name)[op]
                        samples[name][op][size] += await sequential(call_of(peer, spec), calls)
    finally:
        for peer in peers.values():
            await peer.close()
    out: dict[str, Any] = {"sizes": list(SCALING)}
    for name, by_op in samples.items():
        ms = {op: [median(by_size[size]) * 1e3 for size in SCALING] for op, by_size in by_op.items()}
        key = "ms" if name == "mnote" else "baseline_ms"
        out[key] = ms
    out["ratio"] = {op: row[2] / row[1] for op, row in out["ms"].items() if op not in BLOCK_OPS}
    out["precise_ratio"] = {op: out["ms"][op][2] / out["ms"][op][0] for op in BLOCK_OPS}
    return out


def baseline_store(db: Path) -> Path:
    return db.with_name("baseline.db")


def seed_baseline(db: Path, baseline: Path, sizes: tuple[int, ...]) -> None:
    """The earlier release's own store, seeded by its own code (its schema, its fixture loader)."""
    import subprocess

    code = f"from pathlib import Path; from bench.fixtures import seed_mnote; seed_mnote(Path({str(db)!r}), {sizes!r})"
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        cwd=baseline,
        env={**os.environ, "PYTHONPATH": str(baseline)},
    )


async def validation_cost(db: Path, result: dict[str, Any] | None = None) -> float:
    """Microseconds the SDK client spends validating one read's structuredContent (its own validator):
    of `result` if given (a read answered earlier), else of a read from a server started for it."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    from mnote_mcp.vocabulary.envelope import OUTPUT_SCHEMA

    if result is None:
        peer = await spawn(mnote(db))
        try:
            result = await call_of(peer, mnote(db).read)(0)
        finally:
            await peer.close()
    validator = Draft202012Validator(OUTPUT_SCHEMA)
    envelope = result["structuredContent"]
    started, n = time.perf_counter(), 2000
    for _ in range(n):
        best_match(validator.iter_errors(envelope))
    return (time.perf_counter() - started) / n * 1e6


def evaluate(results: dict[str, Any]) -> list[dict[str, Any]]:
    stdio, http = results["stdio"], results.get("http") or {}
    m, e = stdio["mnote"], stdio["echo"]
    mem = stdio.get("server-memory")
    own = stdio.get("echo-mnote-io")
    checks: list[tuple[str, float, str, float, bool]] = []
    # issue 14: the per-call floor
    if mem:
        checks += [
            (
                "14: read 32 in flight mnote/server-memory",
                m["throughput"] / mem["throughput"],
                ">= 1.0",
                1.0,
                False,
            ),
            (
                "14: write 32 in flight mnote/server-memory",
                m["throughput_write"] / mem["throughput_write"],
                ">= 1.0",
                1.0,
                False,
            ),
            (
                "14: read p50 mnote/server-memory (raw)",
                m["read"]["p50"] / mem["read"]["p50"],
                "<= 1.0",
                1.0,
                True,
            ),
            (
                "14: write p50 mnote/server-memory (raw)",
                m["write"]["p50"] / mem["write"]["p50"],
                "<= 0.7",
                0.7,
                True,
            ),
        ]
    if own:
        checks += [
            (
                "14: server CPU per read mnote/echo-mnote-io",
                m["cpu_read_us"] / own["cpu_read_us"],
                "<= 1.2",
                1.2,
                True,
            ),
            (
                "14: server CPU per read echo-mnote-io/echo (transport)",
                own["cpu_read_us"] / e["cpu_read_us"],
                "< 1.0",
                1.0,
                True,
            ),
        ]
    checks.append(("14: cold start mnote/echo", m["cold_start_ms"] / e["cold_start_ms"], "<= 0.9", 0.9, True))
    checks += [
        ("read p50 mnote/echo (raw, stdio)", m["read"]["p50"] / e["read"]["p50"], "<= 1.2", 1.2, True),
        ("write p50 mnote/echo (raw, stdio)", m["write"]["p50"] / e["write"]["p50"], "<= 1.5", 1.5, True),
        ("cold start mnote/echo", m["cold_start_ms"] / e["cold_start_ms"], "<= 1.0", 1.0, True),
        (
            "throughput 32 in flight mnote/echo (stdio)",
            m["throughput"] / e["throughput"],
            ">= 0.8",
            0.8,
            False,
        ),
    ]
    if http:
        checks.append(
            (
                "throughput 32 in flight mnote/echo (HTTP)",
                http["mnote"]["throughput"] / http["echo"]["throughput"],
                ">= 0.8",
                0.8,
                False,
            )
        )
    scaling = results.get("scaling") or {"ratio": {}, "precise_ratio": {}}
    for op, ratio in scaling["ratio"].items():
        checks.append((f"scaling t(10k)/t(1k) {op}", ratio, "<= 12", 12.0, True))
    for op, ratio in scaling["precise_ratio"].items():
        checks.append((f"precise t(10k)/t(100) {op}", ratio, "<= 2", 2.0, True))
    old = scaling.get("baseline_ms")
    if old:
        for op in ("page.get", "page.save replace"):
            checks.append(
                (f"{op} at 10k: this/baseline", scaling["ms"][op][2] / old[op][2], "<= 1.0", 1.0, True)
            )
        b = stdio["mnote-baseline"]
        checks += [
            (
                "read p50 50 blocks: this/baseline (raw, stdio)",
                m["read"]["p50"] / b["read"]["p50"],
                "<= 1.0",
                1.0,
                True,
            ),
            (
                "write p50 50 blocks: this/baseline (raw, stdio)",
                m["write"]["p50"] / b["write"]["p50"],
                "<= 1.0",
                1.0,
                True,
            ),
        ]
    history = results.get("history")
    checks += (
        []
        if not history
        else [
            (
                f"history first page, {history['revisions']} revisions (ms)",
                history["history_first_page_ms"],
                "<= 5",
                5.0,
                True,
            ),
            (
                "revert of a 50-write run, 1,000 blocks (ms)",
                history["revert_run_of_50_ms"],
                "<= 50",
                50.0,
                True,
            ),
        ]
    )
    ops = (results.get("block_ops") or {}).get("ms", {})
    checks += [
        (f"{op} in process: t(10k)/t(100)", row[-1] / row[0], "<= 2", 2.0, True) for op, row in ops.items()
    ]
    if results.get("validation"):
        checks.append(
            ("outputSchema validation / SDK read", results["validation"]["share"], "< 0.10", 0.10, True)
        )
    if results.get("search"):
        checks += search_targets(results["search"])
    return [
        {"name": name, "value": value, "target": text, "met": value <= bound if upper else value >= bound}
        for name, value, text, bound, upper in checks
    ]


SUITES = ("stdio", "sdk", "http", "scaling", "history", "block_ops", "search")


async def run(
    quick: bool, out: Path, baseline: Path | None = None, suites: tuple[str, ...] = SUITES
) -> dict[str, Any]:
    plan = Plan(quick)
    with tempfile.TemporaryDirectory(prefix="mnote-bench-") as tmp:
        db = Path(tmp) / "bench.db"
        fixtures.seed_mnote(db, (50, *SCALING))
        if baseline is not None:
            seed_baseline(baseline_store(db), baseline, (50, *SCALING))
        probe = await spawn(mnote(db))
        answer = await call_of(probe, mnote(db).read)(0)
        await probe.close()
        size = len(answer["content"][0]["text"])
        memory_data = Path(tmp) / "memory.jsonl"
        fixtures.seed_memory(memory_data, size)
        candidates = (
            echo(),
            echo(transport="mnote"),
            echo_text(size),
            memory(memory_data),
            mnote(db),
            mnote(db, None, "--stdio-transport", "sdk"),
        )
        targets = [t for t in candidates if t is not None]
        if baseline is not None:
            targets.append(mnote(baseline_store(db), baseline))
        samples: dict[str, dict[str, list[float]]] = {}
        results: dict[str, Any] = {
            "mode": "quick" if quick else "full",
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "read_answer_chars": size,
        }
        results["stdio"] = await stdio_suite(plan, targets, samples)
        if "sdk" in suites:
            results["sdk"] = await sdk_suite(plan, targets)
        if "http" in suites:
            results["http"] = await http_suite(plan, db)
        if "scaling" in suites:
            results["scaling"] = await scaling_suite(plan, db, baseline)
        if "history" in suites:
            results["history"] = await history_suite(quick)
        if "block_ops" in suites:
            results["block_ops"] = await block_ops_suite(quick)
        if "search" in suites:
            results["search"] = await search_suite(quick)
        if baseline is not None:
            results["baseline"] = str(baseline)
        if "sdk" in suites:
            validation_us = await validation_cost(db, answer if quick else None)
            results["validation"] = {
                "us": validation_us,
                "share": validation_us / results["sdk"]["mnote"]["read"]["p50"],
            }
        results["targets"] = evaluate(results)
        save(results, out)
        plot(results, samples, out)
    return results


def main(argv: list[str] | None = None) -> int:
    without_call_limits()
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smoke run of under a minute (CI)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="also measure an earlier release from this source tree (e.g. `git archive <ref> | tar -x -C DIR`),"
        " side by side",
    )
    parser.add_argument(
        "--suites",
        default=",".join(SUITES),
        help="which suites to run, comma-separated (stdio always runs): " + ",".join(SUITES),
    )
    args = parser.parse_args(argv)
    suites = tuple(name.strip() for name in args.suites.split(",") if name.strip())
    unknown = set(suites) - set(SUITES)
    if unknown:
        parser.error(f"unknown suites: {', '.join(sorted(unknown))}")
    started = time.perf_counter()
    results = asyncio.run(run(args.quick, args.out, args.baseline, suites))
    print(table(results))
    print(f"\n{time.perf_counter() - started:.0f} s; results in {args.out}/latest.json")
    return 0
