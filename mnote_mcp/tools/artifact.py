"""The artifact tools of contract v1: AI output attached to a page, never written into its body."""

from __future__ import annotations

from mnote_mcp.kernel.port import CommandName
from mnote_mcp.tools.registry import Annotations, ToolSpec
from mnote_mcp.tools.results import fields
from mnote_mcp.tools.schemas import write_schema
from mnote_mcp.tools.toolsets import Toolset

CREATE_SUMMARY = ToolSpec(
    name="mnote.artifact.create_summary",
    title="Write page summary",
    description=(
        "Create or replace the page's single summary, linked to the page by a reference edge. "
        "Leaves the page body and revision unchanged."
    ),
    summary="the page's single summary node + reference edge",
    toolset=Toolset.ARTIFACT,
    annotations=Annotations(destructive=True, idempotent=True),
    contract_schema=write_schema({"summary": {"type": "string"}}, required=["summary"]),
    command=CommandName.ARTIFACT_SUMMARY_UPSERT,
    payload=fields("summary"),
)

CREATE_AI_NOTE = ToolSpec(
    name="mnote.artifact.create_ai_note",
    title="Attach AI note",
    description=(
        "Attach a new AI note to the page (one per idempotencyKey), linked by a reference edge. "
        "Leaves the page body and revision unchanged."
    ),
    summary="a new ai_note node per idempotency key + reference edge",
    toolset=Toolset.ARTIFACT,
    annotations=Annotations(destructive=False, idempotent=True),
    contract_schema=write_schema({"content": {"type": "string"}}, required=["content"]),
    command=CommandName.ARTIFACT_AI_NOTE_CREATE,
    payload=fields("content"),
)

ARTIFACT_TOOLS = (CREATE_SUMMARY, CREATE_AI_NOTE)
