"""Permission checkpoints: who may read or write which page, decided from the members and page access rows.

Login, workspace member, page read, then the grant the command needs, in that order. A non-member
learns nothing about the workspace's pages: a missing page and a forbidden one give the same refusal,
decided before the page is looked at. No refusal carries a title, body or artifact text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.policy import DENIAL_REASON, Scope, effective_role, grants_of
from mnote_mcp.kernel.port import PageKey, PageRef, PagesQuery
from mnote_mcp.kernel.store.sql import Connection

# A page's options: each a boolean (the fixture schema and `page.options.set` hold them to it).
PageOptions = dict[str, bool]


@dataclass(frozen=True, slots=True)
class PageHead:
    """A page's own row, as a command or a read sees it after the checkpoints: no blocks."""

    workspace_id: str
    id: str
    title: str
    options: PageOptions
    revision: int
    block_count: int
    byte_size: int
    history_from: int
    updated_at: str = ""  # the time of the last write that changed it


def authorize(conn: Connection, workspace_id: str, document_id: str, actor_id: str, need: Scope) -> PageHead:
    if not actor_id:
        raise MnoteError(ErrorCode.UNAUTHENTICATED, Reason.NO_ACTOR)
    # One query for both checkpoints; which of them fails is read from the row, in order.
    row = conn.execute(
        "SELECT m.role, p.id, p.title, p.options, p.revision, p.restricted, a.role,"
        " p.block_count, p.byte_size, p.history_from, p.updated_at"
        " FROM members m"
        " LEFT JOIN pages p ON p.workspace_id = m.workspace_id AND p.id = ?"
        " LEFT JOIN page_access a ON a.workspace_id = p.workspace_id AND a.page_id = p.id"
        " AND a.actor_id = m.actor_id"
        " WHERE m.workspace_id = ? AND m.actor_id = ?",
        (document_id, workspace_id, actor_id),
    ).fetchone()
    if row is None:
        raise MnoteError(ErrorCode.PERMISSION_DENIED, Reason.NOT_MEMBER, {"workspaceId": workspace_id})
    role, found, title, options, revision, restricted, page_role, blocks, size, history_from, updated_at = row
    if found is None:
        raise MnoteError(
            ErrorCode.NOT_FOUND, Reason.PAGE, {"workspaceId": workspace_id, "documentId": document_id}
        )
    grants = grants_of(effective_role(role, page_role, bool(restricted)))
    for grant in (Scope.PAGE_READ, need):
        if grant not in grants:
            raise MnoteError(ErrorCode.PERMISSION_DENIED, DENIAL_REASON[grant], {"documentId": document_id})
    return PageHead(
        workspace_id,
        document_id,
        title,
        json.loads(options),
        revision,
        blocks,
        size,
        history_from,
        updated_at,
    )


def readable_pages(conn: Connection, query: PagesQuery, fold: str) -> list[PageRef]:
    """The pages `query.actor_id` may read, by workspace and id, narrowed in SQL (`PagesQuery`): by the
    start of the title or id, both folded with the dialect's `fold` function, by a whole title (folded)
    or id, by workspace, and at most
    `limit` rows read. Whether the actor may read a page is decided here (`effective_role`); the SQL
    keeps only the rows that could pass (a member's page, unrestricted or listing the actor), so the
    limit counts readable pages."""
    where = ["m.actor_id = :actor"]
    params: dict[str, object] = {"actor": query.actor_id}
    if query.prefix:
        where.append(f"({_starts_with_prefix('p.title', fold)} OR {_starts_with_prefix('p.id', fold)})")
        params["prefix"] = query.prefix
    if query.named:
        where.append(f"({fold}(p.title) = {fold}(:named) OR p.id = :named)")
        params["named"] = query.named
    if query.workspace_id is not None:
        where.append("p.workspace_id = :workspace")
        params["workspace"] = query.workspace_id
    limit = ""
    if query.limit is not None:
        where.append("(p.restricted = 0 OR a.role IS NOT NULL)")
        limit = " LIMIT :limit"
        params["limit"] = query.limit
    rows = conn.execute(
        "SELECT p.workspace_id, p.id, p.title, p.revision, p.restricted, m.role, a.role"
        " FROM members m JOIN pages p ON p.workspace_id = m.workspace_id"
        " LEFT JOIN page_access a ON a.workspace_id = p.workspace_id AND a.page_id = p.id"
        " AND a.actor_id = m.actor_id"
        f" WHERE {' AND '.join(where)} ORDER BY p.workspace_id, p.id{limit}",
        params,
    ).fetchall()
    return [
        PageRef(workspace_id=ws, document_id=doc, title=title, revision=rev)
        for ws, doc, title, rev, restricted, role, page_role in rows
        if Scope.PAGE_READ in grants_of(effective_role(role, page_role, bool(restricted)))
    ]


def _starts_with_prefix(column: str, fold: str) -> str:
    return f"substr({fold}({column}), 1, length({fold}(:prefix))) = {fold}(:prefix)"


def readable_revisions(conn: Connection, actor_id: str, pages: Sequence[PageKey]) -> dict[PageKey, int]:
    revisions: dict[PageKey, int] = {}
    for key in dict.fromkeys(pages):
        row = conn.execute(
            "SELECT p.revision, p.restricted, m.role, a.role"
            " FROM members m JOIN pages p ON p.workspace_id = m.workspace_id"
            " LEFT JOIN page_access a ON a.workspace_id = p.workspace_id AND a.page_id = p.id"
            " AND a.actor_id = m.actor_id"
            " WHERE m.actor_id = ? AND p.workspace_id = ? AND p.id = ?",
            (actor_id, key.workspace_id, key.document_id),
        ).fetchone()
        if row is None:
            continue
        revision, restricted, role, page_role = row
        if Scope.PAGE_READ in grants_of(effective_role(role, page_role, bool(restricted))):
            revisions[key] = revision
    return revisions


def option_registry(conn: Connection) -> dict[str, str]:
    return dict(conn.execute("SELECT name, runtime_support FROM option_registry").fetchall())
