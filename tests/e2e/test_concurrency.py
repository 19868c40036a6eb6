"""Block-level concurrency between two server processes sharing one store (issue 12).

Two agents read the page at the same revision and edit it through two `mnote-mcp` processes over
stdio. Edits of different blocks both succeed, the later one saying it was rebased from the stale
revision; edits of the same block: the second one is a conflict naming that block and the revision
that changed it, and its text is not written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.support.helpers import envelope_of, page_args, stdio_params, write_args
from tests.support.timing import patience

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
TIMEOUT = patience(60)


async def test_two_processes_with_the_same_stale_revision(db: Path) -> None:
    async with (
        Client(stdio_params(db, "--actor", "user_editor"), read_timeout_seconds=TIMEOUT) as first,
        Client(stdio_params(db, "--actor", "user_owner"), read_timeout_seconds=TIMEOUT) as second,
    ):
        read = envelope_of(await first.call_tool("mnote.page.get", page_args()))
        base = read["result"]["revision"]

        async def edit(client: Client, key: str, block: str, text: str) -> dict[str, Any]:
            args = write_args(key, blockId=block, text=text, baseRevision=base)
            return envelope_of(await client.call_tool("mnote.block.update", args))

        different: list[dict[str, Any]] = []
        async with anyio.create_task_group() as group:

            async def run(client: Client, key: str, block: str) -> None:
                different.append(await edit(client, key, block, f"{key} wrote this"))

            group.start_soon(run, first, "a1", "p_1")
            group.start_soon(run, second, "b1", "p_2")
        assert all(e["ok"] for e in different), different
        revisions = sorted(e["result"]["revision"] for e in different)
        assert revisions == [base + 1, base + 2]
        rebased = [e for e in different if "rebasedFrom" in e["result"]]
        assert len(rebased) == 1 and rebased[0]["result"]["rebasedFrom"] == base

        won = await edit(first, "a2", "heading_1", "first")
        lost = await edit(second, "b2", "heading_1", "second")
        page = envelope_of(await second.call_tool("mnote.page.get", page_args()))
    assert won["ok"]
    error = lost["error"]
    assert error["code"] == "mnote_tool_conflict"
    assert error["details"]["conflicts"] == [{"blockId": "heading_1", "revision": base + 3}]
    texts = {block["id"]: block["text"] for block in page["result"]["blocks"]}
    assert texts == {"heading_1": "first", "p_1": "a1 wrote this", "p_2": "b1 wrote this"}
