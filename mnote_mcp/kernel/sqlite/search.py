"""The embedded search index: FTS5 over the tokens of `kernel/search.py`, kept up by triggers.

One contentless FTS5 table, `search_index (title, body)`, holds a row per page title and per block.
Its rowid is a *key* that says whose row it is: `workspace number << 47 | page number << 27 | block
number` (block number 0 is the title). So a workspace's rows are one rowid range (a search reads only
the ranges of the workspaces the actor may read: other workspaces cost nothing, not even time), a page's
rows are one range (its snippets are found without touching other pages), and a hit's page is its
rowid shifted right: ranking pages needs no join, however many blocks match.

Numbers are handed out by `search_workspaces` (one per workspace, up to 2^16), `search_pages` (one per
page within its workspace, up to 2^20; `base` is the page's key) and `search_blocks` (one per block row
within its page, up to 2^27 inserts over the page's life; `seq` is the block's rowid). Triggers on
`pages` and `blocks` write the index in the writing transaction, so a search after a write sees it, and
a rolled-back write leaves no trace. They call `mnote_search_tokens(text)` (registered on every
connection, `connection.py`); deleting a row recomputes its tokens, so the tokenizer must never change
without a migration that rebuilds the index.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import json
import operator
import sqlite3
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.policy import ROLES, Scope, effective_role, grants_of
from mnote_mcp.kernel.port import SearchQuery
from mnote_mcp.kernel.search import (
    MAX_CHANGED_PAGES,
    SNIPPETS_PER_HIT,
    Cursor,
    Segment,
    Watermark,
    decode_cursor,
    encode_cursor,
    match_expression,
    matches,
    not_a_cursor,
    segments_of,
    snippet,
    too_many_changes,
)
from mnote_mcp.kernel.sqlite.connection import Database
from mnote_mcp.kernel.store import history, sql

WORKSPACE_SHIFT = 40  # a key: workspace number << 40 | (chunk number << 6 | slot), or | page number
SLOT_BITS = 6  # 64 keys per chunk; slot 0 is never used, so a page's next key with slot 0 means "no chunk"
SLOTS = (1 << SLOT_BITS) - 1
MAX_WORKSPACES = (1 << (63 - WORKSPACE_SHIFT)) - 1
_ROLES = ", ".join(
    f"'{role}'" for role in ROLES
)  # a restricted page's access row grants read with any of them
_WS = "workspace_id = NEW.workspace_id"
_PAGE = "workspace_id = NEW.workspace_id AND page_id = NEW.id"
_BLOCK_PAGE = "workspace_id = NEW.workspace_id AND page_id = NEW.page_id"

SEARCH_DDL = f"""
CREATE TABLE IF NOT EXISTS search_workspaces (
    num          INTEGER PRIMARY KEY,
    workspace_id TEXT NOT NULL UNIQUE,
    next_page    INTEGER NOT NULL DEFAULT 1,
    next_chunk   INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS search_pages (
    num          INTEGER PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    page_id      TEXT NOT NULL,
    next_key     INTEGER NOT NULL DEFAULT 0,
    UNIQUE (workspace_id, page_id)
);
CREATE TABLE IF NOT EXISTS search_chunks (
    num  INTEGER PRIMARY KEY,
    page INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS search_chunks_of_page ON search_chunks (page);
CREATE TABLE IF NOT EXISTS search_blocks (
    key INTEGER PRIMARY KEY,
    seq INTEGER NOT NULL UNIQUE
);
CREATE VIRTUAL TABLE IF NOT EXISTS search_index USING fts5(
    body, content='', columnsize=0, tokenize='ascii'
);
CREATE VIRTUAL TABLE IF NOT EXISTS search_titles USING fts5(
    title, content='', columnsize=0, tokenize='ascii'
);
CREATE INDEX IF NOT EXISTS pages_restricted ON pages (workspace_id) WHERE restricted = 1;
CREATE INDEX IF NOT EXISTS pages_by_change ON pages (workspace_id, updated_at, id);
CREATE TRIGGER IF NOT EXISTS search_page_added AFTER INSERT ON pages BEGIN
    INSERT OR IGNORE INTO search_workspaces (workspace_id) VALUES (NEW.workspace_id);
    SELECT RAISE(ABORT, 'search index: too many workspaces')
        FROM search_workspaces WHERE {_WS} AND num > {MAX_WORKSPACES};
    INSERT INTO search_pages (num, workspace_id, page_id)
        SELECT (num << {WORKSPACE_SHIFT}) | next_page, NEW.workspace_id, NEW.id
        FROM search_workspaces WHERE {_WS};
    UPDATE search_workspaces SET next_page = next_page + 1 WHERE {_WS};
    INSERT INTO search_titles (rowid, title)
        SELECT num, mnote_search_tokens(NEW.title) FROM search_pages WHERE {_PAGE};
END;
CREATE TRIGGER IF NOT EXISTS search_page_renamed AFTER UPDATE OF title ON pages
WHEN OLD.title IS NOT NEW.title BEGIN
    INSERT INTO search_titles (search_titles, rowid, title)
        SELECT 'delete', num, mnote_search_tokens(OLD.title) FROM search_pages WHERE {_PAGE};
    INSERT INTO search_titles (rowid, title)
        SELECT num, mnote_search_tokens(NEW.title) FROM search_pages WHERE {_PAGE};
END;
CREATE TRIGGER IF NOT EXISTS search_page_removed AFTER DELETE ON pages BEGIN
    INSERT INTO search_titles (search_titles, rowid, title)
        SELECT 'delete', num, mnote_search_tokens(OLD.title) FROM search_pages
        WHERE workspace_id = OLD.workspace_id AND page_id = OLD.id;
    DELETE FROM search_chunks WHERE page = (
        SELECT num FROM search_pages WHERE workspace_id = OLD.workspace_id AND page_id = OLD.id);
    DELETE FROM search_pages WHERE workspace_id = OLD.workspace_id AND page_id = OLD.id;
END;
CREATE TRIGGER IF NOT EXISTS search_block_added AFTER INSERT ON blocks BEGIN
    INSERT INTO search_chunks (num, page)
        SELECT (w.num << {WORKSPACE_SHIFT - SLOT_BITS}) | w.next_chunk, p.num
        FROM search_pages p JOIN search_workspaces w ON w.workspace_id = p.workspace_id
        WHERE p.workspace_id = NEW.workspace_id AND p.page_id = NEW.page_id AND (p.next_key & {SLOTS}) = 0;
    UPDATE search_pages SET next_key = (
        SELECT (((num << {WORKSPACE_SHIFT - SLOT_BITS}) | next_chunk) << {SLOT_BITS}) | 1
        FROM search_workspaces WHERE {_WS}) WHERE {_BLOCK_PAGE} AND (next_key & {SLOTS}) = 0;
    UPDATE search_workspaces SET next_chunk = next_chunk + 1 WHERE {_WS} AND EXISTS (
        SELECT 1 FROM search_chunks WHERE num = (search_workspaces.num << {WORKSPACE_SHIFT - SLOT_BITS})
        | search_workspaces.next_chunk);
    INSERT INTO search_blocks (key, seq)
        SELECT next_key, NEW.seq FROM search_pages WHERE {_BLOCK_PAGE};
    UPDATE search_pages SET next_key = next_key + 1 WHERE {_BLOCK_PAGE};
    INSERT INTO search_index (rowid, body)
        SELECT key, mnote_search_tokens(NEW.text) FROM search_blocks WHERE seq = NEW.seq;
END;
CREATE TRIGGER IF NOT EXISTS search_block_changed AFTER UPDATE OF text ON blocks
WHEN OLD.text IS NOT NEW.text BEGIN
    INSERT INTO search_index (search_index, rowid, body)
        SELECT 'delete', key, mnote_search_tokens(OLD.text) FROM search_blocks WHERE seq = OLD.seq;
    INSERT INTO search_index (rowid, body)
        SELECT key, mnote_search_tokens(NEW.text) FROM search_blocks WHERE seq = OLD.seq;
END;
CREATE TABLE IF NOT EXISTS page_changes (
    seq          INTEGER PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    page_id      TEXT NOT NULL,
    revision     INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS search_page_changed AFTER INSERT ON page_history BEGIN
    INSERT INTO page_changes (workspace_id, page_id, revision)
        VALUES (NEW.workspace_id, NEW.page_id, NEW.revision);
END;
CREATE TRIGGER IF NOT EXISTS search_block_removed AFTER DELETE ON blocks BEGIN
    INSERT INTO search_index (search_index, rowid, body)
        SELECT 'delete', key, mnote_search_tokens(OLD.text) FROM search_blocks WHERE seq = OLD.seq;
    DELETE FROM search_blocks WHERE seq = OLD.seq;
END;
"""

TRIGGERS = (
    "search_page_added",
    "search_page_renamed",
    "search_page_removed",
    "search_block_added",
    "search_block_changed",
    "search_block_removed",
    "search_page_changed",
)


def build(tx: sqlite3.Connection) -> str:
    """Index every page and block already in the store (a migration step, or a bulk load with the
    triggers dropped) into an empty index: pages numbered in order, each page's blocks given keys in
    fresh chunks of its workspace, then the index filled and merged into one segment."""
    if tx.execute("SELECT 1 FROM search_pages LIMIT 1").fetchone() is not None:
        raise RuntimeError("search index: build() needs an empty index")
    tx.execute(
        "INSERT OR IGNORE INTO search_workspaces (workspace_id) SELECT DISTINCT workspace_id FROM pages"
    )
    if tx.execute(f"SELECT 1 FROM search_workspaces WHERE num > {MAX_WORKSPACES}").fetchone():
        raise RuntimeError("search index: too many workspaces")
    tx.execute(
        "INSERT INTO search_pages (num, workspace_id, page_id)"
        f" SELECT (w.num << {WORKSPACE_SHIFT})"
        " | row_number() OVER (PARTITION BY p.workspace_id ORDER BY p.rowid), p.workspace_id, p.id"
        " FROM pages p JOIN search_workspaces w ON w.workspace_id = p.workspace_id"
    )
    chunks: dict[str, int] = {}
    keys: list[tuple[int, int]] = []
    owners: list[tuple[int, int]] = []
    nexts: list[tuple[int, int]] = []
    rows = tx.execute(
        "SELECT w.num, s.num, b.seq FROM blocks b"
        " JOIN search_pages s ON s.workspace_id = b.workspace_id AND s.page_id = b.page_id"
        " JOIN search_workspaces w ON w.workspace_id = b.workspace_id ORDER BY s.num, b.seq"
    )
    page, key = None, 0
    for ws_num, page_num, seq in rows:
        if page_num != page:
            if page is not None:
                nexts.append((key, page))
            page, key = page_num, 0
        if key & SLOTS == 0:
            chunk = chunks.get(ws_num, 1)
            chunks[ws_num] = chunk + 1
            key = (((ws_num << (WORKSPACE_SHIFT - SLOT_BITS)) | chunk) << SLOT_BITS) | 1
            owners.append((key >> SLOT_BITS, page_num))
        keys.append((key, seq))
        key += 1
    if page is not None:
        nexts.append((key, page))
    tx.executemany("INSERT INTO search_chunks (num, page) VALUES (?, ?)", owners)
    tx.executemany("INSERT INTO search_blocks (key, seq) VALUES (?, ?)", keys)
    tx.executemany("UPDATE search_pages SET next_key = ? WHERE num = ?", nexts)
    tx.execute(
        "UPDATE search_workspaces SET next_page = 1 + (SELECT count(*) FROM search_pages s"
        " WHERE s.workspace_id = search_workspaces.workspace_id)"
    )
    tx.executemany(
        "UPDATE search_workspaces SET next_chunk = ? WHERE num = ?", [(n, w) for w, n in chunks.items()]
    )
    pages = tx.execute(
        "INSERT INTO search_titles (rowid, title) SELECT s.num, mnote_search_tokens(p.title)"
        " FROM search_pages s JOIN pages p ON p.workspace_id = s.workspace_id AND p.id = s.page_id"
    ).rowcount
    blocks = tx.execute(
        "INSERT INTO search_index (rowid, body) SELECT s.key, mnote_search_tokens(b.text)"
        " FROM search_blocks s JOIN blocks b ON b.seq = s.seq"
    ).rowcount
    tx.execute("INSERT INTO search_index (search_index) VALUES ('optimize')")
    tx.execute("INSERT INTO search_titles (search_titles) VALUES ('optimize')")
    return f"search index: {pages} titles, {blocks} blocks"


# -- searching ------------------------------------------------------------------------------------


class Clock(Protocol):
    """A store's page-change clock: what a cursor pins its results to (docs/search.md, "Cursor")."""

    def now(self, conn: Any) -> Watermark:
        """The watermark of what this read transaction sees."""

    def valid(self, watermark: Watermark) -> bool:
        """Whether a watermark from a cursor is one this store could have issued (the client may
        alter a cursor: a wrong one is refused, never passed to the database as it is)."""

    def changes(
        self, conn: Any, watermark: Watermark, workspaces: Sequence[str], limit: int
    ) -> list[tuple[str, str, int]]:
        """(workspace, page, revision) of writes to these workspaces after the watermark, at most `limit`."""


class SqliteClock:
    """SQLite: `page_changes` numbers every recorded write (a trigger on `page_history`); writers hold
    the file's write lock, so the numbers follow commit order and the watermark is the last one."""

    def now(self, conn: Any) -> Watermark:
        return int(conn.execute("SELECT coalesce(max(seq), 0) FROM page_changes").fetchone()[0])

    def valid(self, watermark: Watermark) -> bool:
        return isinstance(watermark, int) and watermark >= 0

    def changes(
        self, conn: Any, watermark: Watermark, workspaces: Sequence[str], limit: int
    ) -> list[tuple[str, str, int]]:
        rows = conn.execute(
            "SELECT workspace_id, page_id, revision FROM page_changes WHERE seq > ?"
            " AND workspace_id IN (SELECT value FROM json_each(?)) ORDER BY seq LIMIT ?",
            (watermark, json.dumps(list(workspaces)), limit),
        ).fetchall()
        return [(ws, page, int(revision)) for ws, page, revision in rows]


SQLITE_CLOCK = SqliteClock()
MAX_CHANGE_ROWS = 16 * MAX_CHANGED_PAGES  # writes read back after a watermark before the cursor is refused


@dataclass(frozen=True, slots=True)
class Moment:
    """The moment a search's first page was answered at, as a later page sees it: the watermark, and
    each page written since with the first revision written after it."""

    watermark: Watermark
    changed: dict[tuple[str, str], int]


def moment(conn: Any, cursor: Cursor | None, workspaces: Sequence[str], clock: Clock) -> Moment:
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
    conn: Any, ws: str, page: str, revision: int, segments: Sequence[Segment]
) -> tuple[int, int] | None:
    """(title matched, matching rows) of a page as it was before `revision`, or None if it did not
    match then (or did not exist)."""
    before = history.page_before(conn, ws, page, revision)
    if before is None:
        return None
    title = int(matches(before.title, segments))
    rows = title + sum(1 for text in before.texts if matches(text, segments))
    return (title, rows) if rows else None


def check(query: SearchQuery) -> list[Segment] | None:
    """The query's segments (None: a listing), after the login checkpoint and the arguments."""
    if not query.actor_id:
        raise MnoteError(ErrorCode.UNAUTHENTICATED, Reason.NO_ACTOR)
    return segments_of(query)


def search(
    connection: sql.Connection,
    query: SearchQuery,
    segments: Sequence[Segment] | None,
    database: sql.Database,
) -> dict[str, Any]:
    """The hits of one search (or listing), best first: `{"hits": [...], "nextCursor"?}`.

    The index is SQLite's (FTS5): a store on another database answers search itself (PostgreSQL:
    `kernel/postgres/search.py`); any other says so rather than answer wrongly. `Database.chunk_pages` caches which page each chunk belongs to."""
    if not isinstance(database, Database):
        raise NotImplementedError(f"page search has no index on the {database.dialect} store")
    conn = cast(sqlite3.Connection, connection)
    workspaces = _readable_workspaces(conn, query)
    if segments is None:
        return _listing(conn, query, workspaces)
    return _matches(conn, query, segments, workspaces, database.chunk_pages)


def _readable_workspaces(conn: sqlite3.Connection, query: SearchQuery) -> dict[str, int | None]:
    """The workspaces searched, with their index numbers (None: not indexed yet, so no pages)."""
    rows = conn.execute(
        "SELECT m.workspace_id, m.role, w.num FROM members m"
        " LEFT JOIN search_workspaces w ON w.workspace_id = m.workspace_id WHERE m.actor_id = ?",
        (query.actor_id,),
    ).fetchall()
    allowed = set(query.workspaces) if query.workspaces is not None else None
    found = {
        workspace: num
        for workspace, role, num in rows
        if Scope.PAGE_READ in grants_of(role) and (allowed is None or workspace in allowed)
    }
    if query.workspace_id is None:
        return found
    if query.workspace_id not in found:
        raise MnoteError(ErrorCode.PERMISSION_DENIED, Reason.NOT_MEMBER, {"workspaceId": query.workspace_id})
    return {query.workspace_id: found[query.workspace_id]}


def _hidden_pages(conn: sqlite3.Connection, actor_id: str, workspaces: dict[str, int | None]) -> set[int]:
    """The numbers (`search_pages.num`) of restricted pages in these workspaces the actor may not read."""
    hidden: set[int] = set()
    for workspace in workspaces:
        rows = conn.execute(
            "SELECT s.num, m.role, a.role FROM pages p"
            " JOIN members m ON m.workspace_id = p.workspace_id AND m.actor_id = ?"
            " JOIN search_pages s ON s.workspace_id = p.workspace_id AND s.page_id = p.id"
            " LEFT JOIN page_access a ON a.workspace_id = p.workspace_id AND a.page_id = p.id AND a.actor_id = ?"
            " WHERE p.workspace_id = ? AND p.restricted = 1",
            (actor_id, actor_id, workspace),
        ).fetchall()
        hidden.update(
            num
            for num, role, page_role in rows
            if Scope.PAGE_READ not in grants_of(effective_role(role, page_role, True))
        )
    return hidden


def _matches(
    conn: sqlite3.Connection,
    query: SearchQuery,
    segments: Sequence[Segment],
    workspaces: dict[str, int | None],
    chunk_pages: dict[int, int],
) -> dict[str, Any]:
    """Pages ranked by (title matched, number of matching rows, page number), best first.

    The index answers the matching rowids of each readable workspace's range (one pass over all of
    them when the actor reads every indexed workspace: nothing to leave out) as one string
    (`group_concat`: SQLite walks the matches in C, Python never sees a row per match), parsed at
    once; they are counted per chunk in C (`Counter` over the rowids shifted right: no join, no
    sort), each matching chunk is turned into its page (`chunk_pages`, a cache of `search_chunks`: a
    chunk never changes page), the title matches added, and the best `limit + 1` kept. A returned
    hit's first and last matching blocks (its snippets) are found in the sorted rowids by bisection."""
    nums = sorted(num for num in workspaces.values() if num is not None)
    cursor = decode_cursor(query, (int, int, int))
    if not nums:
        return {"hits": []}
    when = moment(conn, cursor, list(workspaces), SQLITE_CLOCK)
    expression = match_expression(segments)
    indexed = conn.execute("SELECT count(*) FROM search_workspaces").fetchone()[0]
    ranges: list[tuple[int, int] | None] = (
        [None]
        if len(nums) == indexed
        else [(n << WORKSPACE_SHIFT, ((n + 1) << WORKSPACE_SHIFT) - 1) for n in nums]
    )
    keys: list[int] = []  # every matching block row, ascending
    titles: set[int] = set()
    for bounds in ranges:
        where, params = (
            ("", (expression,)) if bounds is None else (" AND rowid BETWEEN ? AND ?", (expression, *bounds))
        )
        (joined,) = conn.execute(
            f"SELECT group_concat(rowid) FROM search_index WHERE search_index MATCH ?{where}", params
        ).fetchone()
        if joined:
            keys += json.loads(f"[{joined}]")
        titles.update(
            page
            for (page,) in conn.execute(
                f"SELECT rowid FROM search_titles WHERE search_titles MATCH ?{where}", params
            )
        )
    keys.sort()  # already in order (FTS5 walks rowids upwards): linear, and bisection can rely on it
    counts = Counter(map(operator.rshift, keys, itertools.repeat(SLOT_BITS)))
    _learn_chunks(conn, chunk_pages, [chunk for chunk in counts if chunk not in chunk_pages])
    pages: dict[int, list[int]] = {}  # page -> [matching rows, first chunk, last chunk]
    for chunk, count in counts.items():
        page = chunk_pages.get(chunk)
        if page is None:  # cannot happen while the triggers keep both tables; never fail a read on it
            continue
        entry = pages.get(page)
        if entry is None:
            pages[page] = [count, chunk, chunk]
        else:
            entry[0] += count
            entry[1] = min(entry[1], chunk)
            entry[2] = max(entry[2], chunk)
    for page in titles:
        pages.setdefault(page, [0, 0, -1])[0] += 1  # a title-only entry has no chunk (last < first)
    hidden = _hidden_pages(conn, query.actor_id, workspaces)
    keyed = [(1 if page in titles else 0, entry[0], page) for page, entry in pages.items()]
    if when.changed:
        # a page written since the first page is ranked as it was then (its key then, the one any
        # earlier page of results saw): its current key is left out, whether it matches now or not
        written = _page_nums(conn, when.changed)
        moved = set(written.values())
        keyed = [key for key in keyed if key[2] not in moved]
        readable = [(ws_page, num) for ws_page, num in written.items() if num not in hidden]
        if len(readable) > MAX_CHANGED_PAGES:
            raise too_many_changes(MAX_CHANGED_PAGES)
        for (ws, page_id), num in readable:
            then = as_it_was(conn, ws, page_id, when.changed[(ws, page_id)], segments)
            if then is not None:
                keyed.append((*then, num))
    if hidden or cursor is not None:
        bound = tuple(cursor.after) if cursor is not None else (2, 0, 0)
        keyed = [key for key in keyed if key[2] not in hidden and key < bound]
    ranked = heapq.nlargest(query.limit + 1, keyed)
    more = len(ranked) > query.limit
    ranked = ranked[: query.limit]
    hits = []
    for _title, _rows, page in ranked:
        hit = _page_hit(conn, page)
        entry = pages.get(page)
        snippets = _snippets(conn, segments, _ends(keys, entry)) if entry is not None else []
        if snippets:
            hit["snippets"] = snippets
        hits.append(hit)
    view: dict[str, Any] = {"hits": hits}
    if more:
        view["nextCursor"] = encode_cursor(query, list(ranked[-1]), when.watermark)
    return view


def _page_nums(conn: sqlite3.Connection, pages: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """The index numbers of these pages (`search_pages.num`)."""
    out: dict[tuple[str, str], int] = {}
    for ws, page_id in pages:
        row = conn.execute(
            "SELECT num FROM search_pages WHERE workspace_id = ? AND page_id = ?", (ws, page_id)
        ).fetchone()
        if row is not None:
            out[(ws, page_id)] = int(row[0])
    return out


def _ends(keys: list[int], entry: list[int]) -> set[int]:
    """The first and last matching block rows of a page (`entry`: its first and last chunk)."""
    _count, first, last = entry
    if last < first:
        return set()
    low = bisect.bisect_left(keys, first << SLOT_BITS)
    high = bisect.bisect_right(keys, (last << SLOT_BITS) | SLOTS) - 1
    return {keys[low], keys[high]}


def _learn_chunks(conn: sqlite3.Connection, chunk_pages: dict[int, int], missing: list[int]) -> None:
    """Add the pages of `missing` chunks to the cache, in one query."""
    if missing:
        chunk_pages.update(
            conn.execute(
                "SELECT c.num, c.page FROM json_each(?) j JOIN search_chunks c ON c.num = j.value",
                (json.dumps(missing),),
            ).fetchall()
        )


def _page_hit(conn: sqlite3.Connection, page: int) -> dict[str, Any]:
    workspace_id, page_id, title, revision, updated_at = conn.execute(
        "SELECT p.workspace_id, p.id, p.title, p.revision, p.updated_at FROM search_pages s"
        " JOIN pages p ON p.workspace_id = s.workspace_id AND p.id = s.page_id WHERE s.num = ?",
        (page,),
    ).fetchone()
    return _hit(workspace_id, page_id, title, revision, updated_at)


def _hit(workspace_id: str, page_id: str, title: str, revision: int, updated_at: str) -> dict[str, Any]:
    return {
        "workspaceId": workspace_id,
        "documentId": page_id,
        "title": title,
        "revision": revision,
        "updatedAt": updated_at,
    }


def _snippets(conn: sqlite3.Connection, segments: Sequence[Segment], keys: set[int]) -> list[dict[str, str]]:
    """The snippets of a hit's first and last matching blocks (the keys the ranking query found)."""
    if not keys:
        return []
    rows = conn.execute(
        "SELECT b.id, b.text FROM search_blocks s JOIN blocks b ON b.seq = s.seq"
        f" WHERE s.key IN ({', '.join('?' * len(keys))}) ORDER BY s.key",
        sorted(keys),
    ).fetchall()
    out: list[dict[str, str]] = []
    for block_id, text in rows:
        marked = snippet(text, segments)
        if marked is not None:
            out.append({"blockId": block_id, "text": marked})
    return out[:SNIPPETS_PER_HIT]


def _listing(
    conn: sqlite3.Connection,
    query: SearchQuery,
    workspaces: dict[str, int | None],
    clock: Clock = SQLITE_CLOCK,
) -> dict[str, Any]:
    """Every readable page, most recently changed first: per workspace at most `limit + 1` rows from
    its (workspace, updated_at) index (more by the pages written since the first page, which are left
    out there and put back where they stood then), merged. The SQL is portable: PostgreSQL runs it
    too, with its own clock."""
    cursor = decode_cursor(query, (str, str, str))
    if not workspaces:
        return {"hits": []}
    when = moment(conn, cursor, list(workspaces), clock)
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
    view: dict[str, Any] = {"hits": [_hit(*row[:5]) for row in rows]}
    if more:
        last = rows[-1]
        view["nextCursor"] = encode_cursor(query, [last[5], last[0], last[1]], when.watermark)
    return view
