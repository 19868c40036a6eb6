"""Scenarios that write: every command, dry runs, validation, idempotency, revisions and rebase,
history and revert. Each writes only its own pages of the seed (`seed.SCENARIO_PAGES`)."""

from __future__ import annotations

from typing import Any

import anyio

from mnote_mcp.conformance.checks import Registry
from mnote_mcp.conformance.session import Answer, Session
from mnote_mcp.kernel.port import AuditQuery, CommandName, HistoryFilter, HistoryQuery, JSONObject
from mnote_mcp.kernel.protocol import AUDIT_TRAIL, EXECUTE, GET_PAGE, PAGE_HISTORY

registry = Registry()
PARA = [{"type": "paragraph", "text": "new"}]
RACERS = 8


@registry.check(
    "commands.every_command",
    guarantees="every kernel command (save, append, title, options, summary, AI note, block insert,"
    " update, move, delete, text replace) writes as the embedded kernel: outcome, diff, data, revision,"
    " the page after",
    breaks="/v1/commands: the kernel's commands (docs/kernel.md)",
    operations=("execute", "get_page"),
)
async def every_command(s: Session) -> str | None:
    page = "commands"
    append = await s.written(
        s.command(CommandName.PAGE_BODY_SAVE, {"mode": "append", "content": PARA}, page, "append")
    )
    new_id = append.value["data"]["blockIds"][0]
    quote = {
        "content": [{"id": new_id, "type": "quote", "text": "q"}, {"type": "paragraph", "text": "Kept."}]
    }
    await s.written(s.command(CommandName.PAGE_BODY_SAVE, quote, page, "replace"))
    await s.written(s.command(CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "Renamed ✓"}, page, "title"))
    await s.written(
        s.command(CommandName.PAGE_LAYOUT_UPDATE_OPTIONS, {"options": {"showToc": True}}, page, "options")
    )
    await s.written(s.command(CommandName.ARTIFACT_SUMMARY_UPSERT, {"summary": "s"}, page, "summary"))
    await s.written(s.command(CommandName.ARTIFACT_AI_NOTE_CREATE, {"content": "笔记 ✓"}, page, "note"))
    inserted = await s.written(
        s.command(CommandName.PAGE_BLOCK_INSERT, {"blocks": PARA * 2, "afterBlockId": new_id}, page, "insert")
    )
    first, second = inserted.value["data"]["blockIds"]
    await s.written(s.command(CommandName.PAGE_BLOCK_UPDATE, {"blockId": first, "text": "x"}, page, "update"))
    await s.written(
        s.command(CommandName.PAGE_BLOCK_MOVE, {"blockId": second, "position": "start"}, page, "move")
    )
    await s.written(s.command(CommandName.PAGE_BLOCK_DELETE, {"blockIds": [first]}, page, "delete"))
    replace_text = {"edits": [{"oldText": "Kept", "newText": "Still kept"}]}
    await s.written(s.command("page.text.replace", replace_text, page, "text"))
    await s.call(EXECUTE, s.command(CommandName.PAGE_BLOCK_DELETE, {"blockIds": ["nope"]}, page, "missing"))
    await s.call(GET_PAGE, s.query(page), why="the page after every command")
    return "11 commands and the page after them"


@registry.check(
    "commands.dry_run",
    guarantees="a dry run plans the real diff (and names the block ids the real call creates), writes"
    " nothing (no revision, no audit record) and consumes no key",
    breaks="dryRun: a plan that writes nothing",
    operations=("execute", "get_page", "audit_trail"),
)
async def dry_run(s: Session) -> str | None:
    page = "dryrun"
    cases: list[tuple[str, dict[str, object]]] = [
        (CommandName.PAGE_BLOCK_INSERT, {"blocks": PARA, "afterBlockId": "p_1"}),
        (CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "Dry"}),
        (CommandName.ARTIFACT_SUMMARY_UPSERT, {"summary": "dry"}),
    ]
    plans: list[Answer] = []
    for index, (name, payload) in enumerate(cases):
        plans.append(await s.written(s.command(name, payload, page, f"k{index}", dry_run=True)))
    await s.expect_revision(page, 1, "dry runs write nothing")
    trail = await s.call(AUDIT_TRAIL, AuditQuery(trace_id=s.trace, limit=100), why="dry runs are not audited")
    s.expect(trail.value == [], "dry runs leave no audit record", actual=trail.value)
    for index, ((name, payload), plan) in enumerate(zip(cases, plans, strict=True)):
        real = await s.written(s.command(name, payload, page, f"k{index}"), "a dry run consumes no key")
        s.expect(
            real.value["diff"] == plan.value["diff"]
            and real.value["data"].get("blockIds") == plan.value["data"].get("blockIds")
            and not real.value["replayed"]
            and plan.value["commandId"] is None,
            f"{name}: the real call makes the diff (and the block ids) the dry run planned",
            request=real.request,
            expected=plan.value,
            actual=real.value,
        )
    return f"{len(cases)} plans, then the real calls"


@registry.check(
    "commands.validation",
    guarantees="invalid commands are refused invalid_argument with the reason and pointer the embedded"
    " kernel gives (an unknown block type, a schema violation, an unknown command), a non-wired option"
    " fails a real call and warns a dry run; nothing is written",
    breaks="invalid_argument: where and why, nothing written",
    operations=("execute", "get_page"),
)
async def validation(s: Session) -> str | None:
    page = "validation"
    bad: list[tuple[str, dict[str, object]]] = [
        (CommandName.PAGE_BODY_SAVE, {"content": [{"type": "video"}]}),
        (CommandName.PAGE_BODY_SAVE, {"mode": "append", "content": []}),
        (CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "  "}),
        (CommandName.PAGE_LAYOUT_UPDATE_OPTIONS, {"options": {"colour": True}}),
        ("page.body.erase", {}),
        (CommandName.PAGE_LAYOUT_UPDATE_OPTIONS, {"options": {"protectEditing": True}}),
    ]
    for index, (name, payload) in enumerate(bad):
        answer = await s.call(EXECUTE, s.command(name, payload, page, f"bad{index}"))
        s.expect(not answer.ok, f"{name} {payload} is refused", request=answer.request, actual=answer.value)
    await s.call(
        EXECUTE,
        s.command(
            CommandName.PAGE_LAYOUT_UPDATE_OPTIONS,
            {"options": {"protectEditing": True}},
            page,
            "warn",
            dry_run=True,
        ),
        why="a dry run warns of a non-wired option",
    )
    await s.expect_revision(page, 1, "refused commands write nothing")
    return f"{len(bad)} refused, one warned"


# -- idempotency ---------------------------------------------------------------------------------------


@registry.check(
    "idempotency.replay",
    guarantees="the same key with the same command and arguments answers the first outcome (replayed,"
    " same commandId and revision), writes once, and is audited as a replay of the write",
    breaks="idempotency: a retry never writes twice",
    operations=("execute", "get_page", "audit_trail"),
)
async def replay(s: Session) -> str | None:
    page = "replay"
    command = s.command(CommandName.PAGE_BODY_SAVE, {"mode": "append", "content": PARA}, page, "once")
    first = await s.written(command)
    again = await s.written(command, "the retry")
    same = ("commandId", "revision", "diff")
    s.expect(
        again.value["replayed"] is True and all(again.value[k] == first.value[k] for k in same),
        "the retry answers the first outcome, replayed",
        request=again.request,
        expected={**{k: first.value[k] for k in same}, "replayed": True},
        actual={k: again.value.get(k) for k in (*same, "replayed")},
    )
    await s.expect_revision(page, 2, "one write")
    trail = await s.call(AUDIT_TRAIL, AuditQuery(trace_id=s.trace, limit=10))
    records = trail.value
    s.expect(
        [r["effect"] for r in records] == ["write", "replay"]
        and records[1]["replayOf"] == records[0]["commandId"],
        "the trail holds the write and the replay naming it",
        expected=[{"effect": "write"}, {"effect": "replay", "replayOf": "(the write's commandId)"}],
        actual=records,
    )
    return "replayed, written once, audited"


@registry.check(
    "idempotency.conflict",
    guarantees="a key used with other arguments is mnote_tool_idempotency_conflict (reason generic, or"
    " summary), with another command reason other_command naming it; nothing is written",
    breaks="idempotency: a key is one operation",
    operations=("execute", "get_page"),
)
async def key_conflict(s: Session) -> str | None:
    page = "keyconflict"
    await s.written(s.command(CommandName.ARTIFACT_SUMMARY_UPSERT, {"summary": "first"}, page, "k"))
    other = await s.call(
        EXECUTE, s.command(CommandName.ARTIFACT_SUMMARY_UPSERT, {"summary": "other"}, page, "k")
    )
    await s.written(s.command(CommandName.PAGE_BODY_SAVE, {"mode": "append", "content": PARA}, page, "k2"))
    moved = await s.call(
        EXECUTE, s.command(CommandName.PAGE_BODY_SAVE, {"mode": "append", "content": PARA * 2}, page, "k2")
    )
    elsewhere = await s.call(
        EXECUTE, s.command(CommandName.PAGE_BODY_SAVE, {"mode": "append", "content": PARA}, page, "k")
    )
    for answer in (other, moved, elsewhere):
        s.expect_refused(answer, "a used key is a conflict", "mnote_tool_idempotency_conflict")
    await s.expect_revision(page, 2, "the conflicts wrote nothing")
    return "generic, summary and other_command"


@registry.check(
    "idempotency.dry_run_replay",
    guarantees="a dry run with a used key reports the replay: replayed, the first commandId, an empty"
    " diff, the idempotent_replay warning",
    breaks="idempotency: a dry run says what the real call will do",
    operations=("execute",),
)
async def dry_run_replay(s: Session) -> str | None:
    page = "dryreplay"
    first = await s.written(s.command(CommandName.ARTIFACT_AI_NOTE_CREATE, {"content": "n"}, page, "used"))
    plan = await s.written(
        s.command(CommandName.ARTIFACT_AI_NOTE_CREATE, {"content": "n"}, page, "used", dry_run=True)
    )
    s.expect(
        plan.value["replayed"] is True and plan.value["commandId"] == first.value["commandId"],
        "the plan names the write that used the key",
        expected={"replayed": True, "commandId": first.value["commandId"]},
        actual=plan.value,
    )
    return "the replay reported"


@registry.check(
    "idempotency.concurrent",
    guarantees=f"{RACERS} identical commands sent at once write once: one commandId, one of them not a"
    f" replay, one write and {RACERS - 1} replays in the trail",
    breaks="idempotency: concurrent duplicates write once",
    operations=("execute", "audit_trail"),
)
async def concurrent(s: Session) -> str | None:
    command = s.command(CommandName.ARTIFACT_AI_NOTE_CREATE, {"content": "once"}, "race", "race")
    outcomes: list[JSONObject] = []

    async def fire() -> None:
        exchange = await s.send(EXECUTE, command)
        value = exchange.value
        outcomes.append(
            value
            if exchange.answered and isinstance(value, dict)
            else {"refused": exchange.error, "problem": exchange.problem}
        )

    async with anyio.create_task_group() as group:
        for _ in range(RACERS):
            group.start_soon(fire)
    ids = {o.get("commandId") for o in outcomes}
    written = sum(o.get("replayed") is False for o in outcomes)
    s.expect(
        len(ids) == 1 and None not in ids and written == 1,
        f"{RACERS} duplicates: one commandId, one write",
        request=command.to_wire(),
        expected={"commandIds": 1, "not replayed": 1},
        actual=outcomes,
    )
    trail = await s.ask(AUDIT_TRAIL, AuditQuery(trace_id=s.trace, limit=100))
    effects = (
        sorted(record["effect"] for record in AUDIT_TRAIL.decode(trail.value))
        if trail.answered
        else trail.error
    )
    s.expect(effects == ["replay"] * (RACERS - 1) + ["write"], "one write in the trail", actual=effects)
    return f"{RACERS} at once, written once"


# -- revisions ------------------------------------------------------------------------------------


@registry.check(
    "concurrency.stale_revision",
    guarantees="a write with a stale baseRevision is mnote_tool_conflict (reason revision, details"
    " currentRevision and baseRevision), for page and artifact commands alike; nothing is written",
    breaks="optimistic concurrency on baseRevision",
    operations=("execute", "get_page"),
)
async def stale(s: Session) -> str | None:
    page = "stale"
    await s.written(s.command(CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "T1"}, page, "t1", base=1))
    title = await s.call(
        EXECUTE, s.command(CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "T2"}, page, "t2", base=1)
    )
    note = await s.call(
        EXECUTE, s.command(CommandName.ARTIFACT_AI_NOTE_CREATE, {"content": "n"}, page, "n", base=1)
    )
    for answer in (title, note):
        s.expect_refused(answer, "a stale baseRevision is a conflict", "mnote_tool_conflict", "revision")
    await s.expect_revision(page, 2, "the conflicts wrote nothing")
    return "conflicts with the current revision"


@registry.check(
    "concurrency.block_rebase",
    guarantees="a block command on a stale baseRevision goes ahead when its blocks did not change since"
    " (data.rebasedFrom) and is a conflict naming the changed blocks when they did (reason blocks,"
    " details.conflicts); a whole-body save stays page-level",
    breaks="block-level concurrency (rebase)",
    operations=("execute", "get_page"),
)
async def rebase(s: Session) -> str | None:
    page = "rebase"
    update = CommandName.PAGE_BLOCK_UPDATE
    await s.written(s.command(update, {"blockId": "p_1", "text": "A"}, page, "c1", base=1))
    other = await s.written(s.command(update, {"blockId": "p_2", "text": "B"}, page, "c2", base=1))
    s.expect(other.value["data"].get("rebasedFrom") == 1, "an untouched block rebases", actual=other.value)
    same = await s.call(EXECUTE, s.command(update, {"blockId": "p_1", "text": "C"}, page, "c3", base=1))
    s.expect(
        same.refusal == ("mnote_tool_conflict", "blocks"),
        "a changed block is a conflict",
        actual=same.error or same.value,
    )
    await s.call(
        EXECUTE,
        s.command(CommandName.PAGE_BLOCK_INSERT, {"blocks": PARA, "afterBlockId": "p_2"}, page, "c4", base=2),
    )
    await s.call(
        EXECUTE,
        s.command(CommandName.PAGE_BODY_SAVE, {"content": PARA}, page, "c5", base=2),
        why="a replace stays page-level",
    )
    await s.call(GET_PAGE, s.query(page))
    return "rebased, then conflicts"


# -- history and revert -----------------------------------------------------------------------------


@registry.check(
    "history.entries",
    guarantees="page_history lists the page's writes newest first with their correlation ids and compact"
    " diffs, filtered by run, since a revision, in pieces with its cursor; refused as a read",
    breaks="page_history (docs/kernel.md, history)",
    operations=("page_history", "execute"),
)
async def history(s: Session) -> str | None:
    page = "history"
    await s.written(s.command(CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "T"}, page, "h1", run="run_a"))
    await s.written(
        s.command(CommandName.PAGE_BLOCK_UPDATE, {"blockId": "p_1", "text": "x"}, page, "h2", run="run_b")
    )
    await s.written(s.command(CommandName.ARTIFACT_AI_NOTE_CREATE, {"content": "n"}, page, "h3", run="run_b"))
    await s.written(s.command(CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "T"}, page, "h4", run="run_b"))

    def ask(actor: str = "editor", doc: str = page, **fields: Any) -> HistoryQuery:
        return HistoryQuery(s.ws, doc, s.actor(actor), s.correlation(), **fields)

    await s.call(PAGE_HISTORY, ask())
    await s.call(PAGE_HISTORY, ask(filter=HistoryFilter(run_id="run_a")))
    piece = ask(limit=1)
    first = await s.call(PAGE_HISTORY, piece)
    await s.rest(PAGE_HISTORY, piece, first, "one entry of two names a cursor")
    await s.call(PAGE_HISTORY, ask(since_revision=2))
    await s.call(PAGE_HISTORY, ask(limit=1, cursor="kit-junk"), why="a cursor that is none")
    return "whole, by run, in pieces, since a revision"


@registry.check(
    "revert.undo",
    guarantees="page.revert undoes one run's writes (planned by a dry run first) leaving the others',"
    " takes the page back to a revision, changes nothing when it is there already, is a conflict"
    " (reason revert) when a later write touched the same blocks, and not_found for an unknown commandId",
    breaks="page.revert and history",
    operations=("execute", "get_page"),
)
async def revert(s: Session) -> str | None:
    page = "revert"
    update, revert_ = CommandName.PAGE_BLOCK_UPDATE, CommandName.PAGE_REVERT
    await s.written(s.command(update, {"blockId": "p_1", "text": "run"}, page, "r1", run="bad"))
    await s.written(s.command(CommandName.PAGE_BLOCK_DELETE, {"blockIds": ["p_2"]}, page, "r2", run="bad"))
    await s.written(s.command(CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "Mine"}, page, "r3", run="good"))
    await s.written(s.command(revert_, {"runId": "bad"}, page, "r4", dry_run=True))
    await s.written(s.command(revert_, {"runId": "bad"}, page, "r4"))
    await s.call(GET_PAGE, s.query(page), why="the other run's write stays")
    await s.written(s.command(revert_, {"toRevision": 1}, page, "r5"))
    await s.written(s.command(revert_, {"toRevision": 1}, page, "r6"), "already there")
    blocked = "revertblocked"
    await s.written(s.command(update, {"blockId": "p_1", "text": "bad"}, blocked, "x1", run="bad"))
    await s.written(s.command(update, {"blockId": "p_1", "text": "someone else"}, blocked, "x2", run="other"))
    for dry in (True, False):
        refused = await s.call(EXECUTE, s.command(revert_, {"runId": "bad"}, blocked, "x3", dry_run=dry))
        s.expect(
            refused.refusal == ("mnote_tool_conflict", "revert"),
            "a later write blocks the revert",
            actual=refused.error or refused.value,
        )
    await s.call(EXECUTE, s.command(revert_, {"commandId": "kit-no-such-command"}, blocked, "x4"))
    await s.call(GET_PAGE, s.query(blocked))
    return "a run undone, a revision restored, a blocked revert refused"
