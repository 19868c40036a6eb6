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

import sqlite3
from collections.abc import Sequence
from typing import Any

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.policy import ROLES, Scope, effective_role, grants_of
from mnote_mcp.kernel.port import SearchQuery
from mnote_mcp.kernel.search import (
    SNIPPETS_PER_HIT,
    Segment,
    decode_cursor,
    encode_cursor,
    match_expression,
    segments_of,
    snippet,
)

WORKSPACE_SHIFT = 47
PAGE_SHIFT = 27
MAX_WORKSPACES = (1 << (63 - WORKSPACE_SHIFT)) - 1
MAX_PAGES = (1 << (WORKSPACE_SHIFT - PAGE_SHIFT)) - 1  # per workspace, over its life
MAX_BLOCK_INSERTS = (1 << PAGE_SHIFT) - 1  # per page, over its life
BLOCK_MASK = (1 << PAGE_SHIFT) - 1
_ROLES = ", ".join(
    f"'{role}'" for role in ROLES
)  # a restricted page's access row grants read with any of them
_PAGE = "workspace_id = NEW.workspace_id AND page_id = NEW.id"
_BLOCK_PAGE = "workspace_id = NEW.workspace_id AND page_id = NEW.page_id"

SEARCH_DDL = f"""
CREATE TABLE IF NOT EXISTS search_workspaces (
    num          INTEGER PRIMARY KEY,
    workspace_id TEXT NOT NULL UNIQUE,
    next_page    INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS search_pages (
    base         INTEGER PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    page_id      TEXT NOT NULL,
    next_block   INTEGER NOT NULL DEFAULT 1,
    UNIQUE (workspace_id, page_id)
);
CREATE TABLE IF NOT EXISTS search_blocks (
    key INTEGER PRIMARY KEY,
    seq INTEGER NOT NULL UNIQUE
);
CREATE VIRTUAL TABLE IF NOT EXISTS search_index USING fts5(
    title, body, content='', columnsize=0, tokenize='ascii'
);
CREATE INDEX IF NOT EXISTS pages_restricted ON pages (workspace_id) WHERE restricted = 1;
CREATE INDEX IF NOT EXISTS pages_by_change ON pages (workspace_id, updated_at, id);
CREATE TRIGGER IF NOT EXISTS search_page_added AFTER INSERT ON pages BEGIN
    INSERT OR IGNORE INTO search_workspaces (workspace_id) VALUES (NEW.workspace_id);
    SELECT RAISE(ABORT, 'search index: too many workspaces or pages')
        FROM search_workspaces WHERE workspace_id = NEW.workspace_id
        AND (num > {MAX_WORKSPACES} OR next_page > {MAX_PAGES});
    INSERT INTO search_pages (base, workspace_id, page_id)
        SELECT (num << {WORKSPACE_SHIFT}) | (next_page << {PAGE_SHIFT}), NEW.workspace_id, NEW.id
        FROM search_workspaces WHERE workspace_id = NEW.workspace_id;
    UPDATE search_workspaces SET next_page = next_page + 1 WHERE workspace_id = NEW.workspace_id;
    INSERT INTO search_index (rowid, title, body)
        SELECT base, mnote_search_tokens(NEW.title), '' FROM search_pages WHERE {_PAGE};
END;
CREATE TRIGGER IF NOT EXISTS search_page_renamed AFTER UPDATE OF title ON pages
WHEN OLD.title IS NOT NEW.title BEGIN
    INSERT INTO search_index (search_index, rowid, title, body)
        SELECT 'delete', base, mnote_search_tokens(OLD.title), '' FROM search_pages WHERE {_PAGE};
    INSERT INTO search_index (rowid, title, body)
        SELECT base, mnote_search_tokens(NEW.title), '' FROM search_pages WHERE {_PAGE};
END;
CREATE TRIGGER IF NOT EXISTS search_page_removed AFTER DELETE ON pages BEGIN
    INSERT INTO search_index (search_index, rowid, title, body)
        SELECT 'delete', base, mnote_search_tokens(OLD.title), '' FROM search_pages
        WHERE workspace_id = OLD.workspace_id AND page_id = OLD.id;
    DELETE FROM search_pages WHERE workspace_id = OLD.workspace_id AND page_id = OLD.id;
END;
CREATE TRIGGER IF NOT EXISTS search_block_added AFTER INSERT ON blocks BEGIN
    SELECT RAISE(ABORT, 'search index: too many block inserts in one page')
        FROM search_pages WHERE {_BLOCK_PAGE} AND next_block > {MAX_BLOCK_INSERTS};
    INSERT INTO search_blocks (key, seq)
        SELECT base | next_block, NEW.seq FROM search_pages WHERE {_BLOCK_PAGE};
    UPDATE search_pages SET next_block = next_block + 1 WHERE {_BLOCK_PAGE};
    INSERT INTO search_index (rowid, title, body)
        SELECT key, '', mnote_search_tokens(NEW.text) FROM search_blocks WHERE seq = NEW.seq;
END;
CREATE TRIGGER IF NOT EXISTS search_block_changed AFTER UPDATE OF text ON blocks
WHEN OLD.text IS NOT NEW.text BEGIN
    INSERT INTO search_index (search_index, rowid, title, body)
        SELECT 'delete', key, '', mnote_search_tokens(OLD.text) FROM search_blocks WHERE seq = OLD.seq;
    INSERT INTO search_index (rowid, title, body)
        SELECT key, '', mnote_search_tokens(NEW.text) FROM search_blocks WHERE seq = OLD.seq;
END;
CREATE TRIGGER IF NOT EXISTS search_block_removed AFTER DELETE ON blocks BEGIN
    INSERT INTO search_index (search_index, rowid, title, body)
        SELECT 'delete', key, '', mnote_search_tokens(OLD.text) FROM search_blocks WHERE seq = OLD.seq;
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
)


def build(tx: sqlite3.Connection) -> str:
    """Index every page and block already in the store (a migration step, or a bulk load with the
    triggers dropped) into an empty index: numbers handed out in one pass each, then the index filled
    in two statements."""
    if tx.execute("SELECT 1 FROM search_pages LIMIT 1").fetchone() is not None:
        raise RuntimeError("search index: build() needs an empty index")
    tx.execute(
        "INSERT OR IGNORE INTO search_workspaces (workspace_id) SELECT DISTINCT workspace_id FROM pages"
    )
    too_many = tx.execute(
        f"SELECT 1 FROM search_workspaces WHERE num > {MAX_WORKSPACES} UNION ALL"
        f" SELECT 1 FROM pages GROUP BY workspace_id HAVING count(*) > {MAX_PAGES} LIMIT 1"
    ).fetchone()
    if too_many:
        raise RuntimeError("search index: too many workspaces or pages in one workspace")
    tx.execute(
        "INSERT INTO search_pages (base, workspace_id, page_id)"
        f" SELECT (w.num << {WORKSPACE_SHIFT})"
        f" | ((w.next_page - 1 + row_number() OVER (PARTITION BY p.workspace_id ORDER BY p.rowid)) << {PAGE_SHIFT}),"
        " p.workspace_id, p.id FROM pages p JOIN search_workspaces w ON w.workspace_id = p.workspace_id"
    )
    tx.execute(
        "UPDATE search_workspaces SET next_page = 1 + coalesce((SELECT max((base >> "
        f"{PAGE_SHIFT}) & {MAX_PAGES}) FROM search_pages s WHERE s.workspace_id = search_workspaces.workspace_id), 0)"
    )
    tx.execute(
        "INSERT INTO search_blocks (key, seq)"
        " SELECT s.base | (row_number() OVER (PARTITION BY b.workspace_id, b.page_id ORDER BY b.seq)), b.seq"
        " FROM blocks b JOIN search_pages s ON s.workspace_id = b.workspace_id AND s.page_id = b.page_id"
    )
    tx.execute(
        f"UPDATE search_pages SET next_block = 1 + coalesce((SELECT max(key & {BLOCK_MASK}) FROM search_blocks"
        f" WHERE key BETWEEN search_pages.base AND search_pages.base | {BLOCK_MASK}), 0)"
    )
    pages = tx.execute(
        "INSERT INTO search_index (rowid, title, body) SELECT s.base, mnote_search_tokens(p.title), ''"
        " FROM search_pages s JOIN pages p ON p.workspace_id = s.workspace_id AND p.id = s.page_id"
    ).rowcount
    blocks = tx.execute(
        "INSERT INTO search_index (rowid, title, body) SELECT s.key, '', mnote_search_tokens(b.text)"
        " FROM search_blocks s JOIN blocks b ON b.seq = s.seq"
    ).rowcount
    return f"search index: {pages} titles, {blocks} blocks"


# -- searching ------------------------------------------------------------------------------------


def check(query: SearchQuery) -> list[Segment] | None:
    """The query's segments (None: a listing), after the login checkpoint and the arguments."""
    if not query.actor_id:
        raise MnoteError(ErrorCode.UNAUTHENTICATED, Reason.NO_ACTOR)
    return segments_of(query)


def search(
    conn: sqlite3.Connection, query: SearchQuery, segments: Sequence[Segment] | None
) -> dict[str, Any]:
    """The hits of one search (or listing), best first: `{"hits": [...], "nextCursor"?}`."""
    workspaces = _readable_workspaces(conn, query)
    if segments is None:
        return _listing(conn, query, workspaces)
    return _matches(conn, query, segments, workspaces)


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


def _hidden_pages(conn: sqlite3.Connection, actor_id: str, workspaces: dict[str, int | None]) -> list[str]:
    """The keys (`search_pages.base`) of restricted pages in these workspaces the actor may not read."""
    hidden: list[str] = []
    for workspace in workspaces:
        rows = conn.execute(
            "SELECT s.base, m.role, a.role FROM pages p"
            " JOIN members m ON m.workspace_id = p.workspace_id AND m.actor_id = ?"
            " JOIN search_pages s ON s.workspace_id = p.workspace_id AND s.page_id = p.id"
            " LEFT JOIN page_access a ON a.workspace_id = p.workspace_id AND a.page_id = p.id AND a.actor_id = ?"
            " WHERE p.workspace_id = ? AND p.restricted = 1",
            (actor_id, actor_id, workspace),
        ).fetchall()
        hidden += [
            str(base >> PAGE_SHIFT)
            for base, role, page_role in rows
            if Scope.PAGE_READ not in grants_of(effective_role(role, page_role, True))
        ]
    return hidden


def _matches(
    conn: sqlite3.Connection,
    query: SearchQuery,
    segments: Sequence[Segment],
    workspaces: dict[str, int | None],
) -> dict[str, Any]:
    """Pages ranked by (title matches, number of matching blocks, page key), all in one statement:
    one rowid range per readable workspace, grouped by page on the rowid, cut to the limit."""
    ranges = [num for num in workspaces.values() if num is not None]
    if not ranges:
        return {"hits": []}
    expression = match_expression(segments)
    parts = [
        f"SELECT rowid >> {PAGE_SHIFT} AS page, count(*) AS n, min(rowid & {BLOCK_MASK}) = 0 AS t"
        " FROM search_index WHERE search_index MATCH :q"
        f" AND rowid BETWEEN {num << WORKSPACE_SHIFT} AND {((num + 1) << WORKSPACE_SHIFT) - 1} GROUP BY page"
        for num in sorted(ranges)
    ]
    where: list[str] = []
    hidden = _hidden_pages(conn, query.actor_id, workspaces)
    if hidden:
        where.append(f"page NOT IN ({', '.join(hidden)})")
    params: dict[str, Any] = {"q": expression, "limit": query.limit + 1}
    after = decode_cursor(query, 3)
    if after is not None:
        where.append("(t, n, page) < (:t, :n, :page)")
        params.update(t=after[0], n=after[1], page=after[2])
    rows = conn.execute(
        f"SELECT t, n, page FROM ({' UNION ALL '.join(parts)})"
        + (f" WHERE {' AND '.join(where)}" if where else "")
        + " ORDER BY t DESC, n DESC, page DESC LIMIT :limit",
        params,
    ).fetchall()
    more = len(rows) > query.limit
    rows = rows[: query.limit]
    hits = []
    for _title_hit, _blocks, page in rows:
        base = page << PAGE_SHIFT
        hit = _page_hit(conn, base)
        snippets = _snippets(conn, expression, segments, base)
        if snippets:
            hit["snippets"] = snippets
        hits.append(hit)
    view: dict[str, Any] = {"hits": hits}
    if more:
        view["nextCursor"] = encode_cursor(query, list(rows[-1]))
    return view


def _page_hit(conn: sqlite3.Connection, base: int) -> dict[str, Any]:
    workspace_id, page_id, title, revision, updated_at = conn.execute(
        "SELECT p.workspace_id, p.id, p.title, p.revision, p.updated_at FROM search_pages s"
        " JOIN pages p ON p.workspace_id = s.workspace_id AND p.id = s.page_id WHERE s.base = ?",
        (base,),
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


def _snippets(
    conn: sqlite3.Connection, expression: str, segments: Sequence[Segment], base: int
) -> list[dict[str, str]]:
    """Up to `SNIPPETS_PER_HIT` matching blocks of one page (its own rowid range), marked."""
    rows = conn.execute(
        "SELECT b.id, b.text FROM (SELECT rowid AS key FROM search_index WHERE search_index MATCH ?"
        " AND rowid BETWEEN ? AND ? ORDER BY rowid LIMIT ?) h"
        " JOIN search_blocks s ON s.key = h.key JOIN blocks b ON b.seq = s.seq ORDER BY h.key",
        (expression, base + 1, base | BLOCK_MASK, SNIPPETS_PER_HIT + 1),
    ).fetchall()
    out: list[dict[str, str]] = []
    for block_id, text in rows:
        marked = snippet(text, segments)
        if marked is not None and len(out) < SNIPPETS_PER_HIT:
            out.append({"blockId": block_id, "text": marked})
    return out


def _listing(
    conn: sqlite3.Connection, query: SearchQuery, workspaces: dict[str, int | None]
) -> dict[str, Any]:
    """Every readable page, most recently changed first: per workspace at most `limit + 1` rows from
    its (workspace, updated_at) index, merged."""
    if not workspaces:
        return {"hits": []}
    after = decode_cursor(query, 3)
    keyset = " AND (p.updated_at, p.workspace_id, p.id) < (:at, :ws, :id)" if after is not None else ""
    parts = [
        "SELECT * FROM (SELECT p.workspace_id, p.id, p.title, p.revision, p.updated_at FROM pages p"
        " JOIN members m ON m.workspace_id = p.workspace_id AND m.actor_id = :actor"
        " LEFT JOIN page_access a ON a.workspace_id = p.workspace_id AND a.page_id = p.id AND a.actor_id = :actor"
        f" WHERE p.workspace_id = :w{index} AND (p.restricted = 0 OR a.role IN ({_ROLES})){keyset}"
        " ORDER BY p.updated_at DESC, p.id DESC LIMIT :limit)"
        for index in range(len(workspaces))
    ]
    params: dict[str, Any] = {"actor": query.actor_id, "limit": query.limit + 1}
    params.update({f"w{index}": workspace for index, workspace in enumerate(sorted(workspaces))})
    if after is not None:
        params.update(at=after[0], ws=after[1], id=after[2])
    rows = conn.execute(
        f"SELECT * FROM ({' UNION ALL '.join(parts)})"
        " ORDER BY updated_at DESC, workspace_id DESC, id DESC LIMIT :limit",
        params,
    ).fetchall()
    more = len(rows) > query.limit
    rows = rows[: query.limit]
    view: dict[str, Any] = {"hits": [_hit(*row) for row in rows]}
    if more:
        last = rows[-1]
        view["nextCursor"] = encode_cursor(query, [last[4], last[0], last[1]])
    return view
