"""The artifact commands: a page's summary (one, upserted) and AI notes (one per idempotency key).

An artifact is a row of `artifacts` linked to its page by a `reference` edge, recording who wrote it
with which correlation ids, the page revision it was made from and the commandId. Artifacts never
change the page (its revision, history and search index stay): each command brings its own `apply`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TypedDict

from mnote_mcp.kernel.diff import Op
from mnote_mcp.kernel.errors import Reason
from mnote_mcp.kernel.port import OutcomeData
from mnote_mcp.kernel.scopes import Scope
from mnote_mcp.kernel.store.access import PageHead
from mnote_mcp.kernel.store.commands.spec import CommandSpec, text_field
from mnote_mcp.kernel.store.encoding import now
from mnote_mcp.kernel.store.plan import Plan, Tx
from mnote_mcp.kernel.store.sql import Connection

MAX_ARTIFACT_LENGTH = 100_000


class SummaryPayload(TypedDict):
    summary: str


class NotePayload(TypedDict):
    content: str


def _validate_summary(payload: Mapping[str, object]) -> SummaryPayload:
    return {"summary": text_field(payload, "summary", MAX_ARTIFACT_LENGTH)}


def _validate_note(payload: Mapping[str, object]) -> NotePayload:
    return {"content": text_field(payload, "content", MAX_ARTIFACT_LENGTH)}


def _artifact_id(prefix: str, *parts: str) -> str:
    return f"{prefix}_{hashlib.sha256(chr(0).join(parts).encode()).hexdigest()[:16]}"


def _plan_summary(tx: Tx, p: SummaryPayload) -> Plan:
    page, cmd, conn = tx.page, tx.command, tx.conn
    text = p["summary"]
    row = conn.execute(
        "SELECT id, content FROM artifacts WHERE workspace_id = ? AND page_id = ? AND kind = 'summary'",
        (page.workspace_id, page.id),
    ).fetchone()
    artifact_id = row[0] if row else _artifact_id("sum", page.workspace_id, page.id)
    edge_id = _artifact_id("edge", artifact_id, page.id, "reference")
    edge_exists = row is not None and _edge_exists(conn, artifact_id, page.id)
    data: OutcomeData = {
        "artifactId": artifact_id,
        "edgeId": edge_id,
        "kind": "summary",
        "sourceRevision": page.revision,
    }
    diff: list[Op] = []
    if row is None or row[1] != text:
        diff.append({"op": "update" if row else "create", "artifact": "summary", "artifactId": artifact_id})
    diff.append({"op": "confirm" if edge_exists else "create", "edge": "reference", "edgeId": edge_id})
    changed = row is None or row[1] != text or not edge_exists

    def apply(conn: Connection, command_id: str) -> int:
        c = cmd.correlation
        stamp = now()
        provenance = (cmd.actor_id, c.session_id, c.run_id, c.tool_call_id, c.trace_id, command_id)
        if row is None:
            conn.execute(
                "INSERT INTO artifacts (id, workspace_id, page_id, kind, content, version, source_revision,"
                " actor_id, session_id, run_id, tool_call_id, trace_id, command_id, created_at, updated_at)"
                " VALUES (?, ?, ?, 'summary', ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (artifact_id, page.workspace_id, page.id, text, page.revision, *provenance, stamp, stamp),
            )
        elif row[1] != text:
            conn.execute(
                "UPDATE artifacts SET content = ?, version = version + 1, source_revision = ?, actor_id = ?,"
                " session_id = ?, run_id = ?, tool_call_id = ?, trace_id = ?, command_id = ?, updated_at = ?"
                " WHERE id = ?",
                (text, page.revision, *provenance, stamp, artifact_id),
            )
        if not edge_exists:
            _insert_edge(conn, edge_id, page, artifact_id, stamp)
        return page.revision

    return Plan(diff=diff, changed=changed, apply=apply, data=data)


def _plan_note(tx: Tx, p: NotePayload) -> Plan:
    page, cmd = tx.page, tx.command
    text = p["content"]
    artifact_id = _artifact_id("note", page.workspace_id, page.id, cmd.actor_id, cmd.idempotency_key)
    edge_id = _artifact_id("edge", artifact_id, page.id, "reference")
    data: OutcomeData = {
        "artifactId": artifact_id,
        "edgeId": edge_id,
        "kind": "ai_note",
        "sourceRevision": page.revision,
    }
    diff: list[Op] = [
        {"op": "create", "artifact": "ai_note", "artifactId": artifact_id},
        {"op": "create", "edge": "reference", "edgeId": edge_id},
    ]

    def apply(conn: Connection, command_id: str) -> int:
        c = cmd.correlation
        stamp = now()
        conn.execute(
            "INSERT INTO artifacts (id, workspace_id, page_id, kind, content, version, source_revision,"
            " actor_id, session_id, run_id, tool_call_id, trace_id, command_id, created_at, updated_at)"
            " VALUES (?, ?, ?, 'ai_note', ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                artifact_id,
                page.workspace_id,
                page.id,
                text,
                page.revision,
                cmd.actor_id,
                c.session_id,
                c.run_id,
                c.tool_call_id,
                c.trace_id,
                command_id,
                stamp,
                stamp,
            ),
        )
        _insert_edge(conn, edge_id, page, artifact_id, stamp)
        return page.revision

    return Plan(diff=diff, changed=True, apply=apply, data=data)


def _edge_exists(conn: Connection, artifact_id: str, page_id: str) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM edges WHERE from_id = ? AND to_page_id = ? AND kind = 'reference'",
            (artifact_id, page_id),
        ).fetchone()
        is not None
    )


def _insert_edge(conn: Connection, edge_id: str, page: PageHead, artifact_id: str, stamp: str) -> None:
    conn.execute(
        "INSERT INTO edges (id, workspace_id, from_id, to_page_id, kind, created_at)"
        " VALUES (?, ?, ?, ?, 'reference', ?)",
        (edge_id, page.workspace_id, artifact_id, page.id, stamp),
    )


SUMMARY = CommandSpec(
    name="artifact.summary.upsert",
    scope=Scope.ARTIFACT_WRITE,
    payload="{summary}",
    does="write the page's summary (one per page, replaced)",
    validate=_validate_summary,
    plan=_plan_summary,
    conflict_reason=Reason.SUMMARY,
)
NOTE = CommandSpec(
    name="artifact.aiNote.create",
    scope=Scope.ARTIFACT_WRITE,
    payload="{content}",
    does="add an AI note to the page (one per idempotency key)",
    validate=_validate_note,
    plan=_plan_note,
)

COMMANDS = (SUMMARY, NOTE)
