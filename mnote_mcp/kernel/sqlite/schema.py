"""The store's tables (schema version 4; the search index's tables are in `search.py`). The audit log is append-only, enforced by the database itself.

A page is a `pages` row (title, options, its revision, its size) and one `blocks` row per block: a
one-block edit touches that row, not an encoded body. A block is found by id through `blocks_by_id`,
siblings in order through `blocks_in_order`; the integer rowid `seq` is what an FTS5 index keys on (the
search index's triggers). Clustering the rows in document order (`WITHOUT ROWID`) would halve a
whole-page read but leave no rowid for that index: the search branch builds on `seq`. Every write that changes a page adds one
`page_history` row (same revision) holding its change set, from which any later revision can be
rebuilt or undone. The SQL is kept portable (the PostgreSQL port follows it): `position` keys compare
bytewise (`COLLATE "C"` there), `parent_id` is `''` at the top level so the sibling order is unique.
"""

from __future__ import annotations

SCHEMA_VERSION = 4

DDL = (
    """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    applied_at TEXT NOT NULL,
    detail     TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS workspaces (
    id   TEXT PRIMARY KEY,
    name TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS members (
    workspace_id TEXT NOT NULL REFERENCES workspaces(id),
    actor_id     TEXT NOT NULL,
    role         TEXT NOT NULL,
    PRIMARY KEY (workspace_id, actor_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pages (
    workspace_id TEXT NOT NULL REFERENCES workspaces(id),
    id           TEXT NOT NULL,
    title        TEXT NOT NULL,
    options      TEXT NOT NULL,
    revision     INTEGER NOT NULL,
    restricted   INTEGER NOT NULL DEFAULT 0,
    updated_at   TEXT NOT NULL,
    block_count  INTEGER NOT NULL DEFAULT 0,
    byte_size    INTEGER NOT NULL DEFAULT 0,
    history_from INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (workspace_id, id)
);
"""
    + """
CREATE TABLE IF NOT EXISTS blocks (
    seq          INTEGER PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    page_id      TEXT NOT NULL,
    parent_id    TEXT NOT NULL,
    position     TEXT NOT NULL,
    id           TEXT NOT NULL,
    type         TEXT NOT NULL,
    text         TEXT NOT NULL,
    props        TEXT,
    revision     INTEGER NOT NULL,
    FOREIGN KEY (workspace_id, page_id) REFERENCES pages(workspace_id, id)
);
CREATE UNIQUE INDEX IF NOT EXISTS blocks_in_order ON blocks (workspace_id, page_id, parent_id, position);
CREATE UNIQUE INDEX IF NOT EXISTS blocks_by_id ON blocks (workspace_id, page_id, id);
CREATE TABLE IF NOT EXISTS page_history (
    workspace_id TEXT NOT NULL,
    page_id      TEXT NOT NULL,
    revision     INTEGER NOT NULL,
    command_id   TEXT NOT NULL,
    command_name TEXT NOT NULL,
    actor_id     TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    run_id       TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    trace_id     TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    summary      TEXT NOT NULL,
    changes      TEXT NOT NULL,
    PRIMARY KEY (workspace_id, page_id, revision)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS page_history_by_run ON page_history (workspace_id, page_id, run_id, revision);
"""
    + """
CREATE TABLE IF NOT EXISTS page_access (
    workspace_id TEXT NOT NULL,
    page_id      TEXT NOT NULL,
    actor_id     TEXT NOT NULL,
    role         TEXT NOT NULL,
    PRIMARY KEY (workspace_id, page_id, actor_id),
    FOREIGN KEY (workspace_id, page_id) REFERENCES pages(workspace_id, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS option_registry (
    name            TEXT PRIMARY KEY,
    runtime_support TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS artifacts (
    id              TEXT PRIMARY KEY,
    workspace_id    TEXT NOT NULL,
    page_id         TEXT NOT NULL,
    kind            TEXT NOT NULL CHECK (kind IN ('summary', 'ai_note')),
    content         TEXT NOT NULL,
    version         INTEGER NOT NULL,
    source_revision INTEGER NOT NULL,
    actor_id        TEXT NOT NULL,
    session_id      TEXT NOT NULL,
    run_id          TEXT NOT NULL,
    tool_call_id    TEXT NOT NULL,
    trace_id        TEXT NOT NULL,
    command_id      TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS artifacts_one_summary_per_page
    ON artifacts (workspace_id, page_id) WHERE kind = 'summary';
CREATE TABLE IF NOT EXISTS edges (
    from_id      TEXT NOT NULL REFERENCES artifacts(id),
    to_page_id   TEXT NOT NULL,
    kind         TEXT NOT NULL,
    id           TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (from_id, to_page_id, kind)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS idempotency (
    workspace_id TEXT NOT NULL,
    actor_id     TEXT NOT NULL,
    command_name TEXT NOT NULL,
    idem_key     TEXT NOT NULL,
    fingerprint  TEXT NOT NULL,
    command_id   TEXT NOT NULL,
    outcome      TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (workspace_id, actor_id, idem_key, command_name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS audit (
    seq             INTEGER PRIMARY KEY,  -- never reused: the log is append-only
    command_id      TEXT NOT NULL UNIQUE,
    command_name    TEXT NOT NULL,
    workspace_id    TEXT NOT NULL,
    document_id     TEXT NOT NULL,
    actor_id        TEXT NOT NULL,
    session_id      TEXT NOT NULL,
    run_id          TEXT NOT NULL,
    tool_call_id    TEXT NOT NULL,
    trace_id        TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    revision_before INTEGER NOT NULL,
    revision_after  INTEGER NOT NULL,
    effect          TEXT NOT NULL,
    outcome         TEXT NOT NULL,
    detail          TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    replay_of       TEXT
);
CREATE INDEX IF NOT EXISTS audit_by_trace ON audit (trace_id);
CREATE INDEX IF NOT EXISTS audit_replays ON audit (replay_of) WHERE replay_of IS NOT NULL;
CREATE TRIGGER IF NOT EXISTS audit_is_append_only_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_is_append_only_delete BEFORE DELETE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
"""
)

DEFAULT_OPTION_REGISTRY: dict[str, str] = {
    "wideLayout": "wired",
    "smallText": "wired",
    "showToc": "wired",
    "protectEditing": "planned",
}
