"""SQLite as the store's database: one file, any number of processes (the `Dialect` of `kernel/store`).

A write transaction is `BEGIN IMMEDIATE`: it holds the whole file, so a page lock and a seeding lock are
taken already and nothing ever needs a retry. Reads are snapshots (a read transaction is cheap on
SQLite, so a whole-page read is one). Calls run inline on the event loop first: the connection there
never waits for a lock (`connection.py`), and writes arriving together commit as one group. The search
index is FTS5 (`search.py`), kept by the page-change path and made on first use (a process that
neither writes nor searches, `runtime cli` answering a read, never loads it); a write is told to this
process's listeners after it commits (`changes.InProcessFeed`). Opening creates or upgrades the schema (`migrate.py`), or,
read-only, checks it.
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from mnote_mcp.kernel.sqlite.connection import FOLD, Database
from mnote_mcp.kernel.sqlite.migrate import check_schema, open_schema
from mnote_mcp.kernel.store.changes import InProcessFeed
from mnote_mcp.kernel.store.figures import StoreFigures
from mnote_mcp.kernel.store.sql import Connection

if TYPE_CHECKING:
    from mnote_mcp.kernel.sqlite.search import Fts5Index


class SqliteDialect:
    """The store file at `path`, its schema created or upgraded (with `uri`, opened read-only through
    that SQLite URI, `opening.read_only_uri`: nothing created or upgraded, another schema refused)."""

    name = "sqlite"
    inline = True
    group_commit = True
    snapshot_reads = True
    fold = FOLD  # Python's str.casefold, registered on each connection (`connection.py`)

    def __init__(self, database: Database) -> None:
        """`database` as `Database` was given it (its file, busy timeout, URI, pool): not opened yet,
        so its options are declared once, there."""
        if database.uri is None:
            database.path.parent.mkdir(parents=True, exist_ok=True)
        self.location = str(database.path)
        self.threads = database.pool.size
        self._index: Fts5Index | None = None
        self._making_index = threading.Lock()
        self.feed = InProcessFeed()
        self.database = database
        try:
            self.created = open_schema(database) if database.uri is None else check_schema(database)
        except BaseException:
            self.database.close()
            raise

    @property
    def index(self) -> Fts5Index:
        """The store's one full-text index, made by the first call that needs it (on any thread)."""
        if self._index is None:
            with self._making_index:
                if self._index is None:
                    from mnote_mcp.kernel.sqlite.search import Fts5Index

                    self._index = Fts5Index()
        return self._index

    def transaction(self, *, write: bool, inline: bool = False) -> AbstractContextManager[Connection]:
        return self.database.transaction(write=write, inline=inline)

    def statements(self, *, inline: bool = False) -> AbstractContextManager[Connection]:
        """A read transaction: as cheap as statements of their own, and one snapshot."""
        return self.database.transaction(write=False, inline=inline)

    def lock_page(self, conn: Connection, workspace_id: str, page_id: str) -> None:
        """Nothing to do: `BEGIN IMMEDIATE` keeps every other writer out already."""

    def serialize(self, conn: Connection, name: str) -> None:
        """Nothing to do: `BEGIN IMMEDIATE` keeps every other writer out already."""

    def retryable(self, exc: BaseException) -> bool:
        return False

    def dump(self) -> str:
        return self.database.dump()

    def figures(self) -> StoreFigures:
        return self.database.figures()

    def close(self) -> None:
        self.database.close()
