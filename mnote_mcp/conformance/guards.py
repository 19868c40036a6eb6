"""Scenarios about what guards the data: the request envelope, refused writes, the page size limit,
audit records that trace into the kernel, and refusals that reveal nothing (checked last, over every
refusal the run received)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping

from mnote_mcp.base.tracecontext import traceparent
from mnote_mcp.conformance.checks import Registry
from mnote_mcp.conformance.compare import normal
from mnote_mcp.conformance.session import PERMISSION_CODES, Answer, NotApplicableError, Session
from mnote_mcp.conformance.wire import CliWire, HttpWire
from mnote_mcp.kernel.blocks import MAX_BLOCKS, MAX_TEXT_LENGTH
from mnote_mcp.kernel.port import AuditQuery, CommandName, HistoryQuery, JSONObject, Refused
from mnote_mcp.kernel.protocol import (
    AUDIT_TRAIL,
    EXECUTE,
    IDEMPOTENCY_HEADER,
    PAGE_HISTORY,
    RECORD_REFUSAL,
    TRACEPARENT_HEADER,
    encode_key,
)

registry = Registry()
HTTP_ONLY = frozenset({"http"})
MAX_REQUEST_TEXT = 4 * 1024 * 1024  # of block text per write when the kit fills a page
# The one refusal that carries page text by design (docs/security.md): a text edit's candidates.
SHOWS_TEXT = frozenset({"text_ambiguous", "text_missing"})


# -- the envelope -------------------------------------------------------------------------------------


@registry.check(
    "envelope.idempotency_header",
    guarantees="a command whose Idempotency-Key header is missing or differs from its body's"
    " idempotencyKey is refused 400 invalid_argument, nothing written",
    breaks="Headers: the Idempotency-Key header equals the body's key",
    operations=("execute", "get_page"),
    transports=HTTP_ONLY,
)
async def idempotency_header(s: Session) -> str | None:
    wire = s.wire
    assert isinstance(wire, HttpWire)
    command = s.command(CommandName.ARTIFACT_AI_NOTE_CREATE, {"content": "n"}, "envelope", "header")
    body = command.to_wire()
    base = {**wire.auth_headers(), TRACEPARENT_HEADER: traceparent(s.trace)}
    for name, headers in (
        ("no header", base),
        ("another key", {**base, IDEMPOTENCY_HEADER: encode_key("kit-other")}),
    ):
        exchange = await wire.exchange(EXECUTE, body, headers)
        s.expect(
            exchange.status == 400
            and exchange.error is not None
            and exchange.error.get("code") == "mnote_tool_invalid_argument",
            f"a command with {name} must be refused 400 invalid_argument",
            request=body,
            expected={"status": 400, "error": {"code": "mnote_tool_invalid_argument"}},
            actual=f"{exchange.status}: {exchange.problem or exchange.text}",
        )
    await s.expect_revision("envelope", 1, "nothing written")
    return "refused without it and with another"


@registry.check(
    "envelope.schema_refusal",
    guarantees="a request that breaks its schema is refused invalid_argument, reason envelope, with the"
    " JSON pointer of the problem, nothing written",
    breaks="Schemas: what the runtime checks each request against",
    operations=("execute", "get_page"),
)
async def schema_refusal(s: Session) -> str | None:
    command = s.command(CommandName.ARTIFACT_AI_NOTE_CREATE, {"content": "n"}, "envelope", "broken")
    broken = {**command.to_wire(), "dryRun": "no"}
    wire = s.wire
    if isinstance(wire, HttpWire):
        headers = {**wire.auth_headers(), IDEMPOTENCY_HEADER: encode_key(command.idempotency_key)}
        exchange = await wire.exchange(EXECUTE, broken, headers)
        pointer = "/dryRun"
    else:
        assert isinstance(wire, CliWire)
        exchange = await wire.exchange(EXECUTE, broken)
        pointer = "/command/dryRun"
    error: JSONObject = exchange.error or {}
    found = error.get("details")
    details: JSONObject = found if isinstance(found, dict) else {}
    s.expect(
        (error.get("code"), error.get("reason"), details.get("pointer"))
        == ("mnote_tool_invalid_argument", "envelope", pointer)
        and exchange.status in (None, 400),
        "a command whose dryRun is no boolean is refused at its pointer",
        request=broken,
        expected={
            "error": {
                "code": "mnote_tool_invalid_argument",
                "reason": "envelope",
                "details": {"pointer": pointer},
            }
        },
        actual=f"{exchange.status}: {exchange.problem or exchange.text}"
        if exchange.status
        else exchange.problem or exchange.text,
    )
    await s.expect_revision("envelope", 1, "nothing written")
    return f"refused at {pointer}"


@registry.check(
    "envelope.key_encoding",
    guarantees="an idempotency key with spaces, non-ASCII and % (percent-encoded in the HTTP header)"
    " reaches the kernel intact: the audit record keeps it as sent",
    breaks="Headers: Idempotency-Key percent-decoding",
    operations=("execute", "audit_trail"),
)
async def key_encoding(s: Session) -> str | None:
    command = s.command(
        CommandName.ARTIFACT_AI_NOTE_CREATE, {"content": "笔记 ✓"}, "keys", '幂等 键/%20;"quoted"'
    )
    await s.written(command)
    trail = await s.call(AUDIT_TRAIL, AuditQuery(trace_id=s.trace, limit=10))
    keys = [record.get("idempotencyKey") for record in trail.value]
    s.expect(
        keys == [command.idempotency_key],
        "the audit record keeps the key as sent",
        expected=[command.idempotency_key],
        actual=keys,
    )
    return "kept as sent"


# -- refused writes ------------------------------------------------------------------------------------


@registry.check(
    "refusals.record_refusal",
    guarantees="record_refusal audits a write the person refused (effect refused, the outcome, the"
    " call's ids, the revision unchanged) and writes nothing else: the key is still a new write;"
    " refused as the command itself would be",
    breaks="/v1/refusals: a refused write is audited, never run",
    operations=("record_refusal", "audit_trail", "execute", "get_page"),
)
async def record_refusal(s: Session) -> str | None:
    page = "refusal"
    for outcome in Refused:
        await s.call(RECORD_REFUSAL, s.refusal(page, "no", outcome))
    await s.expect_revision(page, 1, "a refusal writes no page")
    await s.call(AUDIT_TRAIL, AuditQuery(trace_id=s.trace, limit=10), why="three refusal records")
    written = await s.written(
        s.command(
            CommandName.PAGE_BODY_SAVE,
            {"mode": "append", "content": [{"type": "paragraph", "text": "new"}]},
            page,
            "no",
        )
    )
    s.expect(written.value["replayed"] is False, "the refused key is still a new write", actual=written.value)
    await s.call(RECORD_REFUSAL, s.refusal(page, "viewer", actor="viewer"))
    await s.call(RECORD_REFUSAL, s.refusal(page, "stranger", actor="stranger"))
    await s.call(RECORD_REFUSAL, s.refusal(page, "unknown", name="page.nuke"))
    await s.call(AUDIT_TRAIL, AuditQuery(trace_id=s.trace, limit=10), why="a refused refusal records nothing")
    return "three outcomes audited, three refusals refused"


# -- the page size limit ----------------------------------------------------------------------------------


def _chunks(blocks: list[dict[str, str]]) -> Iterator[list[dict[str, str]]]:
    """Writes of at most MAX_BLOCKS blocks and MAX_REQUEST_TEXT characters of text each."""
    chunk: list[dict[str, str]] = []
    size = 0
    for block in blocks:
        text = len(block.get("text", ""))
        if chunk and (len(chunk) >= MAX_BLOCKS or size + text > MAX_REQUEST_TEXT):
            yield chunk
            chunk, size = [], 0
        chunk.append(block)
        size += text
    if chunk:
        yield chunk


async def _fill(s: Session, page: str, blocks: list[dict[str, str]], what: str) -> int:
    """Replace the page's body with `blocks`, in as many writes as it takes; returns the revision."""
    revision = 1
    for index, chunk in enumerate(_chunks(blocks)):
        payload = {"content": chunk} if index == 0 else {"mode": "append", "content": chunk}
        answer = await s.call(
            EXECUTE, s.command(CommandName.PAGE_BODY_SAVE, payload, page, f"fill{index}"), why=what
        )
        s.expect(
            answer.ok,
            f"a page at the limit must be written ({what}); is the kit's limit the runtime's"
            " (--max-page-blocks, --max-page-bytes)?",
            request=f"{len(chunk)} blocks",
            actual=answer.error,
        )
        revision = int(answer.value["revision"])
    return revision


async def _one_past(
    s: Session, page: str, revision: int, payload: Mapping[str, object], name: str, limit: str
) -> None:
    for dry in (True, False):
        answer = await s.call(
            EXECUTE, s.command(name, payload, page, f"past_{dry}", dry_run=dry), why=f"one past {limit}"
        )
        s.expect_refused(
            answer,
            f"a write one past the limit must be refused page_too_large ({limit})",
            "mnote_tool_invalid_argument",
            "page_too_large",
        )
    await s.expect_revision(page, revision, "the refused writes wrote nothing")


@registry.check(
    "limits.page_blocks",
    guarantees="a page of exactly --max-page-blocks blocks is written; one block more is refused"
    " invalid_argument page_too_large (limit maxPageBlocks), dry run and real call, nothing written",
    breaks="the page size limit (docs/kernel.md): every kernel owes it",
    operations=("execute", "get_page"),
)
async def page_blocks(s: Session) -> str | None:
    page, most = "limitblocks", s.limits.max_blocks
    blocks = [{"id": f"d{i}", "type": "divider"} for i in range(most)]
    size = sum(len(block["id"]) + len(block["type"]) for block in blocks)
    if size > s.limits.max_bytes:
        raise NotApplicableError(
            f"{most} blocks need at least {size} bytes, over --max-page-bytes {s.limits.max_bytes}"
        )
    revision = await _fill(s, page, blocks, f"{most} blocks")
    extra = {"mode": "append", "content": [{"id": f"d{most}", "type": "divider"}]}
    await _one_past(s, page, revision, extra, CommandName.PAGE_BODY_SAVE, "maxPageBlocks")
    return f"{most} blocks written, {most + 1} refused"


def _text_blocks(total: int) -> list[dict[str, str]] | None:
    """Paragraphs whose bytes (id, type, text: docs/kernel.md) add up to exactly `total`, each text
    short enough to take one character more; None when even one block is larger."""
    blocks: list[dict[str, str]] = []
    remaining = total
    room = MAX_TEXT_LENGTH - 1
    while remaining > 0:
        block_id = f"t{len(blocks)}"
        overhead = len(block_id) + len("paragraph")
        if remaining < overhead:
            return None
        take = min(room, remaining - overhead)
        left = remaining - overhead - take
        following = len(f"t{len(blocks) + 1}") + len("paragraph")
        if 0 < left < following:  # what is left could not be a block: leave it more
            take -= following - left
        blocks.append({"id": block_id, "type": "paragraph", "text": "x" * take})
        remaining -= overhead + take
    return blocks


@registry.check(
    "limits.page_bytes",
    guarantees="a page of exactly --max-page-bytes bytes of block content (ids, types, text) is written;"
    " one byte more is refused invalid_argument page_too_large (limit maxPageBytes), dry run and real"
    " call, nothing written",
    breaks="the page size limit (docs/kernel.md): every kernel owes it",
    operations=("execute", "get_page"),
)
async def page_bytes(s: Session) -> str | None:
    page, most = "limitbytes", s.limits.max_bytes
    blocks = _text_blocks(most)
    if blocks is None or len(blocks) > s.limits.max_blocks:
        raise NotApplicableError(
            f"{most} bytes cannot be laid out within --max-page-blocks {s.limits.max_blocks}"
        )
    revision = await _fill(s, page, blocks, f"{most} bytes")
    last = blocks[-1]
    longer = {"blockId": last["id"], "text": last["text"] + "x"}
    await _one_past(s, page, revision, longer, CommandName.PAGE_BLOCK_UPDATE, "maxPageBytes")
    return f"{most} bytes in {len(blocks)} blocks written, one byte more refused"


# -- audit ----------------------------------------------------------------------------------------------


@registry.check(
    "audit.command_id",
    guarantees="the commandId a write's outcome names is the audit record's: the audit lookup by it finds"
    " that write (and a refusal record by its own), and the page's history names it at its revision",
    breaks="audit commandIds trace into the kernel (the envelope's audit.commandId)",
    operations=("execute", "audit_trail", "record_refusal", "page_history"),
)
async def command_id(s: Session) -> str | None:
    page = "audit"
    title = await s.written(s.command(CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "Audited"}, page, "a1"))
    summary = await s.written(s.command(CommandName.ARTIFACT_SUMMARY_UPSERT, {"summary": "s"}, page, "a2"))
    refused = await s.call(RECORD_REFUSAL, s.refusal(page, "a3", Refused.CANCELLED))
    for answer in (title, summary, refused):
        await _found(s, answer)
    history = await s.call(PAGE_HISTORY, HistoryQuery(s.ws, page, s.actor("editor"), s.correlation()))
    named = {entry.get("revision"): entry.get("commandId") for entry in history.value.get("entries", [])}
    s.expect(
        named.get(title.value["revision"]) == title.value["commandId"],
        "the history entry of the write names the outcome's commandId",
        expected={title.value["revision"]: title.value["commandId"]},
        actual=named,
    )
    missing = await s.call(AUDIT_TRAIL, AuditQuery(command_id=f"kit_{s.nonce}_no_such_command", limit=10))
    s.expect(missing.value == [], "an unknown commandId finds nothing", actual=missing.value)
    return "two writes and a refusal found by their commandIds"


async def _found(s: Session, answer: Answer) -> None:
    command_id, mirror_id = answer.value["commandId"], (answer.expected_value or {}).get("commandId")
    lookup = await s.call(
        AUDIT_TRAIL,
        AuditQuery(command_id=command_id, limit=10),
        mirror=AuditQuery(command_id=mirror_id, limit=10),
        why=f"the audit lookup of {command_id}",
    )
    s.expect(
        [record.get("commandId") for record in lookup.value] == [command_id],
        "the audit lookup by the commandId a reply named finds that record",
        request={"commandId": command_id},
        expected=[{"commandId": command_id}],
        actual=lookup.value,
    )


@registry.check(
    "audit.trace",
    guarantees="the audit lookup by traceId lists the trace's records in commit order with the actor,"
    " key, correlation ids, revisions and effect the embedded kernel records, the newest `limit`; dry"
    " runs are not audited",
    breaks="the audit record of every command (docs/kernel.md)",
    operations=("execute", "audit_trail"),
)
async def trace(s: Session) -> str | None:
    page = "audittrace"
    await s.written(s.command(CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "A"}, page, "t1"))
    await s.written(s.command(CommandName.ARTIFACT_SUMMARY_UPSERT, {"summary": "s"}, page, "t2"))
    await s.written(s.command(CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "B"}, page, "t3", dry_run=True))
    await s.call(AUDIT_TRAIL, AuditQuery(trace_id=s.trace, limit=10))
    await s.call(AUDIT_TRAIL, AuditQuery(trace_id=s.trace, limit=1), why="the newest one")
    await s.call(AUDIT_TRAIL, AuditQuery(trace_id=f"{s.trace}_none", limit=10), why="an unused trace")
    return "two records, the newest, none"


# -- what refusals reveal ------------------------------------------------------------------------------


@registry.check(
    "refusals.reveal_nothing",
    guarantees="no refusal the runtime gave in the whole run carries a title, workspace name or block"
    " text of the seed (the restricted page's canaries included), and a permission refusal's details"
    " are the embedded kernel's (ids only)",
    breaks="refusals reveal nothing (docs/security.md): details hold ids, revisions, option names, pointers",
    operations=(),
)
async def reveal_nothing(s: Session) -> str | None:
    if not s.refusals:
        raise NotApplicableError("the run received no refusal to look at")
    canaries = s.scratch.canaries()
    for seen in s.refusals:
        error = seen.exchange.error or {}
        if error.get("reason") in SHOWS_TEXT:
            continue
        text = seen.exchange.text + json.dumps(error, ensure_ascii=False)
        leaked = [canary for canary in canaries if canary in text]
        s.expect(
            not leaked,
            f"a refusal of {seen.op} carries {leaked[:1]} (text of the seed no refusal may hold)",
            request=seen.request,
            expected={"error": seen.expected} if seen.expected else "a refusal of ids only",
            actual=seen.exchange.text or error,
        )
        expected = seen.expected
        if (
            error.get("code") in PERMISSION_CODES
            and expected is not None
            and expected.get("code") == error.get("code")
        ):
            s.expect(
                normal(error.get("details", {})) == normal(expected.get("details", {})),
                f"a {error.get('code')} refusal of {seen.op} holds details the embedded kernel's does not",
                request=seen.request,
                expected={"error": expected},
                actual={"error": error},
            )
    return f"{len(s.refusals)} refusals, none revealing anything"
