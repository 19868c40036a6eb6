"""Issue 30: what a write would produce is bounded before it is built, for every command, and the
work a client's input sizes runs off the event loop.

The findings reproduced: one `mnote.page.edit_text` call of doubling `replaceAll` edits held the event
loop for 26 s and could take gigabytes (each edit doubles the block: `a` -> `aa`); edit_text wrote
blocks of 200,009 and 1,024,000 characters past the 100,000-character cap that `block.update` and
`block.insert` keep; a section move on a 20,000-block page held the loop 0.3 s."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from mnote_mcp.kernel.blocks import MAX_TEXT_LENGTH
from mnote_mcp.kernel.limits import DEFAULT_MAX_BLOCK_CHARS, PageLimits
from mnote_mcp.kernel.store import commands
from mnote_mcp.kernel.store.commands import block as block_commands
from mnote_mcp.kernel.store.plan import Plan, Tx
from mnote_mcp.kernel.store.rows import BlockChange
from tests.support.helpers import call, connect, dump, page_args, write_args
from tests.support.loopwatch import watching_the_loop

pytestmark = pytest.mark.anyio

EDIT = "mnote.page.edit_text"
# The loop's thread may spend at most this much CPU between two wake-ups of the watcher (issue 30).
STALL = 0.1


async def _seed(client: Any, blocks: list[dict[str, Any]]) -> None:
    saved = await call(client, "mnote.page.save", **write_args("seed", content=blocks))
    assert saved["ok"], saved["error"]


def _doubling(count: int) -> list[dict[str, Any]]:
    return [{"oldText": "a", "newText": "aa", "replaceAll": True}] * count


async def test_doubling_replace_all_is_refused_before_it_is_built(db: Path) -> None:
    """The HIGH finding: 20 doubling edits of a 1,000-character block (2^20 x 1,000 characters if
    built). Refused at the edit that would pass the block cap, naming the limit and its flag, with the
    loop free and the memory small; nothing written."""
    async with connect(db) as client:
        await _seed(client, [{"id": "big", "type": "paragraph", "text": "a" * 1_000}])
        before = dump(db)
        tracemalloc.start()
        started = time.perf_counter()
        async with watching_the_loop() as watch:
            refused = await call(client, EDIT, **write_args("double", blockId="big", edits=_doubling(20)))
        took = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    error = refused["error"]
    assert error["code"] == "mnote_tool_invalid_argument", error
    assert error["details"]["limit"] == "maxBlockChars"
    assert error["details"]["maxBlockChars"] == DEFAULT_MAX_BLOCK_CHARS
    assert error["details"]["flag"] == "--max-block-chars"
    assert error["details"]["pointer"] == "/edits/6", "1,000 -> 128,000 characters at the 7th doubling"
    assert "--max-block-chars" in error["message"]
    assert dump(db) == before
    assert watch.longest_cpu < STALL, watch.describe()
    assert peak < 20_000_000, f"{peak / 1e6:.1f} MB traced"
    assert took < 10, took


@pytest.mark.parametrize(
    ("text", "edit"),
    [
        ("a" * MAX_TEXT_LENGTH, {"oldText": "a", "newText": "aa", "replaceAll": True}),  # 200,000
        ("b" * 99_991 + "x", {"oldText": "x", "newText": "y" * 100_000}),  # 199,991
    ],
    ids=["replace-all", "one-long-replacement"],
)
async def test_edit_text_keeps_the_block_cap(db: Path, text: str, edit: dict[str, Any]) -> None:
    """The MEDIUM finding: edit_text wrote a 200,009-character block that no other tool could write
    back; now it is refused like block.update's over-long text."""
    async with connect(db) as client:
        await _seed(client, [{"id": "big", "type": "paragraph", "text": text}])
        before = dump(db)
        refused = await call(client, EDIT, **write_args("grow", edits=[edit]))
        dry = await call(client, EDIT, **write_args("grow-dry", dry_run=True, edits=[edit]))
    for envelope in (refused, dry):
        assert envelope["error"]["details"]["limit"] == "maxBlockChars", envelope["error"]
    assert dump(db) == before


async def test_the_block_cap_is_a_flag(db: Path) -> None:
    async with connect(db, max_block_chars=50) as client:
        updated = await call(client, "mnote.block.update", **write_args("u", blockId="p_1", text="x" * 51))
        edited = await call(
            client, EDIT, **write_args("e", blockId="p_1", edits=[{"oldText": "First", "newText": "F" * 60}])
        )
        fits = await call(client, "mnote.block.update", **write_args("f", blockId="p_1", text="x" * 50))
    assert updated["error"]["details"]["limit"] == "maxBlockChars"
    assert updated["error"]["details"]["maxBlockChars"] == 50
    assert edited["error"]["details"]["limit"] == "maxBlockChars"
    assert fits["ok"], fits["error"]


async def test_growth_past_the_page_bytes_is_refused_before_it_is_built(db: Path) -> None:
    """Many blocks each within the cap, the page past --max-page-bytes: refused with that limit."""
    blocks = [{"id": f"b{n}", "type": "paragraph", "text": "a" * 1_000} for n in range(20)]
    async with connect(db, max_page_bytes=100_000) as client:
        await _seed(client, blocks)
        before = dump(db)
        refused = await call(client, EDIT, **write_args("grow", edits=_doubling(3)))
    assert refused["error"]["details"]["limit"] == "maxPageBytes", refused["error"]
    assert refused["error"]["details"]["flag"] == "--max-page-bytes"
    assert dump(db) == before


@pytest.fixture
def careless_update() -> Iterator[None]:
    """`page.block.update` planned by a command that checks nothing of what it writes: a block of
    twice the cap (as a command added tomorrow might)."""
    spec = commands.COMMANDS[block_commands.UPDATE.name]

    def plan(tx: Tx, payload: Any) -> Plan:
        planned = spec.plan(tx, payload)
        change = planned.blocks[0]
        assert change.after is not None
        huge = replace(change.after, text="z" * (2 * MAX_TEXT_LENGTH))
        planned.blocks[0] = BlockChange(change.id, change.before, huge)
        return planned

    commands.COMMANDS[spec.name] = replace(spec, plan=plan)
    try:
        yield
    finally:
        commands.COMMANDS[spec.name] = spec


@pytest.mark.usefixtures("careless_update")
async def test_a_command_cannot_opt_out_of_the_bounds(db: Path) -> None:
    before = dump(db)
    async with connect(db) as client:
        real = await call(client, "mnote.block.update", **write_args("u", blockId="p_1", text="short"))
        dry = await call(client, "mnote.block.update", **write_args("d", True, blockId="p_1", text="short"))
    for envelope in (real, dry):
        assert envelope["error"]["details"]["limit"] == "maxBlockChars", envelope
    assert dump(db) == before


def test_the_block_cap_flag_cannot_pass_the_hard_cap() -> None:
    with pytest.raises(ValueError, match="max_block_chars"):
        PageLimits(max_block_chars=MAX_TEXT_LENGTH + 1)


@pytest.mark.slow
async def test_a_section_move_on_a_long_page_leaves_the_loop_free(db: Path) -> None:
    """The LOW finding: `section: true` scanned a 20,000-block page's siblings on the event loop."""
    body: list[dict[str, Any]] = [{"id": "h1", "type": "heading", "text": "One", "props": {"level": 1}}]
    body += [{"id": f"p{n}", "type": "paragraph", "text": f"line {n}"} for n in range(19_997)]
    body += [{"id": "h2", "type": "heading", "text": "Two", "props": {"level": 1}}]
    body += [{"id": "end", "type": "paragraph", "text": "end"}]
    async with connect(db) as client:
        await _seed(client, body)
        async with watching_the_loop() as watch:
            moved = await call(
                client,
                "mnote.block.move",
                **write_args("move", blockId="h1", section=True, afterBlockId="end"),
            )
        page = await call(client, "mnote.page.get", **page_args(maxBlocks=3))
    assert moved["ok"], moved["error"]
    assert [block["id"] for block in page["result"]["blocks"]] == ["h2", "end", "h1"]
    assert watch.longest_cpu < STALL, watch.describe()


async def test_a_write_moved_off_the_loop_leaves_the_loops_connection_free_for_the_next(db: Path) -> None:
    """A write asks for the ledger and the blocks it names before it reads them (one round trip on
    PostgreSQL, issue 34); on a page too long for the event loop it then moves to a worker thread
    unread. The unread question held its statement, hence the loop connection's read snapshot, open:
    after the worker's write the loop's next write failed SQLITE_BUSY_SNAPSHOT, an internal error
    (found by the benchmark smoke run's block.insert on a 10,000-block page)."""
    from mnote_mcp.kernel.store.dialect import INLINE_BLOCKS

    blocks = [{"id": f"b{index}", "type": "paragraph", "text": "x"} for index in range(INLINE_BLOCKS + 1)]
    async with connect(db) as client:
        await _seed(client, blocks)
        for index in range(3):
            inserted = await call(
                client,
                "mnote.block.insert",
                **write_args(
                    f"insert{index}", blocks=[{"id": f"new{index}", "type": "paragraph", "text": "n"}]
                ),
                afterBlockId="b5",
            )
            assert inserted["ok"], inserted["error"]
