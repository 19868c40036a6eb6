"""Measurements: sequential latency, throughput with calls in flight, server CPU per call, cold start."""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from bench.rawclient import StdioPeer
from bench.targets import Args

_TICKS = os.sysconf("SC_CLK_TCK")


def percentiles(samples: Sequence[float]) -> dict[str, float]:
    """p50/p90/p99 in microseconds."""
    if not samples:
        return {}
    ordered = sorted(samples)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e6

    return {"p50": at(0.50), "p90": at(0.90), "p99": at(0.99), "n": float(len(ordered))}


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


async def sequential(call: Callable[[int], Awaitable[Any]], count: int) -> list[float]:
    samples = []
    for n in range(count):
        started = time.perf_counter()
        await call(n)
        samples.append(time.perf_counter() - started)
    return samples


async def in_flight(call: Callable[[int], Awaitable[Any]], total: int, width: int = 32) -> float:
    """Calls per second with `width` calls always outstanding."""
    counter = iter(range(total))

    async def lane() -> None:
        for n in counter:
            await call(n)

    started = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(width)))
    return total / (time.perf_counter() - started)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (from /proc)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


async def cpu_per_call(peer: StdioPeer, tool: str, args: Args, count: int) -> float:
    """Server CPU microseconds per call over `count` calls."""
    before = cpu_seconds(peer.process.pid)
    await sequential(lambda n: checked(peer.call(tool, args(n))), count)
    return (cpu_seconds(peer.process.pid) - before) / count * 1e6


async def checked(answer: Awaitable[dict[str, Any]]) -> dict[str, Any]:
    """A JSON-RPC answer that must be a result, not an error (or the figures would lie)."""
    message = await answer
    if "result" not in message:
        raise RuntimeError(f"call failed: {message.get('error')}")
    result: dict[str, Any] = message["result"]
    if result.get("isError"):
        raise RuntimeError(f"tool failed: {result.get('structuredContent') or result.get('content')}")
    return result


def without_call_limits() -> None:
    """The servers this process starts from now on run without per-actor rates (`MNOTE_NO_CALL_LIMITS`,
    issue 32): a benchmark of what a call costs sends calls as fast as it can, which the rates are there
    to stop. Set in the environment, which a checkout from before the rates ignores. The noisy-neighbour
    and attack benchmarks keep the defaults."""
    os.environ.setdefault("MNOTE_NO_CALL_LIMITS", "1")
