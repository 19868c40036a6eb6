"""Big pages (issue 9, item 5): a page has a size limit in blocks and bytes that every write obeys
(refused with `mnote_tool_invalid_argument` naming the limit, nothing written), and the work on a
page at the limit runs off the event loop, so other calls are answered meanwhile."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path
from typing import Any

import anyio
import pytest

from mnote_mcp.kernel.limits import DEFAULT_MAX_PAGE_BLOCKS, DEFAULT_MAX_PAGE_BYTES, PageLimits
from mnote_mcp.kernel.port import Correlation, PageQuery
from mnote_mcp.kernel.sqlite.opening import open_store
from mnote_mcp.kernel.store.kernel import StoreKernel
from tests.support.helpers import call, connect, dump, page_args, write_args

pytestmark = pytest.mark.anyio


def _blocks(count: int, text_bytes: int, prefix: str = "b") -> list[dict[str, Any]]:
    return [{"id": f"{prefix}{n}", "type": "paragraph", "text": "x" * text_bytes} for n in range(count)]


@pytest.mark.slow
async def test_appends_cannot_grow_a_page_past_the_default_byte_limit(db: Path) -> None:
    """The attack: a page built by repeated large appends (each one within every per-request limit)."""
    chunk = 2_000_000
    appended = 0
    async with connect(db) as client:
        for n in range(DEFAULT_MAX_PAGE_BYTES // chunk + 2):
            before = dump(db)
            envelope = await call(
                client,
                "mnote.page.save",
                **write_args(f"big_{n}", mode="append", content=_blocks(20, chunk // 20, f"a{n}_")),
            )
            if not envelope["ok"]:
                break
            appended += 1
        else:
            pytest.fail("every append was accepted: the page grew past the limit")
    assert envelope["error"]["code"] == "mnote_tool_invalid_argument"
    details = envelope["error"]["details"]
    assert details["limit"] == "maxPageBytes" and details["maxPageBytes"] == DEFAULT_MAX_PAGE_BYTES
    assert details["pageBytes"] > DEFAULT_MAX_PAGE_BYTES
    assert "maxPageBytes" in envelope["error"]["message"]
    assert dump(db) == before, "nothing written"
    assert appended * chunk <= DEFAULT_MAX_PAGE_BYTES


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("mnote.page.save", {"content": _blocks(6, 10)}),
        ("mnote.page.save", {"mode": "append", "content": _blocks(4, 10)}),
        ("mnote.block.insert", {"blocks": _blocks(3, 10), "position": "end"}),
    ],
)
async def test_every_write_obeys_the_block_limit(db: Path, tool: str, arguments: dict[str, Any]) -> None:
    before = dump(db)
    async with connect(db, max_page_blocks=5) as client:
        envelope = await call(client, tool, **write_args("k", **arguments))
    assert envelope["error"]["code"] == "mnote_tool_invalid_argument"
    assert envelope["error"]["details"]["limit"] == "maxPageBlocks"
    assert envelope["error"]["details"]["maxPageBlocks"] == 5
    assert dump(db) == before


async def test_an_update_cannot_grow_the_page_past_the_byte_limit(db: Path) -> None:
    async with connect(db, max_page_bytes=2_000) as client:
        fits = await call(client, "mnote.block.update", **write_args("k1", blockId="p_1", text="y" * 1_000))
        before = dump(db)
        grows = await call(client, "mnote.block.update", **write_args("k2", blockId="p_2", text="z" * 1_500))
    assert fits["ok"]
    assert grows["error"]["details"]["limit"] == "maxPageBytes"
    assert dump(db) == before


@pytest.mark.slow
async def test_a_ping_is_answered_while_a_page_at_the_limit_is_saved(db: Path) -> None:
    count = DEFAULT_MAX_PAGE_BLOCKS
    size = DEFAULT_MAX_PAGE_BYTES // count - 40  # ids, types and text: just under the byte limit
    content = _blocks(count, size)
    gaps: list[float] = []
    took: list[float] = []
    async with connect(db) as client:
        await client.send_ping()

        async def save() -> None:
            started = time.perf_counter()
            envelope = await call(client, "mnote.page.save", **write_args("huge", content=content))
            took.append(time.perf_counter() - started)
            assert envelope["ok"], envelope["error"]
            pinger.cancel()

        async with anyio.create_task_group() as group:
            pinger = group.cancel_scope
            group.start_soon(save)
            while True:
                started = time.perf_counter()
                await client.send_ping()
                gaps.append(time.perf_counter() - started)
                await anyio.sleep(0.01)
    (duration,) = took
    assert duration > 0.3, "the save must be long enough to tell a stalled loop from a free one"
    assert max(gaps) < max(0.25 * duration, 0.2), (max(gaps), duration)


@pytest.mark.slow
async def test_reading_a_page_at_the_limit_costs_a_small_multiple_of_the_page(tmp_path: Path) -> None:
    count = DEFAULT_MAX_PAGE_BLOCKS
    size = DEFAULT_MAX_PAGE_BYTES // count - 40
    db = tmp_path / "big.db"
    from tests.support.helpers import seeded_store

    seeded_store(db)
    async with connect(db) as client:
        saved = await call(client, "mnote.page.save", **write_args("huge", content=_blocks(count, size)))
        assert saved["ok"], saved["error"]
    kernel = StoreKernel(open_store(db, limits=PageLimits()))
    try:
        query = PageQuery("ws_1", "doc_1", "user_editor", Correlation("s", "r", "c", "t"))
        tracemalloc.start()
        page = await kernel.get_page(query)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        await kernel.aclose()
    assert len(page["blocks"]) == count
    assert peak < 4 * DEFAULT_MAX_PAGE_BYTES, (
        f"peak {peak / 1e6:.1f} MB for a {DEFAULT_MAX_PAGE_BYTES / 1e6:.1f} MB page"
    )


async def test_page_get_of_a_page_at_the_limit_reads_it_whole(db: Path) -> None:
    async with connect(db, max_page_blocks=50) as client:
        saved = await call(client, "mnote.page.save", **write_args("k", content=_blocks(50, 10)))
        page = await call(client, "mnote.page.get", **page_args())
    assert saved["ok"] and len(page["result"]["blocks"]) == 50
