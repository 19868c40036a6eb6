"""One SQLite file holding the whole kernel state, shared safely by any number of processes.

Every command runs in one `BEGIN IMMEDIATE` transaction: authorise, check the idempotency ledger,
compare the revision (or, for a block edit, the revisions of the blocks it relies on), plan, check the
page size, write the rows, the page row, the history entry, the audit record and the ledger entry,
then commit; two processes racing on one key serialise on the database lock and the second replays.
A dry run only ever opens a read transaction, so it cannot write even by mistake.

This module only orchestrates: connections (`connection`), schema (`migrate`), checkpoints
(`access`), rows (`rows`), history (`history`), ledger and audit (`ledger`), commands (`commands`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from mnote_mcp.kernel.blocks import Block, block_ids, summary_of
from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.limits import PageLimits
from mnote_mcp.kernel.local import access, history, ledger, rows, search, sql
from mnote_mcp.kernel.local.commands import COMMANDS
from mnote_mcp.kernel.local.concurrency import check_base
from mnote_mcp.kernel.local.connection import DEFAULT_BUSY_TIMEOUT, INLINE_BLOCKS, Database, MoveToThread
from mnote_mcp.kernel.local.encoding import dumps, now
from mnote_mcp.kernel.local.history import MAX_HISTORY_LIMIT, HistoryFilter
from mnote_mcp.kernel.local.migrate import check_schema, open_schema
from mnote_mcp.kernel.local.pagecache import PageCache, whole_body
from mnote_mcp.kernel.local.plan import CommandSpec, Plan, Tx, payload_blocks
from mnote_mcp.kernel.local.rows import FEW_IDS, PageBlocks, PageChange, WriteHook
from mnote_mcp.kernel.local.sql import WRITE_ATTEMPTS, Connection
from mnote_mcp.kernel.policy import COMMAND_SCOPES, Scope
from mnote_mcp.kernel.port import (
    AuditRecord,
    Command,
    CommandName,
    CommandOutcome,
    HistoryQuery,
    HistoryView,
    OutcomeData,
    PageKey,
    PageQuery,
    PageRef,
    PageView,
    SearchQuery,
    SearchResult,
)
from mnote_mcp.kernel.view import check_query, page_view


class LocalStore:
    """The synchronous kernel core, safe from any thread: a transaction borrows a connection (`pool.py`).

    Every method takes `inline`: True when called on the event loop, where it must neither wait for a
    lock nor do heavy work; it raises `MoveToThread` instead (see `LocalKernel`).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        limits: PageLimits | None = None,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        hooks: Iterable[WriteHook] = (),
        uri: str | None = None,
    ) -> None:
        """With `uri` (`opening.read_only_uri`) the file is opened read-only: nothing is created or
        upgraded, and a schema other than this release's is refused (`check_schema`)."""
        self.path = Path(path)
        if uri is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.location = str(self.path)
        self.limits = limits or PageLimits()
        self.write_hooks: list[WriteHook] = list(hooks)
        self.page_cache = PageCache()
        database = Database(self.path, busy_timeout=busy_timeout, uri=uri)
        self.created = open_schema(database) if uri is None else check_schema(database)
        self.db: sql.Database = database

    @contextmanager
    def transaction(self, *, write: bool, inline: bool = False) -> Iterator[Connection]:
        with self.db.transaction(write=write, inline=inline) as conn:
            yield conn

    def close(self) -> None:
        self.db.close()

    def dump(self) -> str:
        """Every row of the store as SQL text: what tests compare to prove that nothing was written."""
        return self.db.dump()

    # -- reads --------------------------------------------------------------------------------

    def get_page(self, query: PageQuery, *, inline: bool = False) -> PageView:
        check_query(query)
        if inline and len(query.block_ids or ()) > FEW_IDS:
            raise MoveToThread  # many ids: a whole-page read, and checking each of them
        with self.transaction(write=False, inline=inline) as conn:
            page = access.authorize(
                conn, query.workspace_id, query.document_id, query.actor_id, Scope.PAGE_READ
            )
            block_ids(query.block_ids or (), "/blockIds", unique=False)  # only once the caller may read
            blocks = PageBlocks(conn, page.workspace_id, page.id)
            summary: str | None = None
            roots: list[Block] = []
            if query.include_blocks and query.block_ids is None:
                if inline and page.block_count > INLINE_BLOCKS:
                    raise MoveToThread
                roots, summary = whole_body(self.page_cache, blocks, page)
            else:
                if query.include_blocks and query.block_ids is not None:
                    roots = blocks.select(query.block_ids)
                if query.include_body:
                    summary = summary_of(row.text for row in rows.walk_rows(blocks))
        return page_view(
            query,
            title=page.title,
            options=page.options,
            revision=page.revision,
            roots=roots,
            summary=summary,
        )

    def list_pages(self, actor_id: str, *, inline: bool = False) -> list[PageRef]:
        with self.transaction(write=False, inline=inline) as conn:
            return access.readable_pages(conn, actor_id)

    def page_revisions(
        self, actor_id: str, pages: Sequence[PageKey], *, inline: bool = False
    ) -> dict[PageKey, int]:
        if not actor_id:
            return {}
        with self.transaction(write=False, inline=inline) as conn:
            return access.readable_revisions(conn, actor_id, pages)

    def page_history(self, query: HistoryQuery, *, inline: bool = False) -> HistoryView:
        if not 1 <= query.limit <= MAX_HISTORY_LIMIT:
            raise MnoteError(
                ErrorCode.INVALID_ARGUMENT,
                Reason.SCHEMA,
                {"pointer": "/limit", "reason": f"must be between 1 and {MAX_HISTORY_LIMIT}"},
            )
        where = HistoryFilter(query.run_id, query.session_id, query.by_actor_id, query.since_revision)
        with self.transaction(write=False, inline=inline) as conn:
            page = access.authorize(
                conn, query.workspace_id, query.document_id, query.actor_id, Scope.PAGE_READ
            )
            entries, cursor = history.entries(
                conn, page.workspace_id, page.id, where, limit=query.limit, cursor=query.cursor
            )
        view: HistoryView = {
            "workspaceId": page.workspace_id,
            "documentId": page.id,
            "revision": page.revision,
            "historyFrom": page.history_from,
            "entries": entries,
        }
        if cursor is not None:
            view["nextCursor"] = cursor
        return view

    def search_pages(self, query: SearchQuery, *, inline: bool = False) -> SearchResult:
        """Search (on a worker thread: it may take milliseconds) or list the pages the actor may read."""
        segments = search.check(query)
        if inline and (segments is not None or query.cursor is not None):
            raise MoveToThread  # a next page may read back pages written since the first one
        with self.transaction(write=False, inline=inline) as conn:
            return cast(SearchResult, search.search(conn, query, segments, self.db))

    def audit_trail(
        self,
        *,
        trace_id: str | None = None,
        command_id: str | None = None,
        limit: int = 100,
        inline: bool = False,
    ) -> list[AuditRecord]:
        with self.transaction(write=False, inline=inline) as conn:
            return ledger.audit_trail(conn, trace_id=trace_id, command_id=command_id, limit=limit)

    def check_access(
        self, workspace_id: str, document_id: str, actor_id: str, need: Scope, *, inline: bool = False
    ) -> None:
        """The permission checkpoints alone (the kernel port's `authorize`)."""
        with self.transaction(write=False, inline=inline) as conn:
            access.authorize(conn, workspace_id, document_id, actor_id, need)

    # -- commands -----------------------------------------------------------------------------

    def execute(self, command: Command, *, inline: bool = False) -> CommandOutcome:
        spec = COMMANDS.get(command.name)
        if spec is None:
            raise MnoteError(ErrorCode.INVALID_ARGUMENT, Reason.UNKNOWN_COMMAND, {"command": command.name})
        if payload_blocks(command.payload) > INLINE_BLOCKS:
            if inline:
                raise MoveToThread  # validating, planning and writing that many blocks is heavy
            scope = COMMAND_SCOPES[CommandName(command.name)]  # refused before any such work (issue 26)
            self.check_access(command.workspace_id, command.document_id, command.actor_id, scope)
        payload = spec.validate(command.payload)
        print_ = ledger.fingerprint(command)
        attempt = 1
        while True:
            try:
                return self._execute(command, spec, payload, print_, inline)
            except Exception as exc:
                # Another writer committed the same idempotency key (on another replica) or the
                # database chose this transaction as a deadlock's victim: run it again, whole; the
                # ledger then answers the replay or the conflict.
                if attempt >= WRITE_ATTEMPTS or not self.db.retryable(exc):
                    raise
                attempt += 1

    def _execute(
        self, command: Command, spec: CommandSpec, payload: Any, print_: str, inline: bool
    ) -> CommandOutcome:
        with self.transaction(write=not command.dry_run, inline=inline) as conn:
            return self.run_command(conn, command, spec, payload, print_, inline)

    def run_command(
        self, conn: Connection, command: Command, spec: CommandSpec, payload: Any, print_: str, inline: bool
    ) -> CommandOutcome:
        if not command.dry_run:
            self.db.lock_page(conn, command.workspace_id, command.document_id)
        page = access.authorize(
            conn,
            command.workspace_id,
            command.document_id,
            command.actor_id,
            COMMAND_SCOPES[CommandName(command.name)],
        )
        replay = ledger.lookup(conn, command, print_, spec.conflict_reason)
        if replay is not None:
            if command.dry_run:
                return ledger.dry_replay(command, replay.outcome, page.revision)
            ledger.record_replay(conn, command, replay.outcome)
            return replay.outcome
        tx = Tx(conn, page, command, PageBlocks(conn, page.workspace_id, page.id), inline)
        rebased = check_base(tx, spec, payload)
        plan = spec.plan(tx, payload)
        if plan.blocks:
            self.limits.check(*plan.size_after(tx.page))
        data = dict(plan.data)
        if rebased is not None:
            data["rebasedFrom"] = rebased
        if command.dry_run:
            if plan.text_diff is not None:
                tx.whole_page()
                data["textDiff"] = plan.text_diff()
            return _outcome(command, plan, None, page.revision, data)
        command_id = ledger.command_id(command.name, command.correlation.trace_id)
        revision = self._write(tx, plan, command_id) if plan.changed else page.revision
        outcome = _outcome(command, plan, command_id, revision, data)
        ledger.record(conn, command, command_id, print_, page.revision, outcome)
        return outcome

    def _write(self, tx: Tx, plan: Plan, command_id: str) -> int:
        if plan.apply is not None:
            return plan.apply(tx.conn, command_id)
        page, conn = tx.page, tx.conn
        revision = tx.next_revision
        blocks, size = plan.size_after(page)
        rows.apply(conn, page.workspace_id, page.id, plan.blocks)
        title = plan.head.title[1] if plan.head.title else page.title
        options = plan.head.options[1] if plan.head.options else page.options
        conn.execute(
            "UPDATE pages SET title = ?, options = ?, revision = ?, block_count = ?, byte_size = ?,"
            " updated_at = ? WHERE workspace_id = ? AND id = ?",
            (title, dumps(options), revision, blocks, size, now(), page.workspace_id, page.id),
        )
        command = tx.command
        history.record(
            conn,
            page.workspace_id,
            page.id,
            revision,
            command_id=command_id,
            command_name=command.name,
            actor_id=command.actor_id,
            correlation=command.correlation,
            blocks=plan.blocks,
            head=plan.head,
            updated_before=page.updated_at,
        )
        change = PageChange(page.workspace_id, page.id, revision, plan.head.title, plan.blocks)
        for hook in self.write_hooks:
            hook(conn, change)
        return revision


def _outcome(
    command: Command, plan: Plan, command_id: str | None, revision: int, data: dict[str, Any]
) -> CommandOutcome:
    return CommandOutcome(
        command_name=command.name,
        dry_run=command.dry_run,
        command_id=command_id,
        revision=revision,
        changed=plan.changed,
        diff=plan.diff,
        warnings=plan.warnings,
        data=cast(OutcomeData, data),  # the port's type for what each command's plan reports
    )
