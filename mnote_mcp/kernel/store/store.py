"""The kernel's synchronous core, once for every database: reads, and a command's one transaction.

Every command runs in one write transaction: lock the page (the dialect's way), authorise, check the
idempotency ledger, compare the revision (or, for a block edit, the revisions of the blocks it relies
on), plan, check what the plan would write against every limit (`bounds.check_plan`: no command can
skip it), write the rows, the page row, the history entry, the page change (the search index and the
change feed: `changes.publish`), the audit record and the ledger entry, then commit; two writers on
one key serialise on the page and the second replays. A dry run only opens a read transaction, so it
cannot write even by mistake. This module orchestrates: the database is the `dialect.Dialect`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, closing, contextmanager
from typing import TYPE_CHECKING, Any

from mnote_mcp.kernel import port
from mnote_mcp.kernel.blocks import Block, block_ids, summary_of
from mnote_mcp.kernel.limits import PageLimits
from mnote_mcp.kernel.policy import Scope
from mnote_mcp.kernel.store import access, bounds, ledger, rows
from mnote_mcp.kernel.store.changes import PageChange, WriteHook, Writes
from mnote_mcp.kernel.store.dialect import WRITE_ATTEMPTS, Dialect, MoveToThread
from mnote_mcp.kernel.store.encoding import dumps, now
from mnote_mcp.kernel.store.pagecache import PageCache, whole_body
from mnote_mcp.kernel.store.rows import FEW_IDS, PageBlocks
from mnote_mcp.kernel.store.sql import Connection
from mnote_mcp.kernel.view import check_query, page_view

if TYPE_CHECKING:  # write, history and search code is imported where used: a read (runtime cli) needs none
    from mnote_mcp.kernel.store.commands import CommandSpec
    from mnote_mcp.kernel.store.plan import Plan, Tx


class Store:
    """The kernel on one database (`dialect`), safe from any thread.

    Every method takes `inline`: True when called on the event loop, where it must neither wait for a
    lock nor do heavy work; it raises `MoveToThread` instead (see `kernel.StoreKernel`). `hooks` (and
    `write_hooks`, a list) are called on the page-change path after the dialect's index and feed, in
    the writing transaction: one that raises rolls the write back.
    """

    def __init__(
        self, dialect: Dialect, *, limits: PageLimits | None = None, hooks: Iterable[WriteHook] = ()
    ) -> None:
        self.dialect = dialect
        self.limits = limits or PageLimits()
        self.write_hooks: list[WriteHook] = list(hooks)
        self.page_cache = PageCache()

    @property
    def location(self) -> str:
        return self.dialect.location

    @property
    def created(self) -> bool:
        return self.dialect.created

    def transaction(self, *, write: bool, inline: bool = False) -> AbstractContextManager[Connection]:
        """One transaction (a write's page changes go through `writing` instead)."""
        return self.dialect.transaction(write=write, inline=inline)

    @contextmanager
    def writing(self, *, inline: bool = False) -> Iterator[Writes]:
        """A write transaction whose page changes go down the one page-change path (`Writes.publish`);
        the dialect's feed hears them once it has committed."""
        with self.transaction(write=True, inline=inline) as conn:
            writes = Writes(conn, self._sinks)
            yield writes
        self.dialect.feed.committed(writes.changes)

    def _sinks(self) -> Iterable[WriteHook]:
        return (self.dialect.index.apply, self.dialect.feed.publish, *self.write_hooks)

    def close(self) -> None:
        self.dialect.feed.close()
        self.dialect.close()

    def dump(self) -> str:
        """Every row of the store as text: what tests compare to prove that nothing was written."""
        return self.dialect.dump()

    # -- reads --------------------------------------------------------------------------------

    def get_page(self, query: port.PageQuery, *, inline: bool = False) -> port.PageView:
        """A whole-page read is the checkpoints' query, then the page cache's tree for the stamp the
        page's row carries, or the tree query, in the dialect's `statements` (on PostgreSQL statements
        of their own); where those are not one snapshot and a write came between, the read runs again
        whole in one (`pagecache.whole_body`). Other reads are one read transaction."""
        check_query(query)
        if query.include_blocks and query.block_ids is None:
            with self.dialect.statements(inline=inline) as conn:
                page = access.authorize(
                    conn, query.workspace_id, query.document_id, query.actor_id, Scope.PAGE_READ
                )
                if inline and not bounds.inline_ok(page):
                    raise MoveToThread
                body = whole_body(self.page_cache, conn, page, snapshot=self.dialect.snapshot_reads)
            if body is not None:
                return page_view(
                    query,
                    title=page.title,
                    options=page.options,
                    revision=page.revision,
                    roots=body[0],
                    summary=body[1],
                )
        if inline and len(query.block_ids or ()) > FEW_IDS:
            raise MoveToThread  # many ids: a whole-page read, and checking each of them
        with self.transaction(write=False, inline=inline) as conn:
            page = access.authorize(
                conn, query.workspace_id, query.document_id, query.actor_id, Scope.PAGE_READ
            )
            block_ids(query.block_ids or (), "/blockIds", unique=False)  # only once the caller may read
            if inline and not bounds.inline_ok(page):
                raise MoveToThread  # a long page: even a few of its blocks may be long
            summary: str | None = None
            roots: list[Block] = []
            if query.include_blocks and query.block_ids is None:  # (a write came between: PostgreSQL)
                body = whole_body(self.page_cache, conn, page, snapshot=True)
                assert body is not None  # (in a snapshot the page cannot change while it is read)
                roots, summary = body
            else:
                blocks = PageBlocks(conn, page.workspace_id, page.id)
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

    def list_pages(self, query: port.PagesQuery, *, inline: bool = False) -> list[port.PageRef]:
        with self.transaction(write=False, inline=inline) as conn:
            return access.readable_pages(conn, query, self.dialect.fold)

    def page_revisions(
        self, actor_id: str, pages: Sequence[port.PageKey], *, inline: bool = False
    ) -> dict[port.PageKey, int]:
        if not actor_id:
            return {}
        with self.transaction(write=False, inline=inline) as conn:
            return access.readable_revisions(conn, actor_id, pages)

    def page_history(self, query: port.HistoryQuery, *, inline: bool = False) -> port.HistoryView:
        from mnote_mcp.kernel.store import history

        where = history.filter_of(query)
        with self.transaction(write=False, inline=inline) as conn:
            page = access.authorize(
                conn, query.workspace_id, query.document_id, query.actor_id, Scope.PAGE_READ
            )
            return history.view(conn, page, where, limit=query.limit, cursor=query.cursor)

    def search_pages(self, query: port.SearchQuery, *, inline: bool = False) -> port.SearchResult:
        """Search (on a worker thread: it may take milliseconds) or list the pages the actor may read
        (the dialect's index; its listing is portable SQL, `search.listing`)."""
        from mnote_mcp.kernel.store import search

        segments = search.check(query)
        if inline and (segments is not None or query.cursor is not None):
            raise MoveToThread  # a next page may read back pages written since the first one
        with self.transaction(write=False, inline=inline) as conn:
            return self.dialect.index.search(conn, query, segments)

    def audit_trail(
        self,
        *,
        trace_id: str | None = None,
        command_id: str | None = None,
        limit: int = 100,
        inline: bool = False,
    ) -> list[port.AuditRecord]:
        with self.transaction(write=False, inline=inline) as conn:
            return ledger.audit_trail(conn, trace_id=trace_id, command_id=command_id, limit=limit)

    def record_refusal(self, refusal: port.Refusal, *, inline: bool = False) -> port.AuditRecord:
        """Audit a write the person refused (`ledger.record_refusal`), authorised as the command itself."""
        from mnote_mcp.kernel.store.commands import command_spec

        scope = command_spec(refusal.name).scope
        with self.transaction(write=True, inline=inline) as conn:
            page = access.authorize(conn, refusal.workspace_id, refusal.document_id, refusal.actor_id, scope)
            return ledger.record_refusal(conn, refusal, page.revision)

    def check_access(
        self, workspace_id: str, document_id: str, actor_id: str, need: Scope, *, inline: bool = False
    ) -> None:
        """The permission checkpoints alone (the kernel port's `authorize`)."""
        with self.transaction(write=False, inline=inline) as conn:
            access.authorize(conn, workspace_id, document_id, actor_id, need)

    # -- commands -----------------------------------------------------------------------------

    def execute(self, command: port.Command, *, inline: bool = False) -> port.CommandOutcome:
        from mnote_mcp.kernel.store.commands import command_spec

        spec = command_spec(command.name)
        if spec.threaded or bounds.heavy_request(command.payload):
            if inline:
                raise MoveToThread  # heavy: validated, planned and written off the loop (bounds.py)
            # refused before any such work (issue 26)
            self.check_access(command.workspace_id, command.document_id, command.actor_id, spec.scope)
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
                if attempt >= WRITE_ATTEMPTS or not self.dialect.retryable(exc):
                    raise
                attempt += 1

    def _execute(
        self, command: port.Command, spec: CommandSpec[Any], payload: Any, print_: str, inline: bool
    ) -> port.CommandOutcome:
        if command.dry_run:
            with self.transaction(write=False, inline=inline) as conn:
                return self.run_command(conn, None, command, spec, payload, print_, inline)
        with self.writing(inline=inline) as writes:
            return self.run_command(writes.conn, writes, command, spec, payload, print_, inline)

    def run_command(
        self,
        conn: Connection,
        writes: Writes | None,
        command: port.Command,
        spec: CommandSpec[Any],
        payload: Any,
        print_: str,
        inline: bool,
    ) -> port.CommandOutcome:
        """One command in the transaction `conn` is in: a real one writes through `writes`, a dry run
        (`writes` None) only reads."""
        from mnote_mcp.kernel.store.concurrency import check_base
        from mnote_mcp.kernel.store.plan import Tx

        if writes is not None:
            self.dialect.lock_page(conn, command.workspace_id, command.document_id)
        asked = ledger.ask(conn, command)  # read after the checkpoints: one round trip on PostgreSQL
        blocks = PageBlocks.asking(conn, command.workspace_id, command.document_id, spec.named, payload)
        # A question asked and never read (a refusal, a move off the loop, a plan that needed no row)
        # must not hold its statement open: on SQLite it kept the connection's read snapshot past the
        # transaction, and the event loop's next write failed SQLITE_BUSY_SNAPSHOT.
        with closing(asked), closing(blocks):
            page = access.authorize(
                conn, command.workspace_id, command.document_id, command.actor_id, spec.scope
            )
            replay = ledger.lookup(conn, command, print_, spec.conflict_reason, asked)
            if replay is not None:
                if command.dry_run:
                    return ledger.dry_replay(command, replay.outcome, page.revision)
                ledger.record_replay(conn, command, replay.outcome)
                return replay.outcome
            if inline and not bounds.inline_ok(page, command.payload):
                raise MoveToThread  # a long page, or a request that makes it long: planned off the loop
            tx = Tx(conn, page, command, blocks, inline, self.limits)
            rebased = check_base(tx, spec, payload)
            plan = spec.plan(tx, payload)
            bounds.check_plan(self.limits, plan.blocks, plan.size_after(page), tx.blocks)  # every command's
            data = plan.data.copy()
            if rebased is not None:
                data["rebasedFrom"] = rebased
            if writes is None:
                if plan.text_diff is not None and command.text_diff:
                    if inline:
                        raise MoveToThread  # rendering and diffing the whole page is heavy
                    data["textDiff"] = plan.text_diff()
                return plan.outcome(command, None, page.revision, data)
            command_id = ledger.command_id(command.name, command.correlation.trace_id)
            data["runId"] = command.correlation.run_id  # kept in the ledger: a replay names the first run
            revision = self._write(writes, tx, plan, command_id) if plan.changed else page.revision
            outcome = plan.outcome(command, command_id, revision, data)
            ledger.record(conn, command, command_id, print_, page.revision, outcome)
            return outcome

    def _write(self, writes: Writes, tx: Tx, plan: Plan, command_id: str) -> int:
        from mnote_mcp.kernel.store import history

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
        writes.publish(PageChange(page.workspace_id, page.id, revision, plan.head.title, plan.blocks))
        return revision
