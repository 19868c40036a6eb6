"""Whole-page block trees remembered by page and revision: a repeated read skips the ordered tree query
and the assembly of its rows.

What a whole-body read assembles depends on the page's rows alone, never on who reads: the reader's
permissions are checked on every call before the cache is asked (`Store.get_page`), and what is
kept is the tree and its summary, the same for every actor allowed to see them. An entry is stamped
with the page row it was built from (revision, block count, size), and only a read whose own page row,
read in the same transaction, carries the same stamp is answered from it: every write of a block makes
a new revision in that transaction (commands, revert, a fixture's replace), so a changed page is never
answered from the cache, whichever process or replica wrote it. One entry per page: a new revision
replaces the old one.

An entry is the tree's JSON (orjson), decoded afresh for every read: a reader gets its own objects, so
nothing a caller does to its answer can reach another caller. A tree that does not come back equal
from its JSON is not kept. The cache is bounded in bytes (`DEFAULT_PAGE_CACHE_BYTES`, least recently
used first out); a page larger than a quarter of it is not kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Final

import orjson

from mnote_mcp.kernel.blocks import Block, body_summary
from mnote_mcp.kernel.store import rows
from mnote_mcp.kernel.store.access import PageHead
from mnote_mcp.kernel.store.sql import Connection

DEFAULT_PAGE_CACHE_BYTES: Final = 16 * 1024 * 1024

PageStamp = tuple[int, int, int]  # revision, block count, byte size: what the page row says
_Key = tuple[str, str]  # workspace id, page id


class PageCache:
    """Thread-safe: reads run on the event loop and on worker threads."""

    def __init__(self, max_bytes: int = DEFAULT_PAGE_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.used = 0
        self._entries: OrderedDict[_Key, tuple[PageStamp, bytes, str]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, workspace_id: str, page_id: str, stamp: PageStamp) -> tuple[list[Block], str] | None:
        """A fresh copy of the page's tree and its summary, if the entry matches `stamp`."""
        key = (workspace_id, page_id)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != stamp:
                return None
            self._entries.move_to_end(key)
        roots: list[Block] = orjson.loads(entry[1])
        return roots, entry[2]

    def put(
        self, workspace_id: str, page_id: str, stamp: PageStamp, roots: list[Block], summary: str
    ) -> None:
        if self.max_bytes <= 0:
            return
        try:
            data = orjson.dumps(roots)
            size = len(data) + len(summary)
            if size > self.max_bytes // 4:
                return  # (checked first: a page near the size limit is never decoded twice)
            if orjson.loads(data) != roots:  # kept only what its JSON gives back exactly
                return
        except (TypeError, orjson.JSONDecodeError):
            return
        key = (workspace_id, page_id)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.used -= len(old[1]) + len(old[2])
            self._entries[key] = (stamp, data, summary)
            self.used += size
            while self.used > self.max_bytes and self._entries:
                _, (_, gone, gone_summary) = self._entries.popitem(last=False)
                self.used -= len(gone) + len(gone_summary)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.used = 0

    def __len__(self) -> int:
        return len(self._entries)


def stamp_of(page: PageHead) -> PageStamp:
    return page.revision, page.block_count, page.byte_size


def whole_body(
    cache: PageCache, conn: Connection, page: PageHead, *, snapshot: bool
) -> tuple[list[Block], str] | None:
    """The page's tree and summary: from `cache` when it holds this very revision of the page (the
    caller has passed the checkpoints), else read on `conn` and kept. Outside a snapshot (`snapshot`
    False: statements of their own), a tree read is kept only if the page's stamp read after it is the
    same (every write of a block makes a new revision, and revisions only grow, so no write came
    between); else None: the caller reads again in one snapshot."""
    stamp = stamp_of(page)
    cached = cache.get(page.workspace_id, page.id, stamp)
    if cached is not None:
        return cached
    roots = rows.read_tree(conn, page.workspace_id, page.id)
    if not snapshot:
        again = conn.execute(
            "SELECT revision, block_count, byte_size FROM pages WHERE workspace_id = ? AND id = ?",
            (page.workspace_id, page.id),
        ).fetchone()
        if again is None or tuple(again) != stamp:
            return None
    summary = body_summary(roots)
    cache.put(page.workspace_id, page.id, stamp, roots, summary)
    return roots, summary
