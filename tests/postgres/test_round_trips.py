"""Round trips to PostgreSQL per call (issue 34): on one machine a round trip is a hand-over to another
process and back, which a busy machine makes wait for a core; a call's latency on PostgreSQL grew
with their number (a one-block edit took 5: the lock and the checkpoints, the ledger, the row, whether
it has children, then the writes with the COMMIT). Counted from libpq's own trace of the pooled
connection (the client waits for the server each time the messages turn from the client's to the
server's): a one-block edit and its replay are 2 (the lock, the checkpoints, the ledger and the row
with its children in one flush; the writes with the COMMIT in the second), a cached read 1."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from mnote_mcp.kernel.port import Command, CommandName, Correlation, PageQuery
from mnote_mcp.kernel.postgres.opening import open_kernel
from mnote_mcp.kernel.store.fixtures import load_fixture, read_fixture
from mnote_mcp.kernel.store.kernel import StoreKernel
from tests.support.helpers import FIXTURE
from tests.support.postgres import pg_dialect

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]
CORRELATION = Correlation("sess_rt", "run_rt", "call_rt", "trace_rt")
_KEYS = itertools.count()


@pytest.fixture
def kernel(pg_url: str) -> Iterator[StoreKernel]:
    kernel = open_kernel(pg_url, pool_size=1)  # one connection: every call's statements are on it
    load_fixture(kernel.store, read_fixture(FIXTURE))
    yield kernel
    kernel.store.close()


class Trace:
    """libpq's trace of the pool's one connection (psycopg's `PGconn.trace`), one call at a time."""

    def __init__(self, kernel: StoreKernel, folder: Path) -> None:
        with pg_dialect(kernel.store).database.pool.connection() as raw:
            self.pgconn = raw.pgconn
        self.folder = folder
        self.calls = itertools.count()

    @asynccontextmanager
    async def call(self, counted: list[int]) -> AsyncIterator[None]:
        """Trace what the block sends and receives; append its round trips to `counted`: each turn
        from the client's messages to the server's (libpq writes the trace when it is turned off)."""
        path = self.folder / f"trace-{next(self.calls)}"
        with path.open("w") as file:
            self.pgconn.trace(file.fileno())
            try:
                yield
            finally:
                self.pgconn.untrace()
        directions = [line.split("\t")[1] for line in path.read_text().splitlines() if line.count("\t") >= 2]
        counted.append(sum(1 for pair in itertools.pairwise(directions) if pair == ("F", "B")))


def update(key: str, text: str) -> Command:
    return Command(
        name=CommandName.PAGE_BLOCK_UPDATE,
        workspace_id="ws_1",
        document_id="doc_1",
        actor_id="user_editor",
        correlation=CORRELATION,
        idempotency_key=key,
        dry_run=False,
        payload={"blockId": "p_1", "text": text},
    )


def insert(key: str) -> Command:
    blocks: list[dict[str, Any]] = [{"type": "paragraph", "text": key}]
    return Command(
        name=CommandName.PAGE_BLOCK_INSERT,
        workspace_id="ws_1",
        document_id="doc_1",
        actor_id="user_editor",
        correlation=CORRELATION,
        idempotency_key=key,
        dry_run=False,
        payload={"blocks": blocks, "afterBlockId": "p_1"},
    )


async def test_a_one_block_edit_is_two_round_trips_and_a_cached_read_one(
    kernel: StoreKernel, tmp_path: Path
) -> None:
    for n in range(6):  # past psycopg's prepare threshold: what a replica's connections are in use
        await kernel.execute(update(f"warm_{n}", f"warm {n}"))
    read = PageQuery("ws_1", "doc_1", "user_editor", CORRELATION)
    await kernel.get_page(read)
    trace = Trace(kernel, tmp_path)
    counted: list[int] = []
    async with trace.call(counted):
        edited = await kernel.execute(update("k_edit", "edited"))
    async with trace.call(counted):
        replayed = await kernel.execute(update("k_edit", "edited"))
    async with trace.call(counted):
        inserted = await kernel.execute(insert("k_insert"))
    await kernel.get_page(read)  # the write made a new revision: the tree is read again
    async with trace.call(counted):
        page = await kernel.get_page(read)
    assert edited.changed and inserted.changed
    assert replayed.revision == edited.revision and page["revision"] == inserted.revision
    edit, replay, insertion, cached = counted
    assert (edit, replay, cached) == (2, 2, 1), {"edit": edit, "replay": replay, "cached read": cached}
    # an insert after a named block: its anchor and the anchor's next sibling, and the new block's id
    assert insertion <= 4, counted
