"""Page search, the part the portable kernel shares on every database: who may be searched, the
listing, and what a cursor pins its results to.

A search (`Store.search_pages`) checks the login checkpoint and the query (`check`), then either lists
every readable page, most recently changed first (`listing`: portable SQL over the `pages_by_change`
index, the same on both databases), or asks the dialect's index (`SearchIndex.search`: SQLite's FTS5,
PostgreSQL's folded-text table) for the matches. Both keep a cursor's promise the same way: a cursor
carries a watermark of the dialect's `Clock` (SQLite: the number of the last recorded write,
PostgreSQL: the reader's snapshot), and a later page ranks every page written since as it was then
(`moment`, `as_it_was`: read back through its history). docs/search.md states the whole contract.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.policy import ROLES, Scope, grants_of
from mnote_mcp.kernel.port import SearchHit, SearchQuery, SearchResult
from mnote_mcp.kernel.search import (
    MAX_CHANGED_PAGES,
    Cursor,
    Segment,
    Watermark,
    decode_cursor,
    encode_cursor,
    matches,
    not_a_cursor,
    segments_of,
    strict,
    too_many_changes,
)
from mnote_mcp.kernel.store import history
from mnote_mcp.kernel.store.changes import PageChange
from mnote_mcp.kernel.store.rows import COLUMNS, BlockChange, BlockRow
from mnote_mcp.kernel.store.sql import Connection

MAX_CHANGE_ROWS = 16 * MAX_CHANGED_PAGES  # writes read back after a watermark before the cursor is refused
_ROLES = ", ".join(f"'{role}'" for role in ROLES)  # a restricted page's access row grants read with any


class Clock(Protocol):
    """A store's page-change clock: what a cursor pins its results to (docs/search.md, "Cursor")."""

    def now(self, conn: Connection) -> Watermark:
        """The watermark of what this read transaction sees."""
        ...

    def valid(self, watermark: Watermark) -> bool:
        """Whether a watermark from a cursor is one this store could have issued (the client may
        alter a cursor: a wrong one is refused, never passed to the database as it is)."""
        ...

    def changes(
        self, conn: Connection, watermark: Watermark, workspaces: Sequence[str], limit: int
    ) -> list[tuple[str, str, int]]:
        """(workspace, page, revision) of writes to these workspaces after the watermark, at most `limit`."""
        ...


def check(query: SearchQuery) -> list[Segment] | None:
    """The query's segments (None: a listing), after the login checkpoint and the arguments."""
    if not query.actor_id:
        raise MnoteError(ErrorCode.UNAUTHENTICATED, Reason.NO_ACTOR)
    return segments_of(query)


def readable_workspaces(conn: Connection, query: SearchQuery) -> list[str]:
    """The workspaces searched: those the actor may read (as a member), narrowed to the token's
    workspaces and to `workspaceId`; naming one it may not read is the non-member refusal."""
    rows = conn.execute(
        "SELECT workspace_id, role FROM members WHERE actor_id = ?", (query.actor_id,)
    ).fetchall()
    allowed = set(query.workspaces) if query.workspaces is not None else None
    found = [
        workspace
        for workspace, role in rows
        if Scope.PAGE_READ in grants_of(role) and (allowed is None or workspace in allowed)
    ]
    if query.workspace_id is None:
        return found
    if query.workspace_id not in found:
        raise MnoteError(ErrorCode.PERMISSION_DENIED, Reason.NOT_MEMBER, {"workspaceId": query.workspace_id})
    return [query.workspace_id]


@dataclass(frozen=True, slots=True)
class Moment:
    """The moment a search's first page was answered at, as a later page sees it: the watermark, and
    each page written since with the first revision written after it."""

    watermark: Watermark
    changed: dict[tuple[str, str], int]


def moment(conn: Connection, cursor: Cursor | None, workspaces: Sequence[str], clock: Clock) -> Moment:
    """The first page's moment: now (no cursor), or the cursor's watermark and what changed since."""
    if cursor is None:
        return Moment(clock.now(conn), {})
    if not clock.valid(cursor.watermark):
        raise not_a_cursor()
    rows = clock.changes(conn, cursor.watermark, workspaces, MAX_CHANGE_ROWS + 1)
    if len(rows) > MAX_CHANGE_ROWS:
        raise too_many_changes(MAX_CHANGED_PAGES)
    changed: dict[tuple[str, str], int] = {}
    for ws, page, revision in rows:
        changed[(ws, page)] = min(revision, changed.get((ws, page), revision))
    return Moment(cursor.watermark, changed)


def as_it_was(
    conn: Connection, ws: str, page: str, revision: int, segments: Sequence[Segment]
) -> tuple[int, int, int] | None:
    """(matched as written, title matched, matching rows) of a page as it was before `revision` (the
    first three parts of its sort key), or None if it did not match then (or did not
    exist)."""
    before = history.page_before(conn, ws, page, revision)
    if before is None:
        return None
    title = int(matches(before.title, segments))
    texts = [text for text in before.texts if matches(text, segments)]
    rows = title + len(texts)
    if not rows:
        return None
    written = strict(segments)
    exact = written is None or any(matches(text, written) for text in [before.title, *texts])
    return (int(exact), title, rows)


def hit(workspace_id: str, page_id: str, title: str, revision: int, updated_at: str) -> SearchHit:
    """A page as a search answers it (snippets aside)."""
    return {
        "workspaceId": workspace_id,
        "documentId": page_id,
        "title": title,
        "revision": revision,
        "updatedAt": updated_at,
    }


def listing(conn: Connection, query: SearchQuery, workspaces: Sequence[str], clock: Clock) -> SearchResult:
    """Every readable page, most recently changed first: per workspace at most `limit + 1` rows from
    its (workspace, updated_at) index (more by the pages written since the first page, which are left
    out there and put back where they stood then), merged."""
    cursor = decode_cursor(query, (str, str, str))
    if not workspaces:
        return {"hits": []}
    when = moment(conn, cursor, workspaces, clock)
    after = cursor.after if cursor is not None else None
    keyset = " AND (p.updated_at, p.workspace_id, p.id) < (:at, :ws, :id)" if after is not None else ""
    readable = (
        "SELECT p.workspace_id, p.id, p.title, p.revision, p.updated_at FROM pages p"
        " JOIN members m ON m.workspace_id = p.workspace_id AND m.actor_id = :actor"
        " LEFT JOIN page_access a ON a.workspace_id = p.workspace_id AND a.page_id = p.id AND a.actor_id = :actor"
        f" WHERE (p.restricted = 0 OR a.role IN ({_ROLES}))"
    )
    parts = [
        f"SELECT * FROM ({readable} AND p.workspace_id = :w{index}{keyset}"
        " ORDER BY p.updated_at DESC, p.id DESC LIMIT :limit)"
        for index in range(len(workspaces))
    ]
    params: dict[str, Any] = {"actor": query.actor_id, "limit": query.limit + 1 + len(when.changed)}
    params.update({f"w{index}": workspace for index, workspace in enumerate(sorted(workspaces))})
    if after is not None:
        params.update(at=after[0], ws=after[1], id=after[2])
    rows: list[tuple[Any, ...]] = [
        (*row, row[4])  # the sort key's time: when it changed, as of the first page
        for row in conn.execute(
            f"SELECT * FROM ({' UNION ALL '.join(parts)})"
            " ORDER BY updated_at DESC, workspace_id DESC, id DESC LIMIT :limit",
            params,
        ).fetchall()
        if (row[0], row[1]) not in when.changed
    ]
    moved = 0
    for (ws, page_id), revision in when.changed.items():
        row = conn.execute(
            f"{readable} AND p.workspace_id = :ws AND p.id = :id",
            {"actor": query.actor_id, "ws": ws, "id": page_id},
        ).fetchone()
        if row is None:
            continue
        moved += 1
        if moved > MAX_CHANGED_PAGES:
            raise too_many_changes(MAX_CHANGED_PAGES)
        before = history.page_before(conn, ws, page_id, revision)
        if before is not None and (after is None or (before.updated_at, ws, page_id) < tuple(after)):
            rows.append((*row, before.updated_at))
    rows.sort(key=lambda row: (row[5], row[0], row[1]), reverse=True)
    more = len(rows) > query.limit
    rows = rows[: query.limit]
    view: SearchResult = {"hits": [hit(*row[:5]) for row in rows]}
    if more:
        last = rows[-1]
        view["nextCursor"] = encode_cursor(query, [last[5], last[0], last[1]], when.watermark)
    return view


def rebuild(conn: Connection, publish: Callable[[PageChange], None], *, order: str) -> tuple[int, int]:
    """Send every page of the store down the page-change path as if it were created now, with its rows
    (in the order they were written): what a migration that adds an index runs. Pages come in the order
    they were created (`order`: the dialect's column for it). Returns (pages, blocks)."""
    pages = conn.execute(f"SELECT workspace_id, id, title, revision FROM pages ORDER BY {order}").fetchall()
    blocks = 0
    for ws, page_id, title, revision in pages:
        rows = [
            BlockRow.of(row)
            for row in conn.execute(
                f"SELECT {COLUMNS} FROM blocks WHERE workspace_id = ? AND page_id = ? ORDER BY seq",
                (ws, page_id),
            ).fetchall()
        ]
        blocks += len(rows)
        changes = [BlockChange(row.id, None, row) for row in rows]
        publish(PageChange(ws, page_id, revision, ("", title), changes, created=True))
    return len(pages), blocks
