"""The artifact tools of contract v1: AI output attached to a page, never written into its body."""

from __future__ import annotations

from mnote_mcp.kernel.errors import ErrorCode, Reason
from mnote_mcp.kernel.store.commands import artifact as artifact_commands
from mnote_mcp.tools.examples import Example, long_text
from mnote_mcp.tools.failures import KEY_OF_ANOTHER_TOOL, STALE_REVISION, WRITE_ERRORS, ErrorCase
from mnote_mcp.tools.inputs import NoteArgs, SummaryArgs
from mnote_mcp.tools.outputs import WriteAnswer
from mnote_mcp.tools.permissions import WRITE_ARTIFACT
from mnote_mcp.tools.registry import Annotations, ToolSpec
from mnote_mcp.tools.results import fields
from mnote_mcp.tools.schemas import write_schema
from mnote_mcp.tools.sizes import SizeBudget
from mnote_mcp.tools.toolsets import Toolset

CREATE_SUMMARY = ToolSpec(
    name="mnote.artifact.create_summary",
    title="Write page summary",
    description=("Write the page's summary 写页面摘要, kept beside it (replaces the last)."),
    summary="the page's single summary node + reference edge",
    returns="`artifactId`, `edgeId` of the page's single summary (created or replaced); the revision unchanged",
    toolset=Toolset.ARTIFACT,
    annotations=Annotations(destructive=True, idempotent=True),
    contract_schema=write_schema({"summary": {"type": "string"}}, required=["summary"]),
    command=artifact_commands.SUMMARY,
    payload=fields("summary"),
    permissions=WRITE_ARTIFACT,
    errors=(
        STALE_REVISION,
        ErrorCase(
            ErrorCode.IDEMPOTENCY_CONFLICT,
            Reason.SUMMARY,
            "the `idempotencyKey` was used before with another summary",
        ),
        KEY_OF_ANOTHER_TOOL,
    ),
    examples=(Example({"summary": "A summary written by an example."}),),
    arguments=SummaryArgs,
    output=WriteAnswer,
    oversized=(long_text("summary"),),
    asked=(("write a summary of this page", "给这个页面写一份摘要"),),
    budget=SizeBudget(contract=560, strict=610),
)

CREATE_AI_NOTE = ToolSpec(
    name="mnote.artifact.create_ai_note",
    title="Attach AI note",
    description=("Attach an AI note 附加AI笔记 beside a page (one per call)."),
    summary="a new ai_note node per idempotency key + reference edge",
    returns="`artifactId`, `edgeId` of a new AI note (one per idempotency key); the revision unchanged",
    toolset=Toolset.ARTIFACT,
    annotations=Annotations(destructive=False, idempotent=True),
    contract_schema=write_schema({"content": {"type": "string"}}, required=["content"]),
    command=artifact_commands.NOTE,
    payload=fields("content"),
    permissions=WRITE_ARTIFACT,
    errors=WRITE_ERRORS,
    examples=(Example({"content": "An AI note written by an example."}),),
    arguments=NoteArgs,
    output=WriteAnswer,
    oversized=(long_text("content"),),
    asked=(("attach an AI note with my suggestions", "附加一条AI笔记"),),
    budget=SizeBudget(contract=550, strict=600),
)

ARTIFACT_TOOLS = (CREATE_SUMMARY, CREATE_AI_NOTE)
