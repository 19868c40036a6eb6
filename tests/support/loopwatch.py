"""How long the event loop was kept from answering: the longest stretch of the loop thread's own work.

A pinger task wakes every few milliseconds and records, for each wake-up, the wall time since the last
one and the CPU time the loop's thread spent in between (`time.thread_time`). A stalled loop is one
busy on one callback: its thread's CPU time grows with the stall. A loaded machine only stretches the
wall time (the thread waits for a core, or for the GIL a worker thread holds, without spending CPU), so
the CPU figure is what a test can bound without flaking, and the wall figure is reported beside it.

While it watches, the heap the test process had before is frozen (`gc.freeze`), as `serve` freezes
the server's once it has started (mnote_mcp/serve.py): a test worker's heap holds every test it ran
before, and a full collection of it (154 ms of loop CPU once, in the hostile-input sweep) is the
worker's cost, not the server's. A collection of what the watched body allocates still counts.
Freezing is two list splices; the `gc.collect()` the sweep ran instead cost 0.13 s a case (17 of its
38 CPU seconds).
"""

from __future__ import annotations

import gc
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio

TICK = 0.005


@dataclass
class LoopWatch:
    longest_cpu: float = 0.0  # the most CPU the loop thread spent between two wake-ups (s)
    longest_wall: float = 0.0  # the longest wall time between two wake-ups (s)
    total_cpu: float = 0.0  # all the CPU the loop thread spent while the body ran (s)
    wakeups: int = 0
    samples: list[float] = field(default_factory=list, repr=False)

    def describe(self) -> str:
        return (
            f"longest loop stall: {self.longest_cpu * 1000:.1f} ms of loop CPU,"
            f" {self.longest_wall * 1000:.1f} ms wall, over {self.wakeups} wake-ups"
        )


@asynccontextmanager
async def watching_the_loop() -> AsyncIterator[LoopWatch]:
    """Watch the running loop while the body runs (see the module). The stretch the body ends in is
    measured too: a body that holds the loop from start to end is one stretch, the pinger never woken."""
    watch = LoopWatch()
    last = [time.perf_counter(), time.thread_time()]
    first_cpu = last[1]

    def tick() -> None:
        now_wall, now_cpu = time.perf_counter(), time.thread_time()
        watch.longest_cpu = max(watch.longest_cpu, now_cpu - last[1])
        watch.longest_wall = max(watch.longest_wall, now_wall - last[0])
        last[:] = [now_wall, now_cpu]

    async def pinger() -> None:
        while True:
            await anyio.sleep(TICK)
            tick()
            watch.wakeups += 1

    gc.freeze()
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(pinger)
            try:
                yield watch
            finally:
                tick()
                watch.total_cpu = last[1] - first_cpu
                group.cancel_scope.cancel()
    finally:
        gc.unfreeze()
