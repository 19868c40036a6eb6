"""The PostgreSQL dialect's figures through the metrics endpoint (issue 23, `mnote_store_*`): the pool's
size and connections in use (psycopg_pool's `get_stats`), a transaction waiting for a connection, the
searches running and waiting at the gate, no connection error and the database reachable."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import anyio
import pytest
from anyio.abc import TaskStatus

from mnote_mcp.kernel.postgres.opening import open_kernel
from mnote_mcp.kernel.store.kernel import StoreKernel
from mnote_mcp.telemetry.metrics import Metrics
from mnote_mcp.transports.storemetrics import store_metrics
from tests.support.metrics import scrape
from tests.support.postgres import pg_dialect
from tests.support.timing import patience

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]
IN_USE = ("mnote_store_pool_connections", (("state", "in_use"),))
WAITING = ("mnote_store_pool_waiting", ())
RUNNING_SEARCHES = ("mnote_store_searches", (("state", "running"),))
WAITING_SEARCHES = ("mnote_store_searches", (("state", "waiting"),))


def wait_for(condition: Callable[[], bool], what: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + patience(seconds)
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


@pytest.fixture
def kernel(pg_url: str) -> Iterator[StoreKernel]:
    kernel = open_kernel(pg_url, pool_size=1)
    yield kernel
    kernel.store.close()


async def test_the_pool_and_search_figures_follow_what_holds_and_waits(kernel: StoreKernel) -> None:
    metrics = Metrics()
    store_metrics(metrics, kernel)
    dialect = pg_dialect(kernel.store)
    idle = await scrape(metrics)
    assert idle[("mnote_store_pool_size", ())] == 1
    assert idle[IN_USE] == 0 and idle[WAITING] == 0
    assert idle[("mnote_store_unreachable", ())] == 0
    assert idle[("mnote_store_connection_errors_total", ())] == 0
    assert idle[RUNNING_SEARCHES] == 0 and idle[WAITING_SEARCHES] == 0

    lent = threading.Event()

    def borrow() -> None:
        with dialect.database.connection():
            lent.set()

    with dialect.database.connection():  # the pool's one connection, held
        held = await scrape(metrics)
        waiter = threading.Thread(target=borrow)
        waiter.start()
        wait_for(lambda: dialect.database.pool.get_stats().get("requests_waiting", 0) == 1, "nobody waited")
        waiting = await scrape(metrics)
    waiter.join(timeout=patience(30))
    assert lent.is_set()
    assert held[IN_USE] == 1 and held[WAITING] == 0
    assert waiting[IN_USE] == 1 and waiting[WAITING] == 1
    after = await scrape(metrics)
    assert after[IN_USE] == 0 and after[WAITING] == 0

    second = anyio.Event()

    async def search_again(*, task_status: TaskStatus[None]) -> None:
        task_status.started()  # (this task runs on into the gate before the test goes on)
        async with dialect.gate.admit("a"):  # waits for the actor's turn
            second.set()

    with anyio.fail_after(patience(30)):
        async with anyio.create_task_group() as tasks:
            async with dialect.gate.admit("a"):
                await tasks.start(search_again)
                assert dialect.gate.in_flight("a") == 2 and not second.is_set()
                searching = await scrape(metrics)
            await second.wait()
    assert searching[RUNNING_SEARCHES] == 1 and searching[WAITING_SEARCHES] == 1
    done = await scrape(metrics)
    assert done[RUNNING_SEARCHES] == 0 and done[WAITING_SEARCHES] == 0
