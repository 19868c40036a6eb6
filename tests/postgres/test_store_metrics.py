"""The PostgreSQL dialect's figures through the metrics endpoint (issue 23, `mnote_store_*`): the pool's
size and connections in use (psycopg_pool's `get_stats`), a transaction waiting for a connection, no
connection error and the database reachable. (The expensive calls running and waiting were the search
gate's figures; they are the admission's now, on every store: tests/unit/calls/test_admission.py.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from mnote_mcp.base.telemetry.metrics import Metrics
from mnote_mcp.kernel.postgres.opening import open_kernel
from mnote_mcp.kernel.store.kernel import StoreKernel
from mnote_mcp.transports.storemetrics import store_metrics
from tests.support.metrics import scrape
from tests.support.postgres import pg_dialect
from tests.support.timing import patience

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]
IN_USE = ("mnote_store_pool_connections", (("state", "in_use"),))
WAITING = ("mnote_store_pool_waiting", ())


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


async def test_the_pool_figures_follow_what_holds_and_waits(kernel: StoreKernel) -> None:
    metrics = Metrics()
    store_metrics(metrics, kernel)
    dialect = pg_dialect(kernel.store)
    idle = await scrape(metrics)
    assert idle[("mnote_store_pool_size", ())] == 1
    assert idle[IN_USE] == 0 and idle[WAITING] == 0
    assert idle[("mnote_store_unreachable", ())] == 0
    assert idle[("mnote_store_connection_errors_total", ())] == 0
    assert not [key for key in idle if key[0] == "mnote_store_searches"], "the gate's figures are gone"

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
