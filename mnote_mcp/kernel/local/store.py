"""One SQLite file holding the whole kernel state, shared safely by any number of processes.

Every command runs in one `BEGIN IMMEDIATE` transaction: the idempotency ledger is checked, the page
revision compared, the change applied, the audit record and the ledger entry written, then committed,
so two server processes racing on one key serialise on the database lock and the second one replays.
A dry run only ever opens a read transaction, so it cannot write even by mistake. WAL mode lets
readers run while a writer commits.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from mnote_mcp.kernel.blocks import Block
from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.local.commands import COMMANDS, Plan
from mnote_mcp.kernel.local.encoding import dumps, now
from mnote_mcp.kernel.local.schema import DDL, DEFAULT_OPTION_REGISTRY, SCHEMA_VERSION
from mnote_mcp.kernel.policy import COMMAND_SCOPES, DENIAL_REASON, Scope, effective_role, grants_of
from mnote_mcp.kernel.port import Command, CommandName, CommandOutcome, PageKey, PageQuery, PageRef
from mnote_mcp.kernel.view import check_query, page_view

BUSY_TIMEOUT_SECONDS = 30.0
_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


class StoreBusyError(Exception):
    """The call would have to wait for another connection's lock (raised only when told not to wait)."""


def _is_busy(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and getattr(exc, "sqlite_errorcode", None) in _BUSY_CODES


@dataclass
class PageRow:
    """A page as read inside a command's transaction. The body is decoded only if the command looks
    at it: a title, option or artifact command never pays for parsing a long page."""

    workspace_id: str
    id: str
    title: str
    options: dict[str, Any]
    body_json: str
    revision: int
    restricted: bool

    @cached_property
    def blocks(self) -> list[Block]:
        decoded: list[Block] = json.loads(self.body_json)
        return decoded


class LocalStore:
    """The synchronous kernel core. Use it from worker threads; each thread gets its own connection."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self.created = self._init_schema()

    # -- connections and transactions ---------------------------------------------------------

    def _conn(self, wait: bool = True) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None and self._local.wait != wait:
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000) if wait else 0}")
            self._local.wait = wait
        if conn is None:
            # Each connection is only used by the thread that made it; close() may run elsewhere.
            conn = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA synchronous = NORMAL")
            if not wait:
                conn.execute("PRAGMA busy_timeout = 0")
            self._local.conn = conn
            self._local.wait = wait
            with self._lock:
                self._connections.append(conn)
        return conn

    @contextmanager
    def transaction(self, *, write: bool, wait: bool = True) -> Iterator[sqlite3.Connection]:
        """One transaction; with `wait=False`, raises `StoreBusyError` instead of waiting for a lock."""
        conn = self._conn(wait)
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        except sqlite3.OperationalError as exc:
            if not wait and _is_busy(exc):
                raise StoreBusyError from exc
            raise
        try:
            yield conn
        except BaseException as exc:
            conn.execute("ROLLBACK")
            if not wait and _is_busy(exc):
                raise StoreBusyError from exc
            raise
        conn.execute("COMMIT")

    def _init_schema(self) -> bool:
        """Create or check the schema; True when this call created the store.

        An up-to-date store is only read (no write lock), so opening it never waits for another
        process's write.
        """
        conn = self._conn()
        if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
            return False
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        with self.transaction(write=True) as tx:
            version = tx.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise RuntimeError(
                    f"{self.path} has schema version {version}; this mnote-mcp knows {SCHEMA_VERSION}"
                )
            if version == SCHEMA_VERSION:
                return False  # another process created it meanwhile
            for statement in _statements(DDL):
                tx.execute(statement)
            tx.executemany(
                "INSERT OR IGNORE INTO option_registry (name, runtime_support) VALUES (?, ?)",
                DEFAULT_OPTION_REGISTRY.items(),
            )
            tx.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            return True

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()

    def dump(self) -> str:
        """Every row of the store as SQL text: what tests compare to prove that nothing was written."""
        with self.transaction(write=False) as conn:
            return "\n".join(conn.iterdump())

    # -- reads --------------------------------------------------------------------------------

    def get_page(self, query: PageQuery, *, wait: bool = True) -> dict[str, Any]:
        check_query(query)
        with self.transaction(write=False, wait=wait) as conn:
            page = self.authorize(
                conn, query.workspace_id, query.document_id, query.actor_id, Scope.PAGE_READ
            )
        return page_view(
            query, title=page.title, options=page.options, blocks=page.blocks, revision=page.revision
        )

    def list_pages(self, actor_id: str, *, wait: bool = True) -> list[PageRef]:
        with self.transaction(write=False, wait=wait) as conn:
            rows = conn.execute(
                "SELECT p.workspace_id, p.id, p.title, p.revision, p.restricted, m.role, a.role"
                " FROM members m JOIN pages p ON p.workspace_id = m.workspace_id"
                " LEFT JOIN page_access a ON a.workspace_id = p.workspace_id AND a.page_id = p.id"
                " AND a.actor_id = m.actor_id"
                " WHERE m.actor_id = ? ORDER BY p.workspace_id, p.id",
                (actor_id,),
            ).fetchall()
        return [
            PageRef(workspace_id=ws, document_id=doc, title=title, revision=rev)
            for ws, doc, title, rev, restricted, role, page_role in rows
            if Scope.PAGE_READ in grants_of(effective_role(role, page_role, bool(restricted)))
        ]

    def page_revisions(
        self, actor_id: str, pages: Sequence[PageKey], *, wait: bool = True
    ) -> dict[PageKey, int]:
        if not actor_id:
            return {}
        revisions: dict[PageKey, int] = {}
        with self.transaction(write=False, wait=wait) as conn:
            for key in dict.fromkeys(pages):
                row = conn.execute(
                    "SELECT p.revision, p.restricted, m.role, a.role"
                    " FROM members m JOIN pages p ON p.workspace_id = m.workspace_id"
                    " LEFT JOIN page_access a ON a.workspace_id = p.workspace_id AND a.page_id = p.id"
                    " AND a.actor_id = m.actor_id"
                    " WHERE m.actor_id = ? AND p.workspace_id = ? AND p.id = ?",
                    (actor_id, key.workspace_id, key.document_id),
                ).fetchone()
                if row is None:
                    continue
                revision, restricted, role, page_role = row
                if Scope.PAGE_READ in grants_of(effective_role(role, page_role, bool(restricted))):
                    revisions[key] = revision
        return revisions

    def audit_trail(
        self,
        *,
        trace_id: str | None = None,
        command_id: str | None = None,
        limit: int = 100,
        wait: bool = True,
    ) -> list[dict[str, Any]]:
        clauses, params = [], []
        if trace_id is not None:
            clauses.append("trace_id = ?")
            params.append(trace_id)
        if command_id is not None:
            clauses.append("command_id = ?")
            params.append(command_id)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        with self.transaction(write=False, wait=wait) as conn:
            conn.row_factory = sqlite3.Row
            try:
                rows = conn.execute(
                    f"SELECT * FROM (SELECT * FROM audit{where} ORDER BY seq DESC LIMIT ?) ORDER BY seq",
                    (*params, limit),
                ).fetchall()
            finally:
                conn.row_factory = None
        return [_audit_view(dict(row)) for row in rows]

    # -- permission checkpoints ----------------------------------------------------------------

    def authorize(
        self, conn: sqlite3.Connection, workspace_id: str, document_id: str, actor_id: str, need: Scope
    ) -> PageRow:
        """Login, workspace member, page read, then the write grant the command needs, in that order.

        A non-member learns nothing about the workspace's pages: a missing page and a forbidden one
        give the same refusal, decided before the page is looked at.
        """
        if not actor_id:
            raise MnoteError(ErrorCode.UNAUTHENTICATED, Reason.NO_ACTOR)
        # One query for both checkpoints; which of them fails is read from the row, in order.
        row = conn.execute(
            "SELECT m.role, p.id, p.title, p.options, p.blocks, p.revision, p.restricted, a.role"
            " FROM members m"
            " LEFT JOIN pages p ON p.workspace_id = m.workspace_id AND p.id = ?"
            " LEFT JOIN page_access a ON a.workspace_id = p.workspace_id AND a.page_id = p.id"
            " AND a.actor_id = m.actor_id"
            " WHERE m.workspace_id = ? AND m.actor_id = ?",
            (document_id, workspace_id, actor_id),
        ).fetchone()
        if row is None:
            raise MnoteError(ErrorCode.PERMISSION_DENIED, Reason.NOT_MEMBER, {"workspaceId": workspace_id})
        role, found, title, options, blocks, revision, restricted, page_role = row
        if found is None:
            raise MnoteError(
                ErrorCode.NOT_FOUND, Reason.PAGE, {"workspaceId": workspace_id, "documentId": document_id}
            )
        grants = grants_of(effective_role(role, page_role, bool(restricted)))
        for grant in (Scope.PAGE_READ, need):
            if grant not in grants:
                raise MnoteError(
                    ErrorCode.PERMISSION_DENIED, DENIAL_REASON[grant], {"documentId": document_id}
                )
        return PageRow(
            workspace_id=workspace_id,
            id=document_id,
            title=title,
            options=json.loads(options),
            body_json=blocks,
            revision=revision,
            restricted=bool(restricted),
        )

    def check_access(
        self, workspace_id: str, document_id: str, actor_id: str, need: Scope, *, wait: bool = True
    ) -> None:
        """The permission checkpoints alone (the kernel port's `authorize`)."""
        with self.transaction(write=False, wait=wait) as conn:
            self.authorize(conn, workspace_id, document_id, actor_id, need)

    def option_registry(self, conn: sqlite3.Connection) -> dict[str, str]:
        return dict(conn.execute("SELECT name, runtime_support FROM option_registry").fetchall())

    # -- commands -----------------------------------------------------------------------------

    def execute(self, command: Command, *, wait: bool = True) -> CommandOutcome:
        spec = COMMANDS.get(command.name)
        if spec is None:
            raise MnoteError(ErrorCode.INVALID_ARGUMENT, Reason.UNKNOWN_COMMAND, {"command": command.name})
        payload = spec.validate(command.payload)
        fingerprint = _fingerprint(command)
        with self.transaction(write=not command.dry_run, wait=wait) as conn:
            page = self.authorize(
                conn,
                command.workspace_id,
                command.document_id,
                command.actor_id,
                COMMAND_SCOPES[CommandName(command.name)],
            )
            earlier = self._ledger_entry(conn, command, fingerprint, spec.conflict_reason)
            if earlier is not None and not command.dry_run:
                return earlier
            if command.base_revision is not None and command.base_revision != page.revision:
                raise MnoteError(
                    ErrorCode.CONFLICT,
                    Reason.REVISION,
                    {"currentRevision": page.revision, "baseRevision": command.base_revision},
                )
            plan = spec.plan(self, conn, page, command, payload)
            if command.dry_run:
                warnings = list(plan.warnings)
                if earlier is not None:
                    warnings.append(
                        {
                            "code": "idempotent_replay",
                            "reason": Reason.REPLAY.value,
                            "details": {"commandId": earlier.command_id},
                        }
                    )
                return _outcome(command, plan, None, page.revision, warnings)
            command_id = _command_id(command)
            revision = plan.apply(conn, command_id) if plan.changed and plan.apply else page.revision
            outcome = _outcome(command, plan, command_id, revision, plan.warnings)
            self._record(conn, command, command_id, fingerprint, page.revision, outcome)
            return outcome

    def _ledger_entry(
        self, conn: sqlite3.Connection, command: Command, fingerprint: str, conflict_reason: Reason
    ) -> CommandOutcome | None:
        row = conn.execute(
            "SELECT fingerprint, outcome FROM idempotency"
            " WHERE workspace_id = ? AND actor_id = ? AND command_name = ? AND idem_key = ?",
            (command.workspace_id, command.actor_id, command.name, command.idempotency_key),
        ).fetchone()
        if row is None:
            return None
        if row[0] != fingerprint:
            raise MnoteError(
                ErrorCode.IDEMPOTENCY_CONFLICT, conflict_reason, {"idempotencyKey": command.idempotency_key}
            )
        replay = json.loads(row[1])
        replay["replayed"] = True
        return CommandOutcome.from_wire(replay)

    def _record(
        self,
        conn: sqlite3.Connection,
        command: Command,
        command_id: str,
        fingerprint: str,
        revision_before: int,
        outcome: CommandOutcome,
    ) -> None:
        c = command.correlation
        stamp = now()
        conn.execute(
            "INSERT INTO audit (command_id, command_name, workspace_id, document_id, actor_id, session_id,"
            " run_id, tool_call_id, trace_id, idempotency_key, revision_before, revision_after, effect, outcome,"
            " detail, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'write', ?, ?, ?)",
            (
                command_id,
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
                outcome.revision,
                "applied" if outcome.changed else "no_change",
                dumps(
                    {"ops": len(outcome.diff), **{k: v for k, v in outcome.data.items() if k.endswith("Id")}}
                ),
                stamp,
            ),
        )
        conn.execute(
            "INSERT INTO idempotency (workspace_id, actor_id, command_name, idem_key, fingerprint, command_id,"
            " outcome, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                command.workspace_id,
                command.actor_id,
                command.name,
                command.idempotency_key,
                fingerprint,
                command_id,
                dumps(outcome.to_wire()),
                stamp,
            ),
        )


def _outcome(
    command: Command, plan: Plan, command_id: str | None, revision: int, warnings: list[dict[str, Any]]
) -> CommandOutcome:
    return CommandOutcome(
        command_name=command.name,
        dry_run=command.dry_run,
        command_id=command_id,
        revision=revision,
        changed=plan.changed,
        diff=plan.diff,
        warnings=warnings,
        data=plan.dry_run_data | plan.data if command.dry_run else plan.data,
    )


def _fingerprint(command: Command) -> str:
    material = {
        "workspaceId": command.workspace_id,
        "documentId": command.document_id,
        "command": command.name,
        "baseRevision": command.base_revision,
        "payload": command.payload,
    }
    return hashlib.sha256(dumps(material, sort_keys=True).encode()).hexdigest()


def _command_id(command: Command) -> str:
    """`page_body_save_<trace>_<nonce>`: the command name, the trace it belongs to, and uniqueness."""
    snake = "".join(f"_{ch.lower()}" if ch.isupper() else ("_" if ch == "." else ch) for ch in command.name)
    trace = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in command.correlation.trace_id)[:64]
    return f"{snake}_{trace}_{secrets.token_hex(4)}"


def _audit_view(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "seq": row["seq"],
        "commandId": row["command_id"],
        "commandName": row["command_name"],
        "workspaceId": row["workspace_id"],
        "documentId": row["document_id"],
        "actorId": row["actor_id"],
        "sessionId": row["session_id"],
        "runId": row["run_id"],
        "toolCallId": row["tool_call_id"],
        "traceId": row["trace_id"],
        "idempotencyKey": row["idempotency_key"],
        "revisionBefore": row["revision_before"],
        "revisionAfter": row["revision_after"],
        "effect": row["effect"],
        "outcome": row["outcome"],
        "detail": json.loads(row["detail"]),
        "createdAt": row["created_at"],
    }


def _statements(script: str) -> Iterator[str]:
    """Split the DDL into statements; `executescript` would commit the surrounding transaction."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer.strip()
            buffer = ""
