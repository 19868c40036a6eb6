"""The store's tables. The audit log is append-only, enforced by the database itself.

Every write commits a page per B-tree it touches, so tables are laid out to touch few: edges are keyed
by what identifies them (no rowid table plus index), and the audit sequence is the rowid (an
append-only table never reuses one, so AUTOINCREMENT's extra bookkeeping table buys nothing).
"""

from __future__ import annotations

SCHEMA_VERSION = 1

DDL = """
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
    blocks       TEXT NOT NULL,
    revision     INTEGER NOT NULL,
    restricted   INTEGER NOT NULL DEFAULT 0,
    updated_at   TEXT NOT NULL,
    PRIMARY KEY (workspace_id, id)
);
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
    PRIMARY KEY (workspace_id, actor_id, command_name, idem_key)
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
    created_at      TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_by_trace ON audit (trace_id);
CREATE TRIGGER IF NOT EXISTS audit_is_append_only_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_is_append_only_delete BEFORE DELETE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
"""

DEFAULT_OPTION_REGISTRY: dict[str, str] = {
    "wideLayout": "wired",
    "smallText": "wired",
    "showToc": "wired",
    "protectEditing": "planned",
}
