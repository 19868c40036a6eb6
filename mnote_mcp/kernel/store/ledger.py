"""The idempotency ledger and the audit log: what was done, by whom, under which key.

One idempotency key is one operation for its actor in a workspace, whichever tool sent it: the same
key with the same command and arguments replays the first outcome, anything else is
`mnote_tool_idempotency_conflict`. A replay is itself audited (effect `replay`): its own correlation
ids and a link to the original (`replay_of`), so a retry is found by its own trace and by the
original's. A write the person refused when asked (`--confirm`, issue 25) is audited too (effect
`refused`, outcome `declined`, `cancelled` or `confirm_timeout`; `confirmation_required` for one held
for a confirmation handle, issue 31), and kept out of the ledger: nothing was done under its key, so
the same key accepted later is written once, not replayed as a refusal. A write's record says how it
was consented (`detail.consent`: `asked`, `handle`, `fallback`, `not_needed`, `own_run`).
The audit log is append-only (database triggers refuse updates and deletes).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.port import AuditRecord, Command, CommandOutcome, Refusal
from mnote_mcp.kernel.store.encoding import dumps, now
from mnote_mcp.kernel.store.sql import Connection, Cursor

REPLAY_WARNING = "idempotent_replay"


@dataclass(frozen=True, slots=True)
class Replay:
    """The first outcome of an operation whose key is used again with the same command and arguments."""

    outcome: CommandOutcome


def fingerprint(command: Command) -> str:
    material = {
        "workspaceId": command.workspace_id,
        "documentId": command.document_id,
        "command": command.name,
        "baseRevision": command.base_revision,
        "payload": command.payload,
    }
    return hashlib.sha256(dumps(material, sort_keys=True).encode()).hexdigest()


def command_id(name: str, trace_id: str) -> str:
    """`page_body_save_<trace>_<nonce>`: the command name, the trace it belongs to, and uniqueness."""
    snake = _SNAKE.get(name)
    if snake is None:
        snake = _SNAKE[name] = "".join(
            f"_{ch.lower()}" if ch.isupper() else ("_" if ch == "." else ch) for ch in name
        )
    # `\w` is `str.isalnum()` or `_`: a character kept as it is, every other one becomes `_`
    trace = _NOT_KEPT.sub("_", trace_id[:64])
    import secrets  # (here: a process that only reads, `runtime cli` answering one, never loads it)

    return f"{snake}_{trace}_{secrets.token_hex(4)}"


_SNAKE: dict[str, str] = {}
_NOT_KEPT = re.compile(r"[^\w-]")


def ask(conn: Connection, command: Command) -> Cursor:
    """The ledger's entries under this command's key, asked for now and read by `lookup` later: on
    PostgreSQL a write's pipeline sends the question with the page lock and the checkpoints, one round
    trip for all of them (the answer is read only once the caller is authorised, and the question
    runs after the lock, so it sees what the page's previous writer committed)."""
    return conn.execute(
        "SELECT command_name, fingerprint, outcome FROM idempotency"
        " WHERE workspace_id = ? AND actor_id = ? AND idem_key = ?",
        (command.workspace_id, command.actor_id, command.idempotency_key),
    )


def lookup(
    conn: Connection, command: Command, print_: str, conflict_reason: Reason, asked: Cursor | None = None
) -> Replay | None:
    """The replay this command's key calls for, None for a new key, or the conflict it is (`asked`:
    the question `ask` sent earlier)."""
    rows = (asked if asked is not None else ask(conn, command)).fetchall()
    if not rows:
        return None
    for name, stored, outcome in rows:
        if name == command.name and stored == print_:
            replay = json.loads(outcome)
            replay["replayed"] = True
            return Replay(CommandOutcome.from_wire(replay))
    details: dict[str, Any] = {"idempotencyKey": command.idempotency_key}
    others = sorted({name for name, _, _ in rows} - {command.name})
    if others:
        details["usedBy"] = others[0]
    raise MnoteError(
        ErrorCode.IDEMPOTENCY_CONFLICT, conflict_reason if not others else Reason.OTHER_COMMAND, details
    )


def record(
    conn: Connection,
    command: Command,
    command_id_: str,
    print_: str,
    revision_before: int,
    outcome: CommandOutcome,
) -> None:
    """The audit record and the ledger entry of a command that ran (changed something or not)."""
    stamp = now()
    _audit(
        conn,
        command,
        command_id_,
        revision_before,
        outcome.revision,
        "write",
        "applied" if outcome.changed else "no_change",
        {
            "ops": len(outcome.diff),
            **{k: v for k, v in outcome.data.items() if k.endswith("Id")},
            **({"consent": command.consent.value} if command.consent is not None else {}),
        },
        None,
        stamp,
    )
    conn.execute(
        "INSERT INTO idempotency (workspace_id, actor_id, command_name, idem_key, fingerprint, command_id,"
        " outcome, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            command.workspace_id,
            command.actor_id,
            command.name,
            command.idempotency_key,
            print_,
            command_id_,
            dumps(outcome.to_wire()),
            stamp,
        ),
    )


def record_replay(conn: Connection, command: Command, replay: CommandOutcome) -> None:
    """A retry answered from the ledger: audited with the retry's own ids, linked to the original."""
    original = replay.command_id or ""
    _audit(
        conn,
        command,
        command_id(command.name, command.correlation.trace_id),
        replay.revision,
        replay.revision,
        "replay",
        "replayed",
        {"replayOf": original},
        original,
        now(),
    )


def record_refusal(conn: Connection, refusal: Refusal, revision: int) -> AuditRecord:
    """The audit record of a refused write (the page at `revision`, unchanged); no ledger entry."""
    command_id_ = command_id(refusal.name, refusal.correlation.trace_id)
    _audit(conn, refusal, command_id_, revision, revision, "refused", refusal.outcome.value, {}, None, now())
    (record,) = audit_trail(conn, trace_id=None, command_id=command_id_, limit=1)
    return record


def _audit(
    conn: Connection,
    command: Command | Refusal,
    command_id_: str,
    revision_before: int,
    revision_after: int,
    effect: str,
    outcome: str,
    detail: dict[str, Any],
    replay_of: str | None,
    stamp: str,
) -> None:
    c = command.correlation
    conn.execute(
        "INSERT INTO audit (command_id, command_name, workspace_id, document_id, actor_id, session_id,"
        " run_id, tool_call_id, trace_id, idempotency_key, revision_before, revision_after, effect, outcome,"
        " detail, created_at, replay_of) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            command_id_,
            command.name,
            command.workspace_id,
            command.document_id,
            command.actor_id,
            c.session_id,
            c.run_id,
            c.tool_call_id,
            c.trace_id,
            command.idempotency_key,
            revision_before,
            revision_after,
            effect,
            outcome,
            dumps(detail),
            stamp,
            replay_of,
        ),
    )


def audit_trail(
    conn: Connection, *, trace_id: str | None, command_id: str | None, limit: int
) -> list[AuditRecord]:
    """Records in commit order (the newest `limit`). A trace or a command id also finds the replays of
    its commands, recorded under the retries' own traces."""
    clauses, params = [], []
    if trace_id is not None:
        clauses.append("(trace_id = ? OR replay_of IN (SELECT command_id FROM audit WHERE trace_id = ?))")
        params += [trace_id, trace_id]
    if command_id is not None:
        clauses.append("(command_id = ? OR replay_of = ?)")
        params += [command_id, command_id]
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = conn.execute(
        "SELECT seq, command_id, command_name, workspace_id, document_id, actor_id, session_id, run_id,"
        " tool_call_id, trace_id, idempotency_key, revision_before, revision_after, effect, outcome, detail,"
        f" created_at, replay_of FROM (SELECT * FROM audit{where} ORDER BY seq DESC LIMIT ?) AS recent ORDER BY seq",
        (*params, limit),
    ).fetchall()
    return [_view(row) for row in rows]


def _view(row: tuple[Any, ...]) -> AuditRecord:
    (seq, cid, name, ws, doc, actor, session, run, call, trace, key, before, after, effect, outcome, detail,
     created, replay_of) = row  # fmt: skip
    return {
        "seq": seq,
        "commandId": cid,
        "commandName": name,
        "workspaceId": ws,
        "documentId": doc,
        "actorId": actor,
        "sessionId": session,
        "runId": run,
        "toolCallId": call,
        "traceId": trace,
        "idempotencyKey": key,
        "revisionBefore": before,
        "revisionAfter": after,
        "effect": effect,
        "outcome": outcome,
        "detail": json.loads(detail),
        "createdAt": created,
        "replayOf": replay_of,
    }


def dry_replay(command: Command, first: CommandOutcome, current: int) -> CommandOutcome:
    """What a dry run with a used key reports: the real call will replay, writing nothing."""
    return CommandOutcome(
        command_name=command.name,
        dry_run=True,
        command_id=first.command_id,
        revision=current,
        changed=False,
        diff=[],
        warnings=[
            {
                "code": REPLAY_WARNING,
                "reason": Reason.REPLAY.value,
                "details": {"commandId": first.command_id},
            }
        ],
        replayed=True,
    )
