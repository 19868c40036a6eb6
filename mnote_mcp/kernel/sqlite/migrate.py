"""Creating a store and upgrading an old one in place, on open.

`open_schema` brings any store to `SCHEMA_VERSION`. A new store gets the whole DDL; an older one runs
each step of `MIGRATIONS` in turn. Everything happens in one `BEGIN IMMEDIATE` transaction that also
bumps `PRAGMA user_version` and records the step in `schema_migrations`, so an upgrade is all or
nothing, and two processes opening an old store at once serialise on the write lock: the second one
reads the version again inside its own transaction, finds it current, and does nothing.

A step is a function of the connection. To add one (the search index, for instance): write it, add it
under the next version number, raise `SCHEMA_VERSION`. A step that builds an index from the rows
there are sends each page down the page-change path (`changes.publish`) into the index, as a new page
(`search.rebuild`); nothing listens while a store is being opened, and the store's write hooks are
not called. The search index's DDL is imported by the steps that create it: opening a current store
(`runtime cli`, a process per call) loads no search.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from typing import Any

from mnote_mcp.kernel.blocks import Block
from mnote_mcp.kernel.limits import block_bytes
from mnote_mcp.kernel.sqlite.connection import Database
from mnote_mcp.kernel.sqlite.schema import DDL, SCHEMA_VERSION
from mnote_mcp.kernel.store.changes import publish
from mnote_mcp.kernel.store.dialect import SchemaNotCurrentError, SchemaTooNewError
from mnote_mcp.kernel.store.encoding import dumps, now
from mnote_mcp.kernel.store.orderkeys import keys_between
from mnote_mcp.kernel.store.tables import DEFAULT_OPTION_REGISTRY

Step = Callable[[sqlite3.Connection], str]


def check_schema(db: Database) -> bool:
    """For a store opened read-only: its schema must be this release's (False: it was not created)."""
    with db.connection() as conn:
        version = _version(conn)
    if version == SCHEMA_VERSION:
        return False
    if version > SCHEMA_VERSION:
        raise SchemaNotCurrentError(
            f"schema version {version} is newer than this mnote-mcp's {SCHEMA_VERSION}"
        )
    if version == 0:
        raise SchemaNotCurrentError(
            "not an mnote store (no schema), and a store opened read-only is not created"
        )
    raise SchemaNotCurrentError(
        f"schema version {version} is older than this mnote-mcp's {SCHEMA_VERSION}, and a store opened"
        f" read-only is not upgraded: run `mnote-mcp migrate --db FILE` on a writable copy"
    )


def open_schema(db: Database) -> bool:
    """Create or upgrade the schema; True when this call created the store.

    An up-to-date store is only read (no write lock), so opening it never waits for another process.
    """
    with db.connection() as conn:
        if _version(conn) == SCHEMA_VERSION:
            return False
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            db.wait_for(conn, "PRAGMA journal_mode = WAL", time.monotonic() + db.busy_timeout)
    with db.transaction(write=True) as tx:
        version = _version(tx)
        if version > SCHEMA_VERSION:
            raise SchemaTooNewError(
                f"{db.path} has schema version {version}; this mnote-mcp knows {SCHEMA_VERSION}"
            )
        if version == SCHEMA_VERSION:
            return False  # another process created or upgraded it meanwhile
        if version == 0:
            _create(tx)
            return True
        for target in range(version + 1, SCHEMA_VERSION + 1):
            detail = MIGRATIONS[target](tx)
            tx.execute(
                "INSERT INTO schema_migrations (version, applied_at, detail) VALUES (?, ?, ?)",
                (target, now(), detail),
            )
        tx.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        return False


def _version(conn: sqlite3.Connection) -> int:
    version: int = conn.execute("PRAGMA user_version").fetchone()[0]
    return version


def _create(tx: sqlite3.Connection) -> None:
    from mnote_mcp.kernel.sqlite.search import SEARCH_DDL

    for statement in (*statements(DDL), *statements(SEARCH_DDL)):
        tx.execute(statement)
    tx.executemany(
        "INSERT OR IGNORE INTO option_registry (name, runtime_support) VALUES (?, ?)",
        DEFAULT_OPTION_REGISTRY.items(),
    )
    tx.execute(
        "INSERT INTO schema_migrations (version, applied_at, detail) VALUES (?, ?, ?)",
        (SCHEMA_VERSION, now(), "created"),
    )
    tx.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _v2_blocks_as_rows(tx: sqlite3.Connection) -> str:
    """Version 1 kept a page's body as one JSON value; version 2 keeps one row per block.

    Every block becomes a row with evenly spaced order keys, marked as last changed at the page's
    current revision (its real history is unknown, so a stale `baseRevision` still conflicts on it, as
    before). History starts at the current revision. The idempotency ledger is re-keyed so that one key
    is one operation per actor (rows that v1 allowed under one key for two commands are all kept), and
    the audit log gains the column that links a replay to its original.
    """
    tx.execute("ALTER TABLE pages ADD COLUMN block_count INTEGER NOT NULL DEFAULT 0")
    tx.execute("ALTER TABLE pages ADD COLUMN byte_size INTEGER NOT NULL DEFAULT 0")
    tx.execute("ALTER TABLE pages ADD COLUMN history_from INTEGER NOT NULL DEFAULT 1")
    tx.execute("ALTER TABLE audit ADD COLUMN replay_of TEXT")
    tx.execute("ALTER TABLE idempotency RENAME TO idempotency_v1")
    for statement in statements(DDL):  # the new tables and indexes; existing ones are left alone
        tx.execute(statement)
    columns = "workspace_id, actor_id, command_name, idem_key, fingerprint, command_id, outcome, created_at"
    tx.execute(f"INSERT INTO idempotency ({columns}) SELECT {columns} FROM idempotency_v1")
    tx.execute("DROP TABLE idempotency_v1")
    pages = tx.execute("SELECT workspace_id, id, blocks, revision FROM pages").fetchall()
    blocks = 0
    for workspace_id, page_id, body, revision in pages:
        rows = list(_rows(json.loads(body), ""))
        tx.executemany(
            "INSERT INTO blocks (workspace_id, page_id, id, parent_id, position, type, text, props, revision)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(workspace_id, page_id, *row[:6], revision) for row in rows],
        )
        tx.execute(
            "UPDATE pages SET block_count = ?, byte_size = ?, history_from = revision"
            " WHERE workspace_id = ? AND id = ?",
            (len(rows), sum(row[6] for row in rows), workspace_id, page_id),
        )
        blocks += len(rows)
    tx.execute("ALTER TABLE pages DROP COLUMN blocks")
    return f"blocks as rows: {len(pages)} pages, {blocks} blocks"


def _rows(blocks: list[Block], parent: str) -> Iterator[tuple[Any, ...]]:
    """(id, parent, position, type, text, props JSON or None, bytes) for a v1 body, in document order."""
    for block, position in zip(blocks, keys_between(None, None, len(blocks)), strict=True):
        props = block.get("props") or None
        yield (
            block["id"],
            parent,
            position,
            block["type"],
            block.get("text", ""),
            dumps(props) if props else None,
            block_bytes(block["id"], block["type"], block.get("text", ""), props),
        )
        yield from _rows(block.get("children") or [], block["id"])


def _v3_search_index(tx: sqlite3.Connection) -> str:
    """Version 3 adds the search index (`search.py`): its tables, built from the rows through the
    page-change path."""
    from mnote_mcp.kernel.sqlite.search import SEARCH_DDL, Fts5Index, build

    for statement in statements(SEARCH_DDL):
        tx.execute(statement)
    index = Fts5Index()
    return build(tx, lambda change: publish(tx, change, (index.apply,)))


def _v4_search_cursors(tx: sqlite3.Connection) -> str:
    """Version 4 numbers page writes (`page_changes`), the clock a search cursor pins its results to;
    writes before the upgrade need no number (no cursor predates it)."""
    from mnote_mcp.kernel.sqlite.search import SEARCH_DDL

    for statement in statements(SEARCH_DDL):  # the new table; the rest exists already
        tx.execute(statement)
    return "search cursors: page_changes"


def _v5_one_page_change_path(tx: sqlite3.Connection) -> str:
    """Version 5 keeps the search index and the page-change clock from the page-change path
    (`changes.publish`), as PostgreSQL does, instead of triggers: the triggers go. (A version of its
    own, so that an older mnote-mcp, which relies on the triggers, refuses the store rather than
    write to it unindexed.)"""
    from mnote_mcp.kernel.sqlite.search import OLD_TRIGGERS

    for trigger in OLD_TRIGGERS:
        tx.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    return "search index kept by the page-change path, not triggers"


MIGRATIONS: dict[int, Step] = {
    2: _v2_blocks_as_rows,
    3: _v3_search_index,
    4: _v4_search_cursors,
    5: _v5_one_page_change_path,
}


def statements(script: str) -> Iterator[str]:
    """Split a script into statements; `executescript` would commit the surrounding transaction."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer.strip()
            buffer = ""
