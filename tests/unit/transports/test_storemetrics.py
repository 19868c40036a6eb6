"""transports/storemetrics.py and the SQLite dialect's figures (issue 23: "store pool and checkpoint
figures"): scraped through the metrics endpoint, the pool's connections in use and the transactions
waiting for one follow what holds and waits; a checkpoint of the write-ahead log is counted, with the
frames it found copied and its duration, and the write that catches up after it too; the log's size
is served. A traced kernel serves them, a relay none."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mnote_mcp.base.telemetry.metrics import Metrics
from mnote_mcp.kernel.port import Command, Correlation
from mnote_mcp.kernel.relays.http import HttpKernel
from mnote_mcp.kernel.sqlite.connection import Database
from mnote_mcp.kernel.sqlite.dialect import SqliteDialect
from mnote_mcp.kernel.sqlite.opening import open_store
from mnote_mcp.kernel.store.kernel import StoreKernel
from mnote_mcp.kernel.traced import TracedKernel
from mnote_mcp.transports.storemetrics import store_metrics
from tests.support.metrics import Samples, scrape
from tests.support.timing import patience

pytestmark = pytest.mark.anyio
IDS = Correlation("sess_t", "run_t", "call_t", "trace_t")
IN_USE = ("mnote_store_pool_connections", (("state", "in_use"),))
BY_CHECKPOINTER = ("mnote_store_checkpoints_total", (("by", "checkpointer"),))
BY_WRITER = ("mnote_store_checkpoints_total", (("by", "writer"),))


def note(key: str) -> Command:
    return Command(
        "artifact.aiNote.create", "ws_1", "doc_1", "user_editor", IDS, key, False, {"content": f"note {key}"}
    )


def wait_for(condition: Callable[[], bool], what: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


@pytest.fixture
def kernel(db: Path) -> Iterator[StoreKernel]:
    store = open_store(db, pool_size=1)
    yield StoreKernel(store)
    store.close()


def database(kernel: StoreKernel) -> Database:
    dialect = kernel.store.dialect
    assert isinstance(dialect, SqliteDialect)
    return dialect.database


def served(kernel: object) -> Metrics:
    metrics = Metrics()
    store_metrics(metrics, kernel)  # type: ignore[arg-type]
    return metrics


async def test_the_pool_figures_follow_connections_held_and_waited_for(kernel: StoreKernel) -> None:
    metrics = served(kernel)
    idle = await scrape(metrics)
    assert idle[("mnote_store_pool_size", ())] == 1
    assert idle[IN_USE] == 0
    assert idle[("mnote_store_pool_waiting", ())] == 0
    pool = database(kernel).pool
    released = threading.Event()

    def borrow() -> None:
        pool.give_back(pool.lend())
        released.set()

    with kernel.store.transaction(write=False, inline=False):  # the pool's one connection, held
        held = await scrape(metrics)
        waiter = threading.Thread(target=borrow)
        waiter.start()
        wait_for(lambda: pool.counts()[2] == 1, "the second transaction never waited")
        waiting = await scrape(metrics)
    waiter.join(timeout=patience(30))
    assert released.is_set()
    after = await scrape(metrics)
    assert held[IN_USE] == 1 and held[("mnote_store_pool_waiting", ())] == 0
    assert waiting[IN_USE] == 1 and waiting[("mnote_store_pool_waiting", ())] == 1
    assert after[IN_USE] == 0 and after[("mnote_store_pool_waiting", ())] == 0
    assert after[("mnote_store_pool_connections", (("state", "idle"),))] == 1
    assert after[("mnote_store_pool_timeouts_total", ())] == 0


async def test_checkpoints_are_counted_with_their_frames_duration_and_the_logs_size(
    kernel: StoreKernel,
) -> None:
    metrics = served(kernel)
    for n in range(20):
        kernel.store.execute(note(f"k{n}"), inline=True)
    before: Samples = await scrape(metrics)
    assert before[BY_CHECKPOINTER] == 0 and before[BY_WRITER] == 0
    assert before[("mnote_store_checkpoint_frames", ())] == 0
    assert before[("mnote_store_wal_bytes", ())] > 0  # the loop's writes are in the log, not copied back
    checkpointer = database(kernel).checkpointer
    checkpointer.wake()  # what the loop's writes do every CHECKPOINT_ROWS rows changed
    wait_for(lambda: checkpointer.runs == 1, "the checkpointer did not run")
    checkpointed = await scrape(metrics)
    kernel.store.execute(note("catch_up"), inline=True)  # the next write on the loop catches up
    caught_up = await scrape(metrics)
    assert checkpointed[BY_CHECKPOINTER] == 1 and checkpointed[BY_WRITER] == 0
    assert checkpointed[("mnote_store_checkpoint_frames", ())] > 0
    assert checkpointed[("mnote_store_checkpoint_seconds", ())] > 0
    assert caught_up[BY_CHECKPOINTER] == 1 and caught_up[BY_WRITER] == 1


async def test_a_traced_kernel_serves_the_figures_and_a_relay_none(kernel: StoreKernel) -> None:
    traced = await scrape(served(TracedKernel(kernel)))
    assert traced[("mnote_store_pool_size", ())] == 1
    relay = HttpKernel("http://127.0.0.1:9")
    try:
        relayed = await scrape(served(relay))
    finally:
        await relay.aclose()
    names = {name for name, _ in relayed}
    assert "mnote_build_info" in names  # the scrape is whole: only the store's families are absent
    assert not [name for name in names if name.startswith("mnote_store_")]
