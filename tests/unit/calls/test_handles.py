"""Confirmation handles (issue 31, `mnote_mcp/calls/handles.py`): a client that cannot be asked gets the
confirmation result; the handle it brings back writes the write once. Replayed, sent with other
arguments, by another actor, for another tool, forged, after the page changed or after its expiry,
it is refused and nothing is written. Each case checks the store, and the audit trail says how every
write was consented (`detail.consent`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp import Client
from mcp.client.context import ClientRequestContext

from mnote_mcp.calls import handles
from mnote_mcp.kernel.port import AuditRecord
from mnote_mcp.kernel.sqlite.opening import open_kernel
from tests.support.helpers import MODES, call, connect, dump, envelope_of, make_app, write_args

pytestmark = pytest.mark.anyio

REPLACE: dict[str, Any] = {"content": [{"type": "paragraph", "text": "Only this is left."}]}
HELD = {"confirm_fallback": "handle"}


async def _trail(db: Path) -> list[AuditRecord]:
    kernel = open_kernel(db)
    try:
        return await kernel.audit_trail(limit=1000)
    finally:
        await kernel.aclose()


async def _held(client: Client, key: str = "replace-1", **arguments: Any) -> dict[str, Any]:
    held = await call(client, "mnote.page.save", **write_args(key, **(arguments or REPLACE)))
    assert held["ok"] is False and held["audit"]["effect"] == "none", held
    assert held["error"]["details"]["confirmation"] == "required", held["error"]
    return held


def _handle(held: dict[str, Any]) -> str:
    handle: str = held["error"]["details"]["confirmationKey"]
    return handle


@pytest.mark.parametrize("mode", MODES)
async def test_the_confirmation_result_then_the_handle_writes_once(db: Path, mode: str) -> None:
    before = dump(db, audit=False)
    async with connect(db, mode, **HELD) as client:
        held = await _held(client)
        assert dump(db, audit=False) == before, "held: nothing written"
        written = await call(client, "mnote.page.save", **write_args(_handle(held), **REPLACE))
        replayed = await call(client, "mnote.page.save", **write_args(_handle(held), **REPLACE))
    error = held["error"]
    assert error["code"] == "mnote_tool_permission_denied"
    assert error["message"] == (
        "this write needs the person's confirmation; nothing was written. On the page “Project plan” it:"
        " Deletes 3 block(s), inserts 1."
    )
    assert _handle(held) in error["hint"] and "ask the person" in error["hint"]
    details = error["details"]
    assert details["removedLines"] == ["# Chapter one", "First paragraph.", "Second paragraph."]
    assert details["expiresInSeconds"] == 600 and details["revision"] == 1
    assert len(_handle(held)) <= handles.MAX_HANDLE_CHARS

    assert written["ok"] and written["audit"]["effect"] == "write", written
    assert replayed["ok"] is False and replayed["error"]["details"] == {
        "confirmation": "used",
        "commandId": written["audit"]["commandId"],
    }
    trail = await _trail(db)
    (held_record,) = [r for r in trail if r["effect"] == "refused"]
    assert (held_record["outcome"], held_record["idempotencyKey"]) == ("confirmation_required", "replace-1")
    assert held_record["commandId"] == details["auditCommandId"]
    (write,) = [r for r in trail if r["effect"] == "write"]
    assert write["idempotencyKey"] == _handle(held) and write["detail"]["consent"] == "handle"


@pytest.mark.parametrize(
    ("case", "redeem"),
    [
        ("other arguments", {"content": [{"type": "divider"}]}),
        ("another page", {"documentId": "doc_secret"}),
        ("another base revision", {"baseRevision": 1}),
    ],
)
async def test_a_handle_for_other_arguments_writes_nothing(
    db: Path, case: str, redeem: dict[str, Any]
) -> None:
    async with connect(db, **HELD) as client:
        held = await _held(client)
        before = dump(db, audit=False)
        refused = await call(client, "mnote.page.save", **{**write_args(_handle(held), **REPLACE), **redeem})
    assert refused["ok"] is False, case
    if case == "another page":  # the checkpoints come first: that page is not the editor's to write
        assert refused["error"]["code"] in ("mnote_tool_permission_denied", "mnote_tool_not_found")
    else:
        assert refused["error"]["details"] == {"confirmation": "invalid"}, refused["error"]
    assert dump(db, audit=False) == before


async def test_a_handle_of_another_actor_or_tool_or_forged_writes_nothing(db: Path) -> None:
    async with connect(db, **HELD) as client:
        handle = _handle(await _held(client))
    before = dump(db, audit=False)
    async with connect(db, actor="user_owner", **HELD) as owner:
        theirs = await call(owner, "mnote.page.save", **write_args(handle, **REPLACE))
    async with connect(db, **HELD) as client:
        other_tool = await call(client, "mnote.block.delete", **write_args(handle, blockIds=["p_1", "p_2"]))
        forged_tag = handle[:-2] + ("AA" if not handle.endswith("AA") else "BB")
        forged = await call(client, "mnote.page.save", **write_args(forged_tag, **REPLACE))
        later = handle.split(".")
        later[1] = format(int(later[1], 36) + 3600, "x")  # an expiry moved on
        moved = await call(client, "mnote.page.save", **write_args(".".join(later), **REPLACE))
    for refused in (theirs, other_tool, forged, moved):
        assert refused["error"]["details"] == {"confirmation": "invalid"}, refused["error"]
        assert "not a confirmation this server issued" in refused["error"]["message"]
    assert dump(db, audit=False) == before


async def test_a_handle_for_a_page_that_changed_since_writes_nothing(db: Path) -> None:
    async with connect(db, **HELD) as client:
        held = await _held(client)
        async with connect(db, confirm="never", actor="user_owner") as other:
            assert (
                await call(other, "mnote.block.update", **write_args("meanwhile", blockId="p_1", text="x"))
            )["ok"]
        before = dump(db, audit=False)
        stale = await call(client, "mnote.page.save", **write_args(_handle(held), **REPLACE))
    assert stale["error"]["code"] == "mnote_tool_conflict"
    assert stale["error"]["details"] == {"confirmation": "stale", "revision": 1, "currentRevision": 2}
    assert dump(db, audit=False) == before


async def test_an_expired_handle_writes_nothing(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with connect(db, **HELD) as client:
        held = await _held(client)
        before = dump(db, audit=False)
        later = time.time() + 601
        monkeypatch.setattr(time, "time", lambda: later)  # the clock `mnote_mcp.calls.handles` reads
        expired = await call(client, "mnote.page.save", **write_args(_handle(held), **REPLACE))
    assert expired["error"]["details"] == {"confirmation": "expired"}
    assert expired["error"]["message"] == "this confirmation has expired; nothing was written"
    assert dump(db, audit=False) == before


async def test_replicas_sharing_a_key_file_accept_each_others_handles(db: Path) -> None:
    """`--confirm-key-file`: a handle issued by one replica writes on another; a replica with another
    key refuses it (as one with a key of its own process always would)."""
    shared = ("s" * 32,)
    apps = [make_app(db, **HELD), make_app(db, **HELD), make_app(db, **HELD)]
    apps[0].state_keys = apps[1].state_keys = shared
    apps[2].state_keys = ("t" * 32,)
    try:
        async with Client(apps[0].server()) as first:
            handle = _handle(
                envelope_of(await first.call_tool("mnote.page.save", write_args("r", **REPLACE)))
            )
        async with Client(apps[2].server()) as stranger:
            refused = envelope_of(await stranger.call_tool("mnote.page.save", write_args(handle, **REPLACE)))
        async with Client(apps[1].server()) as second:
            written = envelope_of(await second.call_tool("mnote.page.save", write_args(handle, **REPLACE)))
    finally:
        for app in apps:
            await app.kernel.aclose()
    assert refused["error"]["details"] == {"confirmation": "invalid"}
    assert written["ok"] and written["audit"]["effect"] == "write"


async def test_the_confirmation_result_is_in_the_session_locale(db: Path) -> None:
    async with connect(db, locale="zh-CN", **HELD) as client:
        held = await _held(client)
    error = held["error"]
    assert (
        error["message"]
        == "这次写入需要用户确认，未写入任何内容。它将对页面《Project plan》：删除 3 个块，插入 1 个块。"
    )
    assert error["hint"].startswith("先在对话中问用户是否要这样修改") and _handle(held) in error["hint"]


async def test_the_tools_are_named_as_advertised_in_the_confirmation_result(db: Path) -> None:
    async with connect(db, tool_names="underscore", **HELD) as client:
        held = await call(client, "mnote_page_save", **write_args("k", **REPLACE))
    assert held["toolName"] == "mnote_page_save" and "mnote.page" not in str(held["error"])


class Accept:
    async def __call__(
        self, ctx: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={})


@pytest.mark.parametrize("mode", MODES)
async def test_every_write_says_how_it_was_consented(db: Path, mode: str) -> None:
    """The audit record of each write: asked (and accepted), not needed, the undo of the caller's own
    run, or written unasked under `--confirm-fallback write`."""
    divider: dict[str, Any] = {"blocks": [{"type": "divider"}]}
    own = {key: value for key, value in write_args("own", undoRunId="run_t").items() if key != "runId"}
    async with connect(db, mode, elicitation_callback=Accept(), run_id="run_t") as client:
        assert (await call(client, "mnote.page.save", **write_args("asked", **REPLACE)))["ok"]
        assert (await call(client, "mnote.block.insert", **write_args("harmless", **divider)))["ok"]
        assert (await call(client, "mnote.page.revert", **own))["ok"]
    async with connect(db, mode, confirm_fallback="write") as client:
        assert (await call(client, "mnote.page.save", **write_args("unasked", **REPLACE)))["ok"]
    consents = {
        r["idempotencyKey"]: r["detail"].get("consent") for r in await _trail(db) if r["effect"] == "write"
    }
    assert consents == {"asked": "asked", "harmless": "not_needed", "own": "own_run", "unasked": "fallback"}
