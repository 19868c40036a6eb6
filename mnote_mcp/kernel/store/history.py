"""Page history: every write that changes a page records its change set, so any revision can be rebuilt.

A `page_history` row per revision names the command, the actor and the four correlation ids, and holds
the change set: each row it touched, before and after (`BlockChange.to_wire`), and the title and
options before and after. Going back is applying change sets backwards: the page at revision R is
the current page with every change after R undone, newest first. Undoing some writes (one command,
or every write of one run: the writes of one actor under one run id) puts back what they changed, unless a later write outside them changed the
same block, title or option since: then nothing is undone and the conflicts are named.

History starts where the page's record starts (`history_from`): the revision a page was created at,
or, for a store upgraded from version 1, the revision it had when it was upgraded.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason, invalid
from mnote_mcp.kernel.port import Correlation, HistoryEntry, HistoryQuery, HistoryView
from mnote_mcp.kernel.store.access import PageHead, PageOptions
from mnote_mcp.kernel.store.encoding import dumps, now
from mnote_mcp.kernel.store.rows import BlockChange, BlockRow
from mnote_mcp.kernel.store.sql import Connection

SUMMARY_OPS = 20
MAX_HISTORY_LIMIT = 100


@dataclass(slots=True)
class HeadChange:
    """The title and options of a page before and after a write (None: unchanged)."""

    title: tuple[str, str] | None = None
    options: tuple[PageOptions, PageOptions] | None = None

    def __bool__(self) -> bool:
        return self.title is not None or self.options is not None


@dataclass(frozen=True, slots=True)
class Revision:
    """One recorded write: its revision, who and what, and its change set (decoded)."""

    revision: int
    command_id: str
    run_id: str
    blocks: list[tuple[str, list[Any] | None, list[Any] | None, bool]]
    title: tuple[str, str] | None
    options: tuple[PageOptions, PageOptions] | None
    updated_before: str | None = None  # the page's `updated_at` before this write (None: not recorded)

    @classmethod
    def of(cls, revision: int, command_id: str, run_id: str, changes: str) -> Revision:
        data = json.loads(changes)
        title, options, before = data.get("t"), data.get("o"), data.get("u")
        return cls(
            revision,
            command_id,
            run_id,
            [(entry[0], entry[1], entry[2], len(entry) > 3) for entry in data.get("b", [])],
            (title[0], title[1]) if title else None,
            (options[0], options[1]) if options else None,
            before if isinstance(before, str) else None,
        )


class SummaryOp(TypedDict):
    """One op of a history entry's compact diff: a block, the title or an option that changed."""

    op: Literal["set", "insert", "delete", "move", "update"]
    field: NotRequired[Literal["title"]]
    option: NotRequired[str]
    blockId: NotRequired[str]
    fields: NotRequired[list[str]]


def change_set(
    blocks: Sequence[BlockChange], head: HeadChange, updated_before: str | None = None
) -> dict[str, object]:
    out: dict[str, object] = {"b": [change.to_wire() for change in blocks]}
    if head.title is not None:
        out["t"] = list(head.title)
    if head.options is not None:
        out["o"] = list(head.options)
    if updated_before:
        out["u"] = updated_before  # where the page stood in the listing before (a search cursor's past)
    return out


def summary_ops(blocks: Sequence[BlockChange], head: HeadChange) -> list[SummaryOp]:
    """The compact diff a history entry lists: one op per block, title or option changed."""
    ops: list[SummaryOp] = []
    if head.title is not None:
        ops.append({"op": "set", "field": "title"})
    if head.options is not None:
        before, after = head.options
        ops += [
            {"op": "set", "option": name}
            for name in sorted({*before, *after})
            if before.get(name) != after.get(name)
        ]
    for change in blocks:
        if change.rekey:
            continue
        if change.before is None:
            ops.append({"op": "insert", "blockId": change.id})
        elif change.after is None:
            ops.append({"op": "delete", "blockId": change.id})
        else:
            if not change.before.same_place(change.after):
                ops.append({"op": "move", "blockId": change.id})
            fields = [
                name
                for name, old, new in (
                    ("type", change.before.type, change.after.type),
                    ("text", change.before.text, change.after.text),
                    ("props", change.before.props, change.after.props),
                )
                if old != new
            ]
            if fields:
                ops.append({"op": "update", "blockId": change.id, "fields": fields})
    return ops


def record(
    conn: Connection,
    workspace_id: str,
    page_id: str,
    revision: int,
    *,
    command_id: str,
    command_name: str,
    actor_id: str,
    correlation: Correlation,
    blocks: Sequence[BlockChange],
    head: HeadChange,
    updated_before: str | None = None,
) -> None:
    ops = summary_ops(blocks, head)
    summary = {"ops": ops[:SUMMARY_OPS], "total": len(ops)}
    c = correlation
    conn.execute(
        "INSERT INTO page_history (workspace_id, page_id, revision, command_id, command_name, actor_id,"
        " session_id, run_id, tool_call_id, trace_id, created_at, summary, changes)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            workspace_id,
            page_id,
            revision,
            command_id,
            command_name,
            actor_id,
            c.session_id,
            c.run_id,
            c.tool_call_id,
            c.trace_id,
            now(),
            dumps(summary),
            dumps(change_set(blocks, head, updated_before)),
        ),
    )


# -- reading ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HistoryFilter:
    run_id: str | None = None
    session_id: str | None = None
    actor_id: str | None = None
    since_revision: int | None = None


def filter_of(query: HistoryQuery) -> HistoryFilter:
    """The filters of a history query, its limit checked."""
    if not 1 <= query.limit <= MAX_HISTORY_LIMIT:
        raise invalid("/limit", f"must be between 1 and {MAX_HISTORY_LIMIT}")
    return HistoryFilter(query.run_id, query.session_id, query.by_actor_id, query.since_revision)


def view(
    conn: Connection, page: PageHead, where: HistoryFilter, *, limit: int, cursor: str | None
) -> HistoryView:
    """What `mnote.page.history` answers: the page's revision, where its history starts, the entries
    and the cursor of the next ones."""
    found, more = entries(conn, page.workspace_id, page.id, where, limit=limit, cursor=cursor)
    out: HistoryView = {
        "workspaceId": page.workspace_id,
        "documentId": page.id,
        "revision": page.revision,
        "historyFrom": page.history_from,
        "entries": found,
    }
    if more is not None:
        out["nextCursor"] = more
    return out


def entries(
    conn: Connection,
    workspace_id: str,
    page_id: str,
    where: HistoryFilter,
    *,
    limit: int,
    cursor: str | None,
) -> tuple[list[HistoryEntry], str | None]:
    """History entries newest first, at most `limit`, and the cursor of the next ones (or None)."""
    clauses = ["workspace_id = ?", "page_id = ?"]
    params: list[str | int] = [workspace_id, page_id]
    for column, value in (
        ("run_id", where.run_id),
        ("session_id", where.session_id),
        ("actor_id", where.actor_id),
    ):
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    if where.since_revision is not None:
        clauses.append("revision > ?")
        params.append(where.since_revision)
    if cursor is not None:
        clauses.append("revision < ?")
        params.append(_decode_cursor(cursor, workspace_id, page_id, where))
    rows = conn.execute(
        "SELECT revision, command_name, command_id, actor_id, session_id, run_id, tool_call_id, trace_id,"
        f" created_at, summary FROM page_history WHERE {' AND '.join(clauses)} ORDER BY revision DESC LIMIT ?",
        (*params, limit + 1),
    ).fetchall()
    out = [_entry(row) for row in rows[:limit]]
    more = len(rows) > limit
    return out, _encode_cursor(out[-1]["revision"], workspace_id, page_id, where) if more else None


def _entry(row: Sequence[Any]) -> HistoryEntry:
    revision, name, command_id, actor, session, run, call, trace, created, summary = row
    compact = json.loads(summary)
    entry: HistoryEntry = {
        "revision": revision,
        "commandName": name,
        "commandId": command_id,
        "actorId": actor,
        "sessionId": session,
        "runId": run,
        "toolCallId": call,
        "traceId": trace,
        "createdAt": created,
        "diff": compact["ops"],
    }
    if compact["total"] > len(compact["ops"]):
        entry["more"] = compact["total"] - len(compact["ops"])
    return entry


def _tag(workspace_id: str, page_id: str, where: HistoryFilter) -> str:
    material = json.dumps(
        [workspace_id, page_id, where.run_id, where.session_id, where.actor_id], ensure_ascii=False
    )
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def _encode_cursor(revision: int, workspace_id: str, page_id: str, where: HistoryFilter) -> str:
    raw = json.dumps({"b": revision, "q": _tag(workspace_id, page_id, where)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_cursor(cursor: str, workspace_id: str, page_id: str, where: HistoryFilter) -> int:
    try:
        data = json.loads(base64.urlsafe_b64decode((cursor + "=" * (-len(cursor) % 4)).encode()))
        before, tag = data["b"], data["q"]
    except (ValueError, TypeError, KeyError, RecursionError, binascii.Error):
        raise invalid("/cursor", "not a cursor returned by mnote.page.history") from None
    if not isinstance(before, int) or isinstance(before, bool) or not 0 <= before < 2**63:
        raise invalid("/cursor", "not a cursor returned by mnote.page.history")
    if tag != _tag(workspace_id, page_id, where):
        raise invalid("/cursor", "belongs to another page or other filters")
    return before


def revisions_after(conn: Connection, workspace_id: str, page_id: str, after: int) -> list[Revision]:
    """Every recorded write after revision `after`, oldest first."""
    rows = conn.execute(
        "SELECT revision, command_id, run_id, changes FROM page_history"
        " WHERE workspace_id = ? AND page_id = ? AND revision > ? ORDER BY revision",
        (workspace_id, page_id, after),
    ).fetchall()
    return [Revision.of(*row) for row in rows]


def run_revisions(conn: Connection, workspace_id: str, page_id: str, run_id: str, actor_id: str) -> list[int]:
    """The revisions of one run on this page. A run is an actor's: run ids are chosen by clients
    (arguments, `_meta`, an HTTP header), so another actor may write under the same one, and undoing
    "my run" must never undo their writes (docs/decisions.md)."""
    rows = conn.execute(
        "SELECT revision FROM page_history WHERE workspace_id = ? AND page_id = ? AND run_id = ?"
        " AND actor_id = ? ORDER BY revision",
        (workspace_id, page_id, run_id, actor_id),
    ).fetchall()
    return [row[0] for row in rows]


def command_revision(conn: Connection, workspace_id: str, page_id: str, command_id: str) -> int | None:
    """The revision a command wrote on this page, or None (no such command here, or it changed nothing)."""
    row = conn.execute(
        "SELECT revision_after FROM audit WHERE command_id = ? AND workspace_id = ? AND document_id = ?"
        " AND effect = 'write' AND outcome = 'applied'",
        (command_id, workspace_id, page_id),
    ).fetchone()
    if row is None:
        return None
    found = conn.execute(
        "SELECT revision FROM page_history WHERE workspace_id = ? AND page_id = ? AND revision = ? AND command_id = ?",
        (workspace_id, page_id, row[0], command_id),
    ).fetchone()
    return None if found is None else int(found[0])


def deleted_after(
    conn: Connection, workspace_id: str, page_id: str, ids: Iterable[str], after: int
) -> dict[str, int]:
    """For each id, the latest revision after `after` that deleted it (ids never deleted are absent)."""
    wanted = set(ids)
    found: dict[str, int] = {}
    if not wanted:
        return found
    for revision in revisions_after(conn, workspace_id, page_id, after):
        for block_id, _before, image, rekey in revision.blocks:
            if block_id in wanted and image is None and not rekey:
                found[block_id] = revision.revision
    return found


@dataclass(frozen=True, slots=True)
class PageBefore:
    """A page's title, block texts and place in the listing just before one of its writes."""

    title: str
    texts: list[str]
    updated_at: str


def page_before(conn: Connection, workspace_id: str, page_id: str, revision: int) -> PageBefore | None:
    """The page as it was just before `revision` was written (its current rows with every later
    change set undone), or None when `revision` created it (it did not exist before). What a search
    cursor ranks a page by once it has been written since the cursor's first page."""
    if revision <= 1:
        return None
    head = conn.execute(
        "SELECT title, updated_at FROM pages WHERE workspace_id = ? AND id = ?", (workspace_id, page_id)
    ).fetchone()
    if head is None:
        return None
    title, updated_at = head
    texts = dict(
        conn.execute(
            "SELECT id, text FROM blocks WHERE workspace_id = ? AND page_id = ?", (workspace_id, page_id)
        ).fetchall()
    )
    later = revisions_after(conn, workspace_id, page_id, revision - 1)
    for entry in reversed(later):
        for block_id, before, _after, _rekey in reversed(entry.blocks):
            if before is None:
                texts.pop(block_id, None)
            else:
                texts[block_id] = before[3]  # BlockRow.image(): [parent, position, type, text, props]
        if entry.title is not None:
            title = entry.title[0]
    if later and later[0].updated_before is not None:
        updated_at = later[0].updated_before
    return PageBefore(title, list(texts.values()), updated_at)


# -- going back -------------------------------------------------------------------------------


@dataclass(slots=True)
class PageState:
    """A page's blocks, title and options: what a revert computes as its target."""

    rows: dict[str, BlockRow]
    title: str
    options: PageOptions
    revision_of: dict[str, int] = field(default_factory=dict)


def rebuild(state: PageState, later: Sequence[Revision]) -> PageState:
    """The page as it was before `later` (applied newest first, each change set backwards)."""
    rows = dict(state.rows)
    title, options = state.title, dict(state.options)
    for revision in reversed(later):
        for block_id, before, _after, _rekey in reversed(revision.blocks):
            if before is None:
                rows.pop(block_id, None)
            else:
                rows[block_id] = BlockRow.from_image(block_id, before, revision.revision - 1)
        if revision.title is not None:
            title = revision.title[0]
        if revision.options is not None:
            options = dict(revision.options[0])
    return PageState(rows, title, options)


@dataclass(slots=True)
class Undo:
    """What undoing a set of revisions puts back, or the later writes that stand in its way."""

    target: PageState
    conflicts: list[dict[str, str | int]]


def undo(state: PageState, undone: set[int], later: Sequence[Revision]) -> Undo:
    """Put back what the revisions in `undone` changed (`later`: every revision from the first of them on).

    A block, the title or an option changed by an undone revision and, after that, by a revision
    that is not undone is a conflict: undoing would throw that later write away.
    """
    first_before: dict[str, list[Any] | None] = {}
    touched_at: dict[str, int] = {}
    conflicts: dict[tuple[str, str], int] = {}
    title_before: str | None = None
    option_before: PageOptions = {}
    option_missing: set[str] = set()
    title_touched = False
    for revision in later:
        mine = revision.revision in undone
        for block_id, before, _after, rekey in revision.blocks:
            if rekey:
                continue
            if mine and block_id not in first_before:
                first_before[block_id] = before
                touched_at[block_id] = revision.revision
            elif not mine and block_id in first_before:
                conflicts.setdefault(("blockId", block_id), revision.revision)
        if revision.title is not None:
            if mine and not title_touched:
                title_touched, title_before = True, revision.title[0]
            elif not mine and title_touched:
                conflicts.setdefault(("field", "title"), revision.revision)
        if revision.options is not None:
            old, new = revision.options
            for name in {*old, *new}:
                if old.get(name) == new.get(name):
                    continue
                known = name in option_before or name in option_missing
                if mine and not known:
                    if name in old:
                        option_before[name] = old[name]
                    else:
                        option_missing.add(name)
                elif not mine and known:
                    conflicts.setdefault(("option", name), revision.revision)
    rows = dict(state.rows)
    for block_id, before in first_before.items():
        if before is None:
            rows.pop(block_id, None)
        else:
            rows[block_id] = BlockRow.from_image(block_id, before, touched_at[block_id] - 1)
    options = {k: v for k, v in state.options.items() if k not in option_missing}
    options.update(option_before)
    target = PageState(
        rows, title_before if title_touched and title_before is not None else state.title, options
    )
    return Undo(target, [{kind: name, "revision": rev} for (kind, name), rev in sorted(conflicts.items())])


def no_history(pointer: str, history_from: int) -> MnoteError:
    return invalid(pointer, f"history starts at revision {history_from}", historyFrom=history_from)


def command_not_found(command_id: str) -> MnoteError:
    return MnoteError(ErrorCode.NOT_FOUND, Reason.COMMAND, {"commandId": command_id, "pointer": "/commandId"})


def run_not_found(run_id: str) -> MnoteError:
    return MnoteError(ErrorCode.NOT_FOUND, Reason.RUN, {"runId": run_id, "pointer": "/runId"})


def ids_by_revision(revisions: Iterable[Revision]) -> Mapping[int, set[str]]:
    return {r.revision: {entry[0] for entry in r.blocks if not entry[3]} for r in revisions}
