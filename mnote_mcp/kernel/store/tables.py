"""The store's tables, written once for both databases: one DDL, a few words filled in per dialect.

A page is a `pages` row (title, options, its revision, its size) and one `blocks` row per block: a
one-block edit touches that row, not an encoded body. A block is found by id through `blocks_by_id`,
siblings in order through `blocks_in_order`; `seq` numbers the rows in the order they were written
(what both search indexes key on). Every write that changes a page adds one `page_history` row (same
revision) holding its change set, from which any later revision can be rebuilt or undone. The audit
log is append-only; each dialect enforces that in its own words (`APPEND_ONLY` in its schema module).

What the dialects spell differently (`Words`): text that must compare bytewise (ids, order keys:
`COLLATE "C"` on PostgreSQL, SQLite's default), the row sequence (SQLite's rowid, PostgreSQL's
identity column), a 64-bit integer, and SQLite's `WITHOUT ROWID` for tables read by their key.
The tables of each dialect's search index and later migrations' columns are the dialect's own.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Words:
    """How one dialect spells the few things the tables need."""

    key: str  # text compared bytewise: ids, order keys
    seq: str  # a row sequence number, given by the database, never reused, as the primary key
    big: str  # a 64-bit integer
    norowid: str  # after a table read only by its primary key


TABLES = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    applied_at TEXT NOT NULL,
    detail     TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS workspaces (
    id   {key} PRIMARY KEY,
    name TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS members (
    workspace_id {key} NOT NULL REFERENCES workspaces(id),
    actor_id     {key} NOT NULL,
    role         TEXT NOT NULL,
    PRIMARY KEY (workspace_id, actor_id)
){norowid};
CREATE TABLE IF NOT EXISTS pages (
    workspace_id {key} NOT NULL REFERENCES workspaces(id),
    id           {key} NOT NULL,
    title        TEXT NOT NULL,
    options      TEXT NOT NULL,
    revision     INTEGER NOT NULL,
    restricted   INTEGER NOT NULL DEFAULT 0,
    updated_at   TEXT NOT NULL,
    block_count  INTEGER NOT NULL DEFAULT 0,
    byte_size    {big} NOT NULL DEFAULT 0,
    history_from INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (workspace_id, id)
);
CREATE TABLE IF NOT EXISTS blocks (
    seq          {seq},
    workspace_id {key} NOT NULL,
    page_id      {key} NOT NULL,
    parent_id    {key} NOT NULL,
    position     {key} NOT NULL,
    id           {key} NOT NULL,
    type         TEXT NOT NULL,
    text         TEXT NOT NULL,
    props        TEXT,
    revision     INTEGER NOT NULL,
    FOREIGN KEY (workspace_id, page_id) REFERENCES pages(workspace_id, id)
);
CREATE UNIQUE INDEX IF NOT EXISTS blocks_in_order ON blocks (workspace_id, page_id, parent_id, position);
CREATE UNIQUE INDEX IF NOT EXISTS blocks_by_id ON blocks (workspace_id, page_id, id);
CREATE TABLE IF NOT EXISTS page_history (
    workspace_id {key} NOT NULL,
    page_id      {key} NOT NULL,
    revision     INTEGER NOT NULL,
    command_id   {key} NOT NULL,
    command_name TEXT NOT NULL,
    actor_id     {key} NOT NULL,
    session_id   {key} NOT NULL,
    run_id       {key} NOT NULL,
    tool_call_id {key} NOT NULL,
    trace_id     {key} NOT NULL,
    created_at   TEXT NOT NULL,
    summary      TEXT NOT NULL,
    changes      TEXT NOT NULL,
    PRIMARY KEY (workspace_id, page_id, revision)
){norowid};
CREATE INDEX IF NOT EXISTS page_history_by_run ON page_history (workspace_id, page_id, run_id, revision);
CREATE TABLE IF NOT EXISTS page_access (
    workspace_id {key} NOT NULL,
    page_id      {key} NOT NULL,
    actor_id     {key} NOT NULL,
    role         TEXT NOT NULL,
    PRIMARY KEY (workspace_id, page_id, actor_id),
    FOREIGN KEY (workspace_id, page_id) REFERENCES pages(workspace_id, id)
){norowid};
CREATE TABLE IF NOT EXISTS option_registry (
    name            {key} PRIMARY KEY,
    runtime_support TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS artifacts (
    id              {key} PRIMARY KEY,
    workspace_id    {key} NOT NULL,
    page_id         {key} NOT NULL,
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
    from_id      {key} NOT NULL REFERENCES artifacts(id),
    to_page_id   {key} NOT NULL,
    kind         {key} NOT NULL,
    id           TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (from_id, to_page_id, kind)
){norowid};
CREATE TABLE IF NOT EXISTS idempotency (
    workspace_id {key} NOT NULL,
    actor_id     {key} NOT NULL,
    command_name {key} NOT NULL,
    idem_key     {key} NOT NULL,
    fingerprint  TEXT NOT NULL,
    command_id   TEXT NOT NULL,
    outcome      TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (workspace_id, actor_id, idem_key, command_name)
){norowid};
CREATE TABLE IF NOT EXISTS audit (
    seq             {seq},  -- never reused: the log is append-only
    command_id      {key} NOT NULL UNIQUE,
    command_name    TEXT NOT NULL,
    workspace_id    {key} NOT NULL,
    document_id     {key} NOT NULL,
    actor_id        {key} NOT NULL,
    session_id      TEXT NOT NULL,
    run_id          TEXT NOT NULL,
    tool_call_id    TEXT NOT NULL,
    trace_id        {key} NOT NULL,
    idempotency_key TEXT NOT NULL,
    revision_before INTEGER NOT NULL,
    revision_after  INTEGER NOT NULL,
    effect          TEXT NOT NULL,
    outcome         TEXT NOT NULL,
    detail          TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    replay_of       {key}
);
CREATE INDEX IF NOT EXISTS audit_by_trace ON audit (trace_id);
CREATE INDEX IF NOT EXISTS audit_replays ON audit (replay_of) WHERE replay_of IS NOT NULL;
"""

# What a new store's `option_registry` holds: how far the runtime supports each page option.
DEFAULT_OPTION_REGISTRY: dict[str, str] = {
    "wideLayout": "wired",
    "smallText": "wired",
    "showToc": "wired",
    "protectEditing": "planned",
}


def tables(words: Words) -> str:
    """The tables in one dialect's words (a script of `;`-ended statements)."""
    return TABLES.format(key=words.key, seq=words.seq, big=words.big, norowid=words.norowid)
