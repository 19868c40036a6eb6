"""The artifact tools of contract v1: AI output attached to a page, never written into its body."""

from __future__ import annotations

from mnote_mcp.identity import Scope
from mnote_mcp.kernel.port import CommandName
from mnote_mcp.tools.registry import Annotations, ToolSpec
from mnote_mcp.tools.results import command_handler
from mnote_mcp.tools.schemas import WRITE_EXTENSIONS, WRITE_REQUIRED

CREATE_SUMMARY = ToolSpec(
    name="mnote.artifact.create_summary",
    title="Write page summary",
    description=(
        "Create or replace the page's single summary, linked to the page by a reference edge. "
        "Leaves the page body and revision unchanged."
    ),
    toolset="artifact",
    scope=Scope.ARTIFACT_WRITE,
    annotations=Annotations(read_only=False, destructive=True, idempotent=True),
    contract_schema={
        "type": "object",
        "required": ["workspaceId", "documentId", "summary", *WRITE_REQUIRED],
        "properties": {
            "workspaceId": {"type": "string"},
            "documentId": {"type": "string"},
            "summary": {"type": "string"},
            "idempotencyKey": {"type": "string"},
            "dryRun": {"type": "boolean"},
        },
    },
    extensions=WRITE_EXTENSIONS,
    handler=command_handler(CommandName.ARTIFACT_SUMMARY_UPSERT, lambda args: {"summary": args["summary"]}),
)

CREATE_AI_NOTE = ToolSpec(
    name="mnote.artifact.create_ai_note",
    title="Attach AI note",
    description=(
        "Attach a new AI note to the page (one per idempotencyKey), linked by a reference edge. "
        "Leaves the page body and revision unchanged."
    ),
    toolset="artifact",
    scope=Scope.ARTIFACT_WRITE,
    annotations=Annotations(read_only=False, destructive=False, idempotent=True),
    contract_schema={
        "type": "object",
        "required": ["workspaceId", "documentId", "content", *WRITE_REQUIRED],
        "properties": {
            "workspaceId": {"type": "string"},
            "documentId": {"type": "string"},
            "content": {"type": "string"},
            "idempotencyKey": {"type": "string"},
            "dryRun": {"type": "boolean"},
        },
    },
    extensions=WRITE_EXTENSIONS,
    handler=command_handler(CommandName.ARTIFACT_AI_NOTE_CREATE, lambda args: {"content": args["content"]}),
)

ARTIFACT_TOOLS = (CREATE_SUMMARY, CREATE_AI_NOTE)
