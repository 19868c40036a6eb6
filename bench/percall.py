"""`python -m bench.percall`: what one call costs the server, the figure noise moves least.

For each stdio target (the SDK echo, the echo through mnote's transport, mnote, mnote on the SDK's
transport), interleaved round by round, sequentially and with 32 calls in flight: server CPU per call
(user + system, all threads, from /proc), voluntary and involuntary context switches per call (summed
over the server's threads), and calls per second. CPU time and context switches count what the server
did, not how long it waited for a core, so they hold on a shared machine where latencies do not.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import fixtures
from bench.measure import checked, cpu_seconds, in_flight, without_call_limits
from bench.rawclient import StdioPeer
from bench.targets import Target, echo, mnote


def switches(pid: int) -> tuple[int, int]:
    voluntary = involuntary = 0
    for status in glob.glob(f"/proc/{pid}/task/*/status"):
        try:
            with open(status, encoding="ascii") as lines:
                for line in lines:
                    if line.startswith("voluntary_ctxt_switches"):
                        voluntary += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches"):
                        involuntary += int(line.split()[1])
        except OSError:  # a thread that ended meanwhile
            continue
    return voluntary, involuntary


async def measure(target: Target, calls: int, width: int) -> dict[str, float]:
    peer = await StdioPeer.spawn(target.argv, target.env, str(target.cwd))
    try:
        await peer.initialize()
        tool, args = target.read
        for n in range(50):
            await checked(peer.call(tool, args(n)))
        pid = peer.process.pid
        cpu, (vol, invol), started = cpu_seconds(pid), switches(pid), time.perf_counter()
        await in_flight(lambda n: checked(peer.call(tool, args(n))), calls, width)
        elapsed = time.perf_counter() - started
        vol2, invol2 = switches(pid)
        return {
            "cpu_us": (cpu_seconds(pid) - cpu) / calls * 1e6,
            "per_s": calls / elapsed,
            "voluntary": (vol2 - vol) / calls,
            "involuntary": (invol2 - invol) / calls,
        }
    finally:
        await peer.close()


async def run(rounds: int, calls: int) -> dict[str, dict[int, list[dict[str, float]]]]:
    with tempfile.TemporaryDirectory(prefix="mnote-percall-") as tmp:
        db = Path(tmp) / "bench.db"
        fixtures.seed_mnote(db, (50,))
        targets = [echo(), echo(transport="mnote"), mnote(db), mnote(db, None, "--stdio-transport", "sdk")]
        out: dict[str, dict[int, list[dict[str, float]]]] = {t.name: {1: [], 32: []} for t in targets}
        for _ in range(rounds):
            for width in (1, 32):
                for target in targets:
                    out[target.name][width].append(await measure(target, calls, width))
        return out


def main(argv: list[str] | None = None) -> int:
    without_call_limits()
    parser = argparse.ArgumentParser(prog="python -m bench.percall", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=600)
    args = parser.parse_args(argv)
    results = asyncio.run(run(args.rounds, args.calls))
    print(f"medians of {args.rounds} rounds of {args.calls} reads (50-block page), targets interleaved")
    print(
        f"{'target':30} {'width':>5} {'cpu us/call':>12} {'calls/s':>8} {'vol cs/call':>12} {'invol cs/call':>14}"
    )
    for name, widths in results.items():
        for width, runs in widths.items():
            med = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
            print(
                f"{name:30} {width:5} {med['cpu_us']:12.0f} {med['per_s']:8.0f} "
                f"{med['voluntary']:12.2f} {med['involuntary']:14.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
