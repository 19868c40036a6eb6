"""The store's tables on SQLite (schema version 5): the portable tables in SQLite's words, the audit
log's append-only triggers, and the search index's own tables (`search.SEARCH_DDL`).

SQLite's words (`store/tables.py`): text compares bytewise already, the row sequence is the rowid
(`INTEGER PRIMARY KEY`, what FTS5 keys need), and the tables read only by their key are `WITHOUT
ROWID`. Clustering `blocks` in document order (`WITHOUT ROWID`) would halve a whole-page read but leave
no rowid for the search index to key on. The version is `PRAGMA user_version` (`migrate.py`).
"""

from __future__ import annotations

from mnote_mcp.kernel.store.tables import Words, tables

SCHEMA_VERSION = 5

WORDS = Words(key="TEXT", seq="INTEGER PRIMARY KEY", big="INTEGER", norowid=" WITHOUT ROWID")

APPEND_ONLY = """
CREATE TRIGGER IF NOT EXISTS audit_is_append_only_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_is_append_only_delete BEFORE DELETE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
"""

DDL = tables(WORDS) + APPEND_ONLY
