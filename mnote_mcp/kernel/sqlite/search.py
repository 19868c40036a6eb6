"""The SQLite search index: FTS5 over the tokens of `kernel/search.py`, kept by the page-change path.

Two contentless FTS5 tables hold the tokens (`index_tokens`): `search_titles` a row per page, keyed by
the page's number, and `search_index` a row per block, keyed by the block's *key*. A page's number is
`workspace number << 40 | n` (its workspace's n-th page); a block's key is `chunk << 6 | slot`, where
a chunk (`workspace number << 34 | m`, its workspace's m-th chunk) holds 63 consecutive keys of one
page. So a workspace's rows are one rowid range (a search reads only the ranges of the workspaces the
actor may read: other workspaces cost nothing, not even time), a matching key's page is its chunk's
(`search_chunks`, cached in `Fts5Index.chunk_pages`: a chunk never changes page; at most
`MAX_CHUNK_PAGES` of them), and ranking pages needs no join, however many blocks match.

Numbers are handed out by `search_workspaces` (its next page and next chunk), `search_pages` (a page's
next key) and `search_blocks` (a block row's key, by the row's `seq`). The index follows the writes
through the one page-change path (`Fts5Index.apply`, fed by `kernel/store/changes.py` in the writing
transaction, after the rows are written): a new page gets its number and its title's tokens, a renamed
one its new tokens, each new block row the next key of its page (in the order the rows were written),
a deleted or edited row's old tokens go (FTS5's contentless delete is given the tokens it indexed, so
the tokenizer must never change without a migration that rebuilds the index) and an edited row's new
ones come. A search after a write sees it; a rolled-back write leaves no trace. Until schema version 5
triggers on `pages` and `blocks` did this (`OLD_TRIGGERS`, dropped by that migration).

`page_changes` numbers every recorded write (the page-change clock a search cursor pins its results
to, `SqliteClock`); the same path writes it.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import json
import operator
import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence

from mnote_mcp.kernel.policy import Scope, effective_role, grants_of
from mnote_mcp.kernel.port import SearchHit, SearchQuery, SearchResult, Snippet
from mnote_mcp.kernel.search import (
    MAX_CHANGED_PAGES,
    Segment,
    Watermark,
    decode_cursor,
    encode_cursor,
    index_tokens,
    match_expression,
    snippets,
    strict,
    too_many_changes,
)
from mnote_mcp.kernel.store.changes import PageChange
from mnote_mcp.kernel.store.rows import BlockChange, BlockRow, ids_in_chunks
from mnote_mcp.kernel.store.search import (
    as_it_was,
    hit,
    listing,
    moment,
    readable_workspaces,
    rebuild,
)
from mnote_mcp.kernel.store.sql import Connection

WORKSPACE_SHIFT = 40  # a key: workspace number << 40 | (chunk number << 6 | slot), or | page number
SLOT_BITS = 6  # 64 keys per chunk; slot 0 is never used, so a page's next key with slot 0 means "no chunk"
SLOTS = (1 << SLOT_BITS) - 1
MAX_WORKSPACES = (1 << (63 - WORKSPACE_SHIFT)) - 1
# Chunks whose page the index remembers (`ChunkPages`): about 6 MB at most (~116 bytes an entry), all
# the chunks of a store of three million block rows. Edits make new chunks for as long as the server
# runs (a row's key is never reused), so without a bound the cache grew with every edited page a search
# met (issue 30).
MAX_CHUNK_PAGES = 50_000

SEARCH_DDL = """
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
CREATE TABLE IF NOT EXISTS page_changes (
    seq          INTEGER PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    page_id      TEXT NOT NULL,
    revision     INTEGER NOT NULL
);
"""

# The triggers that kept the index before schema version 5 (the page-change path keeps it now).
OLD_TRIGGERS = (
    "search_page_added",
    "search_page_renamed",
    "search_page_removed",
    "search_block_added",
    "search_block_changed",
    "search_block_removed",
    "search_page_changed",
)


class SqliteClock:
    """SQLite: `page_changes` numbers every recorded write (`Fts5Index.apply`); writers hold the
    file's write lock, so the numbers follow commit order and the watermark is the last one."""

    def now(self, conn: Connection) -> Watermark:
        return int(conn.execute("SELECT coalesce(max(seq), 0) FROM page_changes").fetchone()[0])

    def valid(self, watermark: Watermark) -> bool:
        return isinstance(watermark, int) and watermark >= 0

    def changes(
        self, conn: Connection, watermark: Watermark, workspaces: Sequence[str], limit: int
    ) -> list[tuple[str, str, int]]:
        rows = conn.execute(
            "SELECT workspace_id, page_id, revision FROM page_changes WHERE seq > ?"
            " AND workspace_id IN (SELECT value FROM json_each(?)) ORDER BY seq LIMIT ?",
            (watermark, json.dumps(list(workspaces)), limit),
        ).fetchall()
        return [(ws, page, int(revision)) for ws, page, revision in rows]


SQLITE_CLOCK = SqliteClock()


class ChunkPages:
    """The chunk -> page map, learnt as searches meet chunks: a chunk never changes page (chunk numbers
    only grow), so what is known stays true, whichever process wrote it. At most `MAX_CHUNK_PAGES`
    entries: one that would take it past the bound starts it again empty (what a search needs is
    learnt again in one query). Thread-safe: searches run on worker threads."""

    def __init__(self) -> None:
        self._known: dict[int, int] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._known)

    def pages(self, conn: Connection, chunks: Collection[int]) -> dict[int, int]:
        """The page of each of `chunks` the store knows, from the cache or, for the rest, one query."""
        with self._lock:
            known = self._known
            found = {chunk: known[chunk] for chunk in chunks if chunk in known}
        missing = [chunk for chunk in chunks if chunk not in found]
        if not missing:
            return found
        learnt: dict[int, int] = dict(
            conn.execute(
                "SELECT c.num, c.page FROM json_each(?) j JOIN search_chunks c ON c.num = j.value",
                (json.dumps(missing),),
            ).fetchall()
        )
        found.update(learnt)
        limit = MAX_CHUNK_PAGES
        with self._lock:
            if len(self._known) + len(learnt) > limit:
                self._known = {}
            if len(learnt) <= limit:
                self._known.update(learnt)
        return found


class Fts5Index:
    """The index of one SQLite store (the dialect's `SearchIndex`; see the module)."""

    def __init__(self) -> None:
        self.chunk_pages = ChunkPages()

    @property
    def clock(self) -> SqliteClock:
        return SQLITE_CLOCK

    def apply(self, conn: Connection, change: PageChange) -> None:
        """Follow one write (see the module), in its transaction, after its rows are written."""
        ws, page = change.workspace_id, change.page_id
        if change.created:
            _add_page(conn, ws, page, change.title[1] if change.title else "")
        elif change.title is not None:
            where = "FROM search_pages WHERE workspace_id = ? AND page_id = ?"
            before, after = change.title
            conn.execute(
                f"INSERT INTO search_titles (search_titles, rowid, title) SELECT 'delete', num, ? {where}",
                (index_tokens(before), ws, page),
            )
            conn.execute(
                f"INSERT INTO search_titles (rowid, title) SELECT num, ? {where}",
                (index_tokens(after), ws, page),
            )
        _follow_blocks(conn, ws, page, change.blocks)
        if change.recorded:  # its number on the page-change clock
            conn.execute(
                "INSERT INTO page_changes (workspace_id, page_id, revision) VALUES (?, ?, ?)",
                (ws, page, change.revision),
            )

    def search(
        self, conn: Connection, query: SearchQuery, segments: Sequence[Segment] | None
    ) -> SearchResult:
        """The listing, or the pages that match ranked by (matched as written, title matched, number
        of matching rows, page number), best first."""
        workspaces = readable_workspaces(conn, query)
        if segments is None:
            return listing(conn, query, workspaces, SQLITE_CLOCK)
        nums = dict(
            conn.execute(
                "SELECT workspace_id, num FROM search_workspaces WHERE workspace_id IN"
                " (SELECT value FROM json_each(?))",
                (json.dumps(workspaces),),
            ).fetchall()
        )
        return _matches(conn, query, segments, {ws: nums.get(ws) for ws in workspaces}, self.chunk_pages)


def build(conn: Connection, publish: Callable[[PageChange], None]) -> str:
    """Index every page and block of the store into an empty index, through the page-change path
    (`store.search.rebuild`: each page in the order pages were created), then merge each FTS5 table
    into one segment. What the migration that adds the index runs (and a bulk load that wrote rows
    alone)."""
    if conn.execute("SELECT 1 FROM search_pages LIMIT 1").fetchone() is not None:
        raise RuntimeError("search index: build() needs an empty index")
    pages, blocks = rebuild(conn, publish, order="rowid")
    conn.execute("INSERT INTO search_index (search_index) VALUES ('optimize')")
    conn.execute("INSERT INTO search_titles (search_titles) VALUES ('optimize')")
    return f"search index: {pages} titles, {blocks} blocks"


def _add_page(conn: Connection, ws: str, page: str, title: str) -> None:
    """A new page: its workspace's number (a new one for a new workspace), its own, its title's tokens."""
    conn.execute("INSERT OR IGNORE INTO search_workspaces (workspace_id) VALUES (?)", (ws,))
    ws_num, next_page = conn.execute(
        "SELECT num, next_page FROM search_workspaces WHERE workspace_id = ?", (ws,)
    ).fetchone()
    if ws_num > MAX_WORKSPACES:
        raise RuntimeError("search index: too many workspaces")
    num = (ws_num << WORKSPACE_SHIFT) | next_page
    conn.execute("INSERT INTO search_pages (num, workspace_id, page_id) VALUES (?, ?, ?)", (num, ws, page))
    conn.execute("UPDATE search_workspaces SET next_page = ? WHERE num = ?", (next_page + 1, ws_num))
    conn.execute("INSERT INTO search_titles (rowid, title) VALUES (?, ?)", (num, index_tokens(title)))


def _follow_blocks(conn: Connection, ws: str, page: str, changes: Iterable[BlockChange]) -> None:
    """The block rows of one write: a deleted or edited row's old tokens out (by its `seq`), an
    edited row's new ones in, a new row keyed and indexed."""
    gone: list[tuple[str, int]] = []
    edited: list[tuple[str, int]] = []
    deleted: list[tuple[int]] = []
    added: list[BlockRow] = []
    for change in changes:
        before, after = change.before, change.after
        if before is None:
            if after is not None:
                added.append(after)
        elif after is None:
            gone.append((index_tokens(before.text), before.seq))
            deleted.append((before.seq,))
        elif before.text != after.text:
            gone.append((index_tokens(before.text), before.seq))
            edited.append((index_tokens(after.text), before.seq))
    if gone:
        conn.executemany(
            "INSERT INTO search_index (search_index, rowid, body)"
            " SELECT 'delete', key, ? FROM search_blocks WHERE seq = ?",
            gone,
        )
    if edited:
        conn.executemany(
            "INSERT INTO search_index (rowid, body) SELECT key, ? FROM search_blocks WHERE seq = ?", edited
        )
    if deleted:
        conn.executemany("DELETE FROM search_blocks WHERE seq = ?", deleted)
    if added:
        _add_blocks(conn, ws, page, added)


def _add_blocks(conn: Connection, ws: str, page: str, rows: list[BlockRow]) -> None:
    """Keys for new block rows, in the order they were written (`seq`): the next slots of the page's
    open chunk, then fresh chunks of its workspace."""
    seqs = {row.id: row.seq for row in rows if row.seq}
    unknown = [row.id for row in rows if not row.seq]  # rows just inserted: their seq is the database's
    for where, params in ids_in_chunks(unknown):
        seqs.update(
            conn.execute(
                f"SELECT id, seq FROM blocks WHERE workspace_id = ? AND page_id = ? AND {where}",
                (ws, page, *params),
            ).fetchall()
        )
    page_num, key, ws_num, chunk = conn.execute(
        "SELECT p.num, p.next_key, w.num, w.next_chunk FROM search_pages p"
        " JOIN search_workspaces w ON w.workspace_id = p.workspace_id"
        " WHERE p.workspace_id = ? AND p.page_id = ?",
        (ws, page),
    ).fetchone()
    owners: list[tuple[int, int]] = []
    keyed: list[tuple[int, int]] = []
    bodies: list[tuple[int, str]] = []
    for row in sorted(rows, key=lambda row: seqs[row.id]):
        if key & SLOTS == 0:  # no chunk open: the workspace's next one
            owned = (ws_num << (WORKSPACE_SHIFT - SLOT_BITS)) | chunk
            owners.append((owned, page_num))
            key = (owned << SLOT_BITS) | 1
            chunk += 1
        keyed.append((key, seqs[row.id]))
        bodies.append((key, index_tokens(row.text)))
        key += 1
    if owners:
        conn.executemany("INSERT INTO search_chunks (num, page) VALUES (?, ?)", owners)
        conn.execute("UPDATE search_workspaces SET next_chunk = ? WHERE num = ?", (chunk, ws_num))
    conn.executemany("INSERT INTO search_blocks (key, seq) VALUES (?, ?)", keyed)
    conn.executemany("INSERT INTO search_index (rowid, body) VALUES (?, ?)", bodies)
    conn.execute("UPDATE search_pages SET next_key = ? WHERE num = ?", (key, page_num))


def _hidden_pages(conn: Connection, actor_id: str, workspaces: dict[str, int | None]) -> set[int]:
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
    conn: Connection,
    query: SearchQuery,
    segments: Sequence[Segment],
    workspaces: dict[str, int | None],
    chunk_pages: ChunkPages,
) -> SearchResult:
    """Pages ranked by (matched as written, title matched, number of matching rows, page number),
    best first: a page matching only where a bare word was forgiven as a prefix ranks below every
    page where it matched whole (`kernel/search.strict`, a second pass over the index).

    The index answers the matching rowids of each readable workspace's range (one pass over all of
    them when the actor reads every indexed workspace: nothing to leave out) as one string
    (`group_concat`: SQLite walks the matches in C, Python never sees a row per match), parsed at
    once; they are counted per chunk in C (`Counter` over the rowids shifted right: no join, no
    sort), each matching chunk is turned into its page (`chunk_pages`, a cache of `search_chunks`: a
    chunk never changes page), the title matches added, and the best `limit + 1` kept. A returned
    hit's first and last matching blocks (its snippets) are found in the sorted rowids by bisection."""
    nums = sorted(num for num in workspaces.values() if num is not None)
    cursor = decode_cursor(query, (int, int, int, int))
    if not nums:
        return {"hits": []}
    when = moment(conn, cursor, list(workspaces), SQLITE_CLOCK)
    indexed = conn.execute("SELECT count(*) FROM search_workspaces").fetchone()[0]
    ranges: list[tuple[int, int] | None] = (
        [None]
        if len(nums) == indexed
        else [(n << WORKSPACE_SHIFT, ((n + 1) << WORKSPACE_SHIFT) - 1) for n in nums]
    )
    keys, titles = _rows(conn, match_expression(segments), ranges)
    counts = Counter(map(operator.rshift, keys, itertools.repeat(SLOT_BITS)))
    owners = chunk_pages.pages(conn, counts)
    written_as = strict(segments)
    exact: set[int] | None = None  # the pages matching the query as written (None: every page)
    if written_as is not None:  # a second pass over the index, for the whole words alone
        exact_keys, exact = _rows(conn, match_expression(written_as), ranges)
        exact.update(owners.get(chunk, -1) for chunk in {key >> SLOT_BITS for key in exact_keys})
    pages: dict[int, list[int]] = {}  # page -> [matching rows, first chunk, last chunk]
    for chunk, count in counts.items():
        page = owners.get(chunk)
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
    keyed = [
        (int(exact is None or page in exact), int(page in titles), entry[0], page)
        for page, entry in pages.items()
    ]
    if when.changed:
        # a page written since the first page is ranked as it was then (its key then, the one any
        # earlier page of results saw): its current key is left out, whether it matches now or not
        written = _page_nums(conn, when.changed)
        moved = set(written.values())
        keyed = [key for key in keyed if key[-1] not in moved]
        readable = [(ws_page, num) for ws_page, num in written.items() if num not in hidden]
        if len(readable) > MAX_CHANGED_PAGES:
            raise too_many_changes(MAX_CHANGED_PAGES)
        for (ws, page_id), num in readable:
            then = as_it_was(conn, ws, page_id, when.changed[(ws, page_id)], segments)
            if then is not None:
                keyed.append((*then, num))
    if hidden or cursor is not None:
        bound = tuple(cursor.after) if cursor is not None else (2, 0, 0, 0)
        keyed = [key for key in keyed if key[-1] not in hidden and key < bound]
    ranked = heapq.nlargest(query.limit + 1, keyed)
    more = len(ranked) > query.limit
    ranked = ranked[: query.limit]
    hits = []
    for *_tiers, page in ranked:
        hit = _page_hit(conn, page)
        entry = pages.get(page)
        snippets = _snippets(conn, segments, _ends(keys, entry)) if entry is not None else []
        if snippets:
            hit["snippets"] = snippets
        hits.append(hit)
    view: SearchResult = {"hits": hits}
    if more:
        view["nextCursor"] = encode_cursor(query, list(ranked[-1]), when.watermark)
    return view


def _rows(
    conn: Connection, expression: str, ranges: list[tuple[int, int] | None]
) -> tuple[list[int], set[int]]:
    """The block rows (ascending) and titles (page numbers) matching an FTS5 expression in these
    rowid ranges (None: the whole index)."""
    keys: list[int] = []
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
    return keys, titles


def _page_nums(conn: Connection, pages: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
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


def _page_hit(conn: Connection, page: int) -> SearchHit:
    workspace_id, page_id, title, revision, updated_at = conn.execute(
        "SELECT p.workspace_id, p.id, p.title, p.revision, p.updated_at FROM search_pages s"
        " JOIN pages p ON p.workspace_id = s.workspace_id AND p.id = s.page_id WHERE s.num = ?",
        (page,),
    ).fetchone()
    return hit(workspace_id, page_id, title, revision, updated_at)


def _snippets(conn: Connection, segments: Sequence[Segment], keys: set[int]) -> list[Snippet]:
    """The snippets of a hit's first and last matching blocks (the keys the ranking query found)."""
    if not keys:
        return []
    rows = conn.execute(
        "SELECT b.id, b.text FROM search_blocks s JOIN blocks b ON b.seq = s.seq"
        f" WHERE s.key IN ({', '.join('?' * len(keys))}) ORDER BY s.key",
        sorted(keys),
    ).fetchall()
    return snippets(rows, segments)
