"""Asking before a destructive write (issue 25), through the SDK client in both protocol eras.

`legacy` asks with `elicitation/create` while the call waits; `auto` (2026-07-28) answers the call with
an `input_required` result and the SDK client retries it with the answer. Each case checks the store:
an accepted write lands once, a refused one leaves every row as it was but the audit record of the
refusal (effect `refused`, the call's ids, outcome `declined`, `cancelled` or `confirm_timeout`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp.client.context import ClientRequestContext

from mnote_mcp.cli import parse
from mnote_mcp.config import ServerConfig
from mnote_mcp.kernel.port import AuditRecord
from mnote_mcp.kernel.sqlite.opening import open_kernel
from mnote_mcp.settings import SettingError
from mnote_mcp.transports.consentpaths import consent_paths
from tests.support.helpers import MODES, call, connect, dump, page_args, seeded_store, write_args

pytestmark = pytest.mark.anyio

REPLACE: dict[str, Any] = {
    "content": [{"type": "paragraph", "text": "Only this is left."}]
}  # deletes every seeded block
Callback = Callable[[ClientRequestContext, types.ElicitRequestParams], Awaitable[types.ElicitResult]]


class Person:
    """An elicitation callback that records each question and answers `action` (after `delay` s)."""

    def __init__(self, action: str = "accept", delay: float = 0.0, before: Any = None) -> None:
        self.action = action
        self.delay = delay
        self.before = before  # awaited before answering (a concurrent edit)
        self.questions: list[str] = []

    async def __call__(
        self, ctx: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        assert params.requested_schema == {"type": "object", "properties": {}}
        self.questions.append(params.message)
        if self.before is not None:
            await self.before(len(self.questions))
        if self.delay == float("inf"):
            await anyio.Event().wait()  # nobody answers
        await anyio.sleep(self.delay)
        return types.ElicitResult(action=self.action, content={} if self.action == "accept" else None)  # type: ignore[arg-type]


async def _records(db: Path, key: str, effect: str = "write") -> list[AuditRecord]:
    """The audit records of `effect` made with `key` (writes by default)."""
    kernel = open_kernel(db)
    try:
        records = await kernel.audit_trail(limit=1000)
    finally:
        await kernel.aclose()
    return [r for r in records if r["idempotencyKey"] == key and r["effect"] == effect]


async def _writes(db: Path, key: str) -> list[AuditRecord]:
    return await _records(db, key)


async def _refusal(db: Path, key: str, refused: dict[str, Any], outcome: str) -> None:
    """The one audit record of the refused write: the call's ids, how it was refused, the page's
    revision unchanged, and its id in the refusal's details."""
    (record,) = await _records(db, key, "refused")
    assert record["outcome"] == outcome and record["commandName"] == "page.body.save"
    assert record["commandId"] == refused["error"]["details"]["auditCommandId"]
    assert (record["traceId"], record["toolCallId"]) == (refused["traceId"], refused["toolCallId"])
    assert record["actorId"] == "user_editor" and record["revisionBefore"] == record["revisionAfter"]
    assert (record["workspaceId"], record["documentId"]) == ("ws_1", "doc_1")


async def _blocks(db: Path) -> list[str]:
    async with connect(db, confirm="never") as client:
        page = await call(client, "mnote.page.get", **page_args())
    return [block["text"] for block in page["result"]["blocks"]]


@pytest.mark.parametrize("mode", MODES)
async def test_an_accepted_destructive_save_is_written_once_and_its_replay_asks_nothing(
    db: Path, mode: str
) -> None:
    person = Person("accept")
    async with connect(db, mode, elicitation_callback=person) as client:
        first = await call(client, "mnote.page.save", **write_args("replace-1", **REPLACE))
        replay = await call(client, "mnote.page.save", **write_args("replace-1", **REPLACE))
    assert first["ok"] and first["audit"]["effect"] == "write"
    assert len(person.questions) == 1, "the replay of an accepted write asks nothing"
    assert "Deletes 3 block(s)" in person.questions[0] and "“Project plan”" in person.questions[0]
    assert "  - First paragraph." in person.questions[0], "the first lines it removes"
    assert replay["ok"] and replay["result"]["idempotentReplay"] is True
    assert replay["audit"]["commandId"] == first["audit"]["commandId"]
    assert await _blocks(db) == ["Only this is left."]
    assert len(await _writes(db, "replace-1")) == 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("action", "reason", "words"),
    [
        ("decline", "declined", "the person declined this write; nothing was written"),
        ("cancel", "cancelled", "the person dismissed the confirmation; nothing was written"),
    ],
)
async def test_a_declined_or_cancelled_write_writes_nothing_but_its_audit_record(
    db: Path, mode: str, action: str, reason: str, words: str
) -> None:
    before = dump(db, audit=False)
    person = Person(action)
    async with connect(db, mode, elicitation_callback=person) as client:
        refused = await call(client, "mnote.page.save", **write_args("replace-2", **REPLACE))
    assert len(person.questions) == 1
    assert refused["ok"] is False and refused["audit"] == {
        "effect": "none",
        "workspaceId": "ws_1",
        "documentId": "doc_1",
    }
    error = refused["error"]
    assert error["code"] == "mnote_tool_permission_denied" and error["message"] == words
    assert error["retryable"] is False and "hint" in error
    assert error["details"] == {"confirmation": reason, "auditCommandId": error["details"]["auditCommandId"]}
    assert dump(db, audit=False) == before, "nothing written"
    await _refusal(db, "replace-2", refused, reason)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
async def test_no_answer_within_the_timeout_writes_nothing(db: Path, mode: str) -> None:
    """legacy: the server stops waiting after --confirm-timeout; auto: an answer that comes later than
    that (the retry carries when it was asked) is refused the same way."""
    before = dump(db, audit=False)
    person = Person("accept", delay=float("inf") if mode == "legacy" else 1.5)
    started = anyio.current_time()
    async with connect(db, mode, elicitation_callback=person, confirm_timeout=0.5) as client:
        refused = await call(client, "mnote.page.save", **write_args("replace-3", **REPLACE))
    assert anyio.current_time() - started < 30, "bounded by the timeout, not by the person"
    assert refused["error"]["code"] == "mnote_tool_permission_denied"
    details = refused["error"]["details"]
    assert details == {
        "confirmation": "timeout",
        "timeoutSeconds": 0.5,
        "auditCommandId": details["auditCommandId"],
    }
    assert refused["error"]["message"] == "the person did not confirm within 0.5 s; nothing was written"
    assert dump(db, audit=False) == before
    await _refusal(db, "replace-3", refused, "confirm_timeout")


@pytest.mark.parametrize("mode", MODES)
async def test_a_key_declined_then_declined_again_then_accepted_writes_once(db: Path, mode: str) -> None:
    """A refusal is not a write under its key: the same key asked again is asked again (a second
    refusal record, nothing written), and accepted later it is written once, then replays."""
    before = dump(db, audit=False)
    async with connect(db, mode, elicitation_callback=Person("decline")) as client:
        first = await call(client, "mnote.page.save", **write_args("replace-5", **REPLACE))
        again = await call(client, "mnote.page.save", **write_args("replace-5", **REPLACE))
    assert first["ok"] is False and again["ok"] is False
    assert "idempotentReplay" not in str(again), "a refusal is not replayed as a write"
    assert dump(db, audit=False) == before and await _writes(db, "replace-5") == []
    assert len(await _records(db, "replace-5", "refused")) == 2
    person = Person("accept")
    async with connect(db, mode, elicitation_callback=person) as client:
        written = await call(client, "mnote.page.save", **write_args("replace-5", **REPLACE))
        replay = await call(client, "mnote.page.save", **write_args("replace-5", **REPLACE))
    assert written["ok"] and "idempotentReplay" not in written["result"]
    assert replay["ok"] and replay["result"]["idempotentReplay"] is True
    assert len(person.questions) == 1, "asked once; the replay of the written key asks nothing"
    assert await _blocks(db) == ["Only this is left."]
    assert len(await _writes(db, "replace-5")) == 1


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_without_elicitation_is_held_written_as_before_or_refused_as_the_fallback_says(
    db: Path, tmp_path: Path, mode: str
) -> None:
    """Issue 31: by default a client that cannot be asked gets the confirmation result (nothing
    written); `--confirm-fallback write` writes as mnote once did (and says so in the audit record);
    `refuse` refuses."""
    assert ServerConfig().confirm_fallback == "handle", "the default"
    before = dump(db, audit=False)
    async with connect(db, mode, confirm_fallback="handle") as client:
        held = await call(client, "mnote.page.save", **write_args("replace-4", **REPLACE))
    assert held["ok"] is False and held["error"]["details"]["confirmation"] == "required", held
    assert dump(db, audit=False) == before, "nothing written"

    written_store = seeded_store(tmp_path / "write.db")
    async with connect(written_store, mode, confirm_fallback="write") as client:
        written = await call(client, "mnote.page.save", **write_args("replace-4", **REPLACE))
    assert written["ok"] and written["audit"]["effect"] == "write"

    store = seeded_store(tmp_path / "refuse.db")
    before = dump(store)
    async with connect(store, mode, confirm_fallback="refuse") as client:
        refused = await call(client, "mnote.page.save", **write_args("replace-5", **REPLACE))
        harmless = await call(
            client, "mnote.block.insert", **write_args("insert-1", blocks=[{"type": "divider"}])
        )
    assert refused["error"]["code"] == "mnote_tool_permission_denied"
    assert refused["error"]["message"].startswith("this write needs the person's confirmation")
    assert refused["error"]["details"] == {"confirmation": "unavailable"}
    assert harmless["ok"], "a write that is not destructive is not refused"
    after = dump(store)
    assert after != before and "replace-5" not in after


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("confirm", "fallback"), [("destructive", "refuse"), ("always", "refuse"), ("destructive", "handle")]
)
async def test_the_callers_own_run_is_undone_under_every_policy(
    db: Path, mode: str, confirm: str, fallback: str
) -> None:
    """Issue 31: under `--confirm-fallback refuse` every revert was refused to a client that cannot be
    asked, its own run's too: an agent could not undo what it had just done. Undoing the caller's own
    run (`undoRunId` = the run the call is in, here the connection's `--run-id`) needs no confirmation,
    whatever the policy. A run the call's own arguments name is not its own: a page could have told
    the model which run to name."""
    async with connect(db, mode, confirm="never") as setup:
        divider = write_args("mine-1", blocks=[{"type": "divider"}])  # under runId run_t
        assert (await call(setup, "mnote.block.insert", **divider))["ok"]
    before = await _blocks(db)
    async with connect(db, mode, confirm=confirm, confirm_fallback=fallback, run_id="run_t") as client:
        others = await call(client, "mnote.page.revert", **write_args("undo-all", toRevision=1))
        named = await call(client, "mnote.page.revert", **write_args("undo-named", undoRunId="run_t"))
        unnamed = {
            key: value for key, value in write_args("undo-mine", undoRunId="run_t").items() if key != "runId"
        }
        undone = await call(client, "mnote.page.revert", **unnamed)
    assert undone["ok"] and undone["result"]["changed"], undone
    assert await _blocks(db) == [text for text in before if text], "the divider it inserted is gone"
    assert others["ok"] is False, "undoing anything but the caller's own run still needs consent"
    assert named["ok"] is False, "a run named in the call's arguments is not the caller's own"


@pytest.mark.parametrize("mode", MODES)
async def test_the_policy_never_asks_nothing_and_always_asks_before_every_write(db: Path, mode: str) -> None:
    person = Person("accept")
    async with connect(db, mode, elicitation_callback=person, confirm="never") as client:
        assert (await call(client, "mnote.page.save", **write_args("never-1", **REPLACE)))["ok"]
    assert person.questions == []
    async with connect(db, mode, elicitation_callback=person, confirm="always") as client:
        inserted = await call(
            client,
            "mnote.block.insert",
            **write_args("always-1", blocks=[{"type": "divider"}], position="end"),
        )
        planned = await call(
            client, "mnote.block.insert", **write_args("always-2", True, blocks=[{"type": "divider"}])
        )
    assert inserted["ok"] and planned["ok"]
    assert len(person.questions) == 1 and "Inserts 1." in person.questions[0], "a dry run never asks"


@pytest.mark.parametrize("mode", MODES)
async def test_a_plan_that_changes_while_the_person_reads_is_asked_about_again(db: Path, mode: str) -> None:
    """Someone adds a block while the person reads the first question: the save would now delete 4
    blocks, not the 3 they accepted, so they are asked again, and what lands is what they saw last."""

    async def meanwhile(question: int) -> None:
        if question == 1:
            async with connect(db, confirm="never", actor="user_owner") as other:
                late = write_args("late", blocks=[{"type": "paragraph", "text": "Written meanwhile."}])
                assert (await call(other, "mnote.block.insert", **{**late, "position": "start"}))["ok"]

    person = Person("accept", before=meanwhile)
    async with connect(db, mode, elicitation_callback=person) as client:
        written = await call(client, "mnote.page.save", **write_args("replace-6", **REPLACE))
    assert written["ok"]
    assert [q.split("\n")[1] for q in person.questions] == [
        "Deletes 3 block(s), inserts 1.",
        "Deletes 4 block(s), inserts 1.",
    ]
    assert "  - Written meanwhile." in person.questions[1], "the first line it would now remove"
    assert await _blocks(db) == ["Only this is left."]


async def test_the_question_is_in_the_session_locale(db: Path) -> None:
    person = Person("decline")
    async with connect(db, elicitation_callback=person, locale="zh-CN") as client:
        refused = await call(client, "mnote.page.save", **write_args("replace-7", **REPLACE))
    assert refused["error"]["message"] == "用户拒绝了这次写入，未写入任何内容"
    assert person.questions[0].startswith(
        "确认写入页面《Project plan》（mnote.page.save）？\n删除 3 个块，插入 1 个块。"
    )
    assert "不确认则不会写入任何内容" in person.questions[0]


async def test_the_question_names_tools_as_they_are_advertised(db: Path) -> None:
    person = Person("decline")
    async with connect(db, elicitation_callback=person, tool_names="underscore") as client:
        await call(client, "mnote_page_save", **write_args("replace-8", **REPLACE))
    (question,) = person.questions
    assert (
        "(mnote_page_save)" in question and "(mnote_page_revert)" in question and "mnote.page" not in question
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((), ["stdio asks a client that declares form elicitation"]),
        (
            ("--transport", "http"),
            ["/mcp asks on 2025-11-25 over an SSE answer", "/sse asks"],
        ),
        (("--transport", "http", "--stateless"), ["/mcp cannot ask on 2025-11-25 (--stateless"]),
        (("--confirm-fallback", "write"), ["WRITTEN UNASKED"]),
        (("--confirm", "never"), ["--confirm never: no write asks"]),
    ],
)
def test_start_up_says_which_paths_ask_and_which_fall_back(args: tuple[str, ...], says: list[str]) -> None:
    """Issue 31: the transport chooses nothing silently; start-up says where the person is asked."""
    config = parse(["serve", *args], {})[1]
    lines = "\n".join(consent_paths(config))
    for words in says:
        assert words in lines, lines
    if "--confirm-fallback" not in args and "never" not in args:
        assert "answered with a confirmation handle" in lines


def test_a_handle_must_fit_the_longest_idempotency_key() -> None:
    with pytest.raises(SettingError, match="shorter than a confirmation handle"):
        parse(["serve", "--max-id-chars", "20"], {})
    assert parse(["serve", "--max-id-chars", "20", "--confirm-fallback", "refuse"], {})[1].max_id_chars == 20
