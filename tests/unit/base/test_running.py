"""`base/running.py`: what the MCP server's calls in flight and the runtime's requests share."""

from __future__ import annotations

import anyio
import pytest

from mnote_mcp.base.running import Running

pytestmark = pytest.mark.anyio


async def test_settle_waits_for_the_last_to_end_and_gives_up_after_its_seconds() -> None:
    running = Running()
    assert await running.settle(0.01)
    ended = anyio.Event()

    async def work() -> None:
        with running.track():
            await ended.wait()

    async with anyio.create_task_group() as group:
        group.start_soon(work)
        await anyio.sleep(0.01)
        assert running.count == 1
        assert not await running.settle(0.05)
        ended.set()
        assert await running.settle(5)
    assert running.count == 0


async def test_cancel_stops_what_runs_under_a_scope_and_counts_it() -> None:
    running = Running()
    cancelled: list[bool] = []

    async def work() -> None:
        with running.track(), running.cancellable(anyio.CancelScope()) as scope:
            await anyio.sleep(60)
        cancelled.append(scope.cancelled_caught)

    async with anyio.create_task_group() as group:
        group.start_soon(work)
        group.start_soon(work)
        await anyio.sleep(0.01)
        assert running.cancel() == 2
    assert cancelled == [True, True]
    assert running.count == 0 and running.cancel() == 0
