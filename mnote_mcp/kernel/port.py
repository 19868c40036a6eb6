"""The kernel port: the only way the tools reach business data.

mnote's Rust runtime is the real kernel; this module states what any adapter (embedded SQLite, HTTP
relay, mnote-cli relay) must offer, in plain data that crosses a process boundary unchanged
(`to_wire`/`from_wire` are the JSON the runtime protocol carries). Nothing here knows about MCP.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from mnote_mcp.kernel.scopes import Scope

DEFAULT_SEARCH_LIMIT = 10


class CommandName(StrEnum):
    PAGE_BODY_SAVE = "page.body.save"
    PAGE_HEAD_UPDATE_TITLE = "page.head.updateTitle"
    PAGE_LAYOUT_UPDATE_OPTIONS = "page.layout.updateOptions"
    ARTIFACT_SUMMARY_UPSERT = "artifact.summary.upsert"
    ARTIFACT_AI_NOTE_CREATE = "artifact.aiNote.create"
    PAGE_BLOCK_INSERT = "page.block.insert"
    PAGE_BLOCK_UPDATE = "page.block.update"
    PAGE_BLOCK_DELETE = "page.block.delete"
    PAGE_BLOCK_MOVE = "page.block.move"
    PAGE_REVERT = "page.revert"


@dataclass(frozen=True, slots=True)
class Correlation:
    """The four ids that join a Hermes run to the kernel command it caused."""

    session_id: str
    run_id: str
    tool_call_id: str
    trace_id: str

    def to_wire(self) -> dict[str, str]:
        return {
            "sessionId": self.session_id,
            "runId": self.run_id,
            "toolCallId": self.tool_call_id,
            "traceId": self.trace_id,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Correlation:
        return cls(
            session_id=str(data["sessionId"]),
            run_id=str(data["runId"]),
            tool_call_id=str(data["toolCallId"]),
            trace_id=str(data["traceId"]),
        )


@dataclass(frozen=True, slots=True)
class PageQuery:
    """What `get_page` should return.

    `format` is "blocks" (the block tree) or "markdown" (`markdown`, one rendering with block ids).
    `block_ids` narrows the body to those blocks (each with its children); `max_blocks` and `cursor`
    read a long body in pieces: the view carries `nextCursor` while blocks remain, and a cursor is
    only good for the page revision it was issued at.
    """

    workspace_id: str
    document_id: str
    actor_id: str
    correlation: Correlation
    include_body: bool = True
    include_options: bool = True
    include_blocks: bool = True
    format: str = "blocks"
    block_ids: tuple[str, ...] | None = None
    max_blocks: int | None = None
    cursor: str | None = None

    def to_wire(self) -> dict[str, Any]:
        return {
            "workspaceId": self.workspace_id,
            "documentId": self.document_id,
            "actorId": self.actor_id,
            "correlation": self.correlation.to_wire(),
            "includeBody": self.include_body,
            "includeOptions": self.include_options,
            "includeBlocks": self.include_blocks,
            "format": self.format,
            "blockIds": list(self.block_ids) if self.block_ids is not None else None,
            "maxBlocks": self.max_blocks,
            "cursor": self.cursor,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> PageQuery:
        block_ids = data.get("blockIds")
        max_blocks = data.get("maxBlocks")
        cursor = data.get("cursor")
        return cls(
            workspace_id=str(data["workspaceId"]),
            document_id=str(data["documentId"]),
            actor_id=str(data["actorId"]),
            correlation=Correlation.from_wire(data["correlation"]),
            include_body=bool(data.get("includeBody", True)),
            include_options=bool(data.get("includeOptions", True)),
            include_blocks=bool(data.get("includeBlocks", True)),
            format=str(data.get("format") or "blocks"),
            block_ids=tuple(str(item) for item in block_ids) if isinstance(block_ids, list) else None,
            max_blocks=int(max_blocks) if max_blocks is not None else None,
            cursor=str(cursor) if cursor is not None else None,
        )


@dataclass(frozen=True, slots=True)
class HistoryQuery:
    """What `page_history` should list: a page's recorded writes, newest first.

    `run_id`, `session_id` and `by_actor_id` keep only the writes with those correlation ids (on the
    wire: `filter: {runId, sessionId, actorId}`, apart from `actorId`, which names who asks);
    `since_revision` only those after it; `limit` and `cursor` page through the rest.
    """

    workspace_id: str
    document_id: str
    actor_id: str
    correlation: Correlation
    run_id: str | None = None
    session_id: str | None = None
    by_actor_id: str | None = None
    since_revision: int | None = None
    limit: int = 20
    cursor: str | None = None

    def to_wire(self) -> dict[str, Any]:
        return {
            "workspaceId": self.workspace_id,
            "documentId": self.document_id,
            "actorId": self.actor_id,
            "correlation": self.correlation.to_wire(),
            "filter": {"runId": self.run_id, "sessionId": self.session_id, "actorId": self.by_actor_id},
            "sinceRevision": self.since_revision,
            "limit": self.limit,
            "cursor": self.cursor,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> HistoryQuery:
        where = data.get("filter") or {}
        since, limit, cursor = data.get("sinceRevision"), data.get("limit"), data.get("cursor")

        def text(name: str) -> str | None:
            value = where.get(name)
            return str(value) if value is not None else None

        return cls(
            workspace_id=str(data["workspaceId"]),
            document_id=str(data["documentId"]),
            actor_id=str(data["actorId"]),
            correlation=Correlation.from_wire(data["correlation"]),
            run_id=text("runId"),
            session_id=text("sessionId"),
            by_actor_id=text("actorId"),
            since_revision=int(since) if since is not None else None,
            limit=int(limit) if limit is not None else 20,
            cursor=str(cursor) if cursor is not None else None,
        )


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """What `Kernel.search_pages` is asked: the pages `actor_id` may read that match `query`, best
    first (no query: every readable page, most recently changed first).

    `workspace_id` narrows the search to one workspace (the actor must be a member); `workspaces`, when
    set, is the set of workspaces the caller's credentials allow (a bearer token limited to some), so
    nothing outside it is searched. `limit` and `cursor` page through the hits.
    """

    actor_id: str
    correlation: Correlation
    query: str | None = None
    workspace_id: str | None = None
    workspaces: tuple[str, ...] | None = None
    limit: int = DEFAULT_SEARCH_LIMIT
    cursor: str | None = None

    def to_wire(self) -> dict[str, Any]:
        return {
            "actorId": self.actor_id,
            "correlation": self.correlation.to_wire(),
            "query": self.query,
            "workspaceId": self.workspace_id,
            "workspaces": list(self.workspaces) if self.workspaces is not None else None,
            "limit": self.limit,
            "cursor": self.cursor,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> SearchQuery:
        query, workspace_id, workspaces = data.get("query"), data.get("workspaceId"), data.get("workspaces")
        limit, cursor = data.get("limit"), data.get("cursor")
        return cls(
            actor_id=str(data["actorId"]),
            correlation=Correlation.from_wire(data["correlation"]),
            query=str(query) if query is not None else None,
            workspace_id=str(workspace_id) if workspace_id is not None else None,
            workspaces=tuple(str(item) for item in workspaces) if isinstance(workspaces, list) else None,
            limit=int(limit) if limit is not None else DEFAULT_SEARCH_LIMIT,
            cursor=str(cursor) if cursor is not None else None,
        )


@dataclass(frozen=True, slots=True)
class Command:
    """One kernel command: what a write tool asks the runtime to do (or, with dry_run, to plan)."""

    name: str
    workspace_id: str
    document_id: str
    actor_id: str
    correlation: Correlation
    idempotency_key: str
    dry_run: bool
    payload: Mapping[str, Any]
    base_revision: int | None = None

    def to_wire(self) -> dict[str, Any]:
        return {
            "command": self.name,
            "workspaceId": self.workspace_id,
            "documentId": self.document_id,
            "actorId": self.actor_id,
            "correlation": self.correlation.to_wire(),
            "idempotencyKey": self.idempotency_key,
            "dryRun": self.dry_run,
            "baseRevision": self.base_revision,
            "payload": dict(self.payload),
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Command:
        base = data.get("baseRevision")
        payload = data.get("payload")
        return cls(
            name=str(data["command"]),
            workspace_id=str(data["workspaceId"]),
            document_id=str(data["documentId"]),
            actor_id=str(data["actorId"]),
            correlation=Correlation.from_wire(data["correlation"]),
            idempotency_key=str(data["idempotencyKey"]),
            dry_run=bool(data["dryRun"]),
            base_revision=int(base) if base is not None else None,
            payload=payload if isinstance(payload, dict) else {},
        )


@dataclass(frozen=True, slots=True)
class CommandOutcome:
    """What the kernel did (or would do, on a dry run).

    `diff` is the block-level plan, the same list whether or not it was a dry run. `warnings` are
    `{code, reason, details}` items for the caller (a non-wired option on a dry run, for instance).
    `data` carries command-specific facts such as the artifact id.
    """

    command_name: str
    dry_run: bool
    command_id: str | None
    revision: int
    changed: bool
    diff: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    replayed: bool = False
    data: dict[str, Any] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        return {
            "commandName": self.command_name,
            "dryRun": self.dry_run,
            "commandId": self.command_id,
            "revision": self.revision,
            "changed": self.changed,
            "diff": self.diff,
            "warnings": self.warnings,
            "replayed": self.replayed,
            "data": self.data,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> CommandOutcome:
        command_id = data.get("commandId")
        return cls(
            command_name=str(data["commandName"]),
            dry_run=bool(data["dryRun"]),
            command_id=str(command_id) if command_id is not None else None,
            revision=int(data["revision"]),
            changed=bool(data["changed"]),
            diff=list(data.get("diff") or []),
            warnings=list(data.get("warnings") or []),
            replayed=bool(data.get("replayed", False)),
            data=dict(data.get("data") or {}),
        )


@dataclass(frozen=True, slots=True)
class PageRef:
    """A page an actor may read: enough to list it, nothing of its body."""

    workspace_id: str
    document_id: str
    title: str
    revision: int

    def to_wire(self) -> dict[str, Any]:
        return {
            "workspaceId": self.workspace_id,
            "documentId": self.document_id,
            "title": self.title,
            "revision": self.revision,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> PageRef:
        return cls(
            workspace_id=str(data["workspaceId"]),
            document_id=str(data["documentId"]),
            title=str(data["title"]),
            revision=int(data["revision"]),
        )


@dataclass(frozen=True, slots=True, order=True)
class PageKey:
    """Which page: what `page_revisions` is asked about and answers for."""

    workspace_id: str
    document_id: str

    def to_wire(self) -> dict[str, str]:
        return {"workspaceId": self.workspace_id, "documentId": self.document_id}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> PageKey:
        return cls(workspace_id=str(data["workspaceId"]), document_id=str(data["documentId"]))


def revisions_to_wire(revisions: Mapping[PageKey, int]) -> list[dict[str, Any]]:
    """`page_revisions`' answer as JSON: `[{"workspaceId", "documentId", "revision"}, ...]`."""
    return [{**key.to_wire(), "revision": revision} for key, revision in sorted(revisions.items())]


def revisions_from_wire(items: Iterable[Mapping[str, Any]]) -> dict[PageKey, int]:
    return {PageKey.from_wire(item): int(item["revision"]) for item in items}


@runtime_checkable
class Kernel(Protocol):
    """Page queries, command execution (with dry run) and the audit trail.

    Every method raises `MnoteError` for a refusal; an adapter that cannot reach its runtime raises
    `MnoteError(RUNTIME_UNAVAILABLE, ...)`, never a transport exception.
    """

    async def get_page(self, query: PageQuery) -> dict[str, Any]: ...

    async def execute(self, command: Command) -> CommandOutcome: ...

    async def authorize(self, actor_id: str, workspace_id: str, document_id: str, scope: Scope) -> None:
        """Whether `actor_id` may use `scope` on the page: returns, or raises the refusal the first
        failing checkpoint gives (login, workspace member, page exists, page read, `scope`), exactly
        as `get_page` or `execute` would. Asked by the dispatcher before it reports an invalid
        argument, so that bad arguments never hide a permission refusal."""
        ...

    async def list_pages(self, actor_id: str) -> list[PageRef]: ...

    async def page_revisions(self, actor_id: str, pages: Sequence[PageKey]) -> dict[PageKey, int]:
        """The current revision of each page in `pages` that `actor_id` may read.

        A page that is missing or not readable is simply absent from the answer (never an error, so a
        watcher cannot tell the two apart); an empty actor reads nothing. Cheap enough to poll.
        """
        ...

    async def page_history(self, query: HistoryQuery) -> dict[str, Any]:
        """A page's recorded writes, newest first (needs page read): `{workspaceId, documentId,
        revision, historyFrom, entries: [...], nextCursor?}`."""
        ...

    async def search_pages(self, query: SearchQuery) -> dict[str, Any]:
        """The pages the actor may read that match `query.query`, best first, or without a query every
        readable page, most recently changed first: `{hits: [{workspaceId, documentId, title, revision,
        updatedAt, snippets?: [{blockId, text}]}], nextCursor?}` (docs/search.md). A page the actor
        may not read is never a hit; `workspace_id` naming a workspace it is no member of (or outside
        `workspaces`) is `permission_denied` (`not_member`)."""
        ...

    async def audit_trail(
        self, *, trace_id: str | None = None, command_id: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]: ...

    async def aclose(self) -> None: ...


PageChangeListener = Callable[[PageKey, int], None]


@runtime_checkable
class PageChangeFeed(Protocol):
    """A kernel that hears page writes as they commit, whichever process made them (PostgreSQL's
    LISTEN/NOTIFY). Optional: the resource watcher polls `page_revisions` without it, and with it is
    woken at once instead of at its next interval (it still asks `page_revisions`, so a watch never
    learns of a page its actor may not read)."""

    def watch_changes(self, listener: PageChangeListener) -> Callable[[], None]:
        """Call `listener(page, revision)` for every page write committed on the store, from any
        thread, and once with `revision` 0 for every page when notifications may have been missed (a
        reconnect); returns the function that stops calling it."""
        ...
