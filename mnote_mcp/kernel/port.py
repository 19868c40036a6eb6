"""The kernel port: the only way the tools reach business data.

mnote's Rust runtime is the real kernel; this module states what any adapter (embedded SQLite, HTTP
relay, mnote-cli relay) must offer, in plain data that crosses a process boundary unchanged
(`to_wire`/`from_wire` are the JSON the runtime protocol carries). Nothing here knows about MCP.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable


class CommandName(StrEnum):
    PAGE_BODY_SAVE = "page.body.save"
    PAGE_HEAD_UPDATE_TITLE = "page.head.updateTitle"
    PAGE_LAYOUT_UPDATE_OPTIONS = "page.layout.updateOptions"
    ARTIFACT_SUMMARY_UPSERT = "artifact.summary.upsert"
    ARTIFACT_AI_NOTE_CREATE = "artifact.aiNote.create"


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
    workspace_id: str
    document_id: str
    actor_id: str
    correlation: Correlation
    include_body: bool = True
    include_options: bool = True
    include_blocks: bool = True

    def to_wire(self) -> dict[str, Any]:
        return {
            "workspaceId": self.workspace_id,
            "documentId": self.document_id,
            "actorId": self.actor_id,
            "correlation": self.correlation.to_wire(),
            "includeBody": self.include_body,
            "includeOptions": self.include_options,
            "includeBlocks": self.include_blocks,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> PageQuery:
        return cls(
            workspace_id=str(data["workspaceId"]),
            document_id=str(data["documentId"]),
            actor_id=str(data["actorId"]),
            correlation=Correlation.from_wire(data["correlation"]),
            include_body=bool(data.get("includeBody", True)),
            include_options=bool(data.get("includeOptions", True)),
            include_blocks=bool(data.get("includeBlocks", True)),
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


@runtime_checkable
class Kernel(Protocol):
    """Page queries, command execution (with dry run) and the audit trail.

    Every method raises `MnoteError` for a refusal; an adapter that cannot reach its runtime raises
    `MnoteError(RUNTIME_UNAVAILABLE, ...)`, never a transport exception.
    """

    async def get_page(self, query: PageQuery) -> dict[str, Any]: ...

    async def execute(self, command: Command) -> CommandOutcome: ...

    async def list_pages(self, actor_id: str) -> list[PageRef]: ...

    async def audit_trail(
        self, *, trace_id: str | None = None, command_id: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]: ...

    async def aclose(self) -> None: ...
