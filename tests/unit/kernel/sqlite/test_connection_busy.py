"""A store locked by someone else past the busy timeout (issue 9, item 9): the call answers
`mnote_tool_runtime_unavailable`, retryable, with no traceback; the retry with the same key works."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mnote_mcp.app import App, build_registry
from mnote_mcp.calls.dispatch import Dispatcher
from mnote_mcp.config import ServerConfig
from mnote_mcp.kernel.sqlite.opening import open_store
from mnote_mcp.kernel.store.kernel import StoreKernel
from tests.support.helpers import call, write_args

pytestmark = pytest.mark.anyio


async def test_a_store_locked_past_the_busy_timeout_is_unavailable_and_retryable(
    db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from mcp import Client

    config = ServerConfig(db=db, locale="en", demo=False, actor="user_editor")
    kernel = StoreKernel(open_store(db, busy_timeout=0.3))
    app = App(config, kernel, Dispatcher(build_registry(config), kernel, locale="en"), str(db))
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        async with Client(app.server()) as client:
            locked = await call(client, "mnote.page.update_title", **write_args("k_busy", title="Locked"))
            holder.execute("ROLLBACK")
            retried = await call(client, "mnote.page.update_title", **write_args("k_busy", title="Locked"))
    finally:
        holder.close()
        await kernel.aclose()
    error = locked["error"]
    assert error["code"] == "mnote_tool_runtime_unavailable" and error["retryable"] is True, error
    assert error["details"]["cause"] == "store_busy"
    assert "Traceback" not in caplog.text and "mnote_tool_internal" not in caplog.text
    assert retried["ok"] and not retried["result"].get("idempotentReplay")
