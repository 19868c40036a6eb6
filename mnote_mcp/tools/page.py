"""The page tools of contract v1: read a page; save its body, title or options."""

from __future__ import annotations

from typing import Any

from mnote_mcp.envelope import ToolRequest, ToolResult
from mnote_mcp.identity import Scope
from mnote_mcp.kernel.blocks import MAX_BLOCKS, SUPPORTED_TYPES
from mnote_mcp.kernel.port import CommandName, Kernel
from mnote_mcp.tools.pieces import fit_piece, page_query
from mnote_mcp.tools.registry import Annotations, ToolSpec
from mnote_mcp.tools.results import command_handler
from mnote_mcp.tools.schemas import BLOCK_ITEM, WRITE_EXTENSIONS, WRITE_REQUIRED


async def _get_page(request: ToolRequest, kernel: Kernel) -> ToolResult:
    view = await kernel.get_page(page_query(request))
    return ToolResult(result=view, effect="read")


PAGE_GET = ToolSpec(
    name="mnote.page.get",
    title="Read page",
    description=(
        "Read an mnote page: title, revision, body summary, options and blocks ({id, type, text, props?, "
        "children?}), or the body as Markdown with block ids. Pass the revision as baseRevision to a later "
        "write. Long pages come in pieces: while nextCursor is present, call again with cursor=nextCursor."
    ),
    toolset="page",
    scope=Scope.PAGE_READ,
    annotations=Annotations(read_only=True, destructive=False, idempotent=True),
    contract_schema={
        "type": "object",
        "required": ["workspaceId", "documentId", "sessionId", "runId", "toolCallId", "traceId"],
        "properties": {
            "workspaceId": {"type": "string"},
            "documentId": {"type": "string"},
            "includeBody": {"type": "boolean", "default": True},
            "includeOptions": {"type": "boolean", "default": True},
            "includeBlocks": {"type": "boolean", "default": True},
        },
    },
    extensions={
        "includeBody": {"description": "Include bodySummary, a plain-text opening of the body."},
        "format": {
            "type": "string",
            "enum": ["blocks", "markdown"],
            "default": "blocks",
            "description": "markdown: result.markdown instead of blocks; each block ends with <!-- id -->.",
        },
        "blockIds": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Only these blocks, each with its children.",
        },
        "maxBlocks": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_BLOCKS,
            "description": "At most this many blocks (whole top-level blocks, at least one).",
        },
        "cursor": {"type": "string", "description": "nextCursor of the previous call, same revision."},
    },
    handler=_get_page,
    fit=fit_piece,
)

PAGE_SAVE = ToolSpec(
    name="mnote.page.save",
    title="Save page body",
    description=(
        "Page-level fallback writer. mode=replace (default): content becomes the whole body; blocks are matched "
        f"by id (keep ids to update in place, omit for new blocks). mode=append: add blocks at the end. Block "
        f"types: {', '.join(SUPPORTED_TYPES)}. The result lists every inserted, updated, moved and deleted block."
    ),
    toolset="page",
    scope=Scope.PAGE_WRITE,
    annotations=Annotations(read_only=False, destructive=True, idempotent=True),
    contract_schema={
        "type": "object",
        "required": ["workspaceId", "documentId", *WRITE_REQUIRED, "content"],
        "properties": {
            "workspaceId": {"type": "string"},
            "documentId": {"type": "string"},
            "content": {"type": "array"},
            "mode": {"type": "string", "enum": ["replace", "append"]},
            "idempotencyKey": {"type": "string"},
            "dryRun": {"type": "boolean"},
        },
    },
    extensions={
        "content": {"items": BLOCK_ITEM, "description": "Blocks, in order."},
        "mode": {"description": "replace (default) or append."},
        **WRITE_EXTENSIONS,
    },
    kernel_validated=frozenset({"content"}),
    handler=command_handler(
        CommandName.PAGE_BODY_SAVE,
        lambda args: {"content": args["content"], "mode": args.get("mode", "replace")},
    ),
)

PAGE_UPDATE_TITLE = ToolSpec(
    name="mnote.page.update_title",
    title="Rename page",
    description="Change a page's title.",
    toolset="page",
    scope=Scope.PAGE_WRITE,
    annotations=Annotations(read_only=False, destructive=True, idempotent=True),
    contract_schema={
        "type": "object",
        "required": ["workspaceId", "documentId", "title", *WRITE_REQUIRED],
        "properties": {
            "workspaceId": {"type": "string"},
            "documentId": {"type": "string"},
            "title": {"type": "string", "minLength": 1},
            "idempotencyKey": {"type": "string"},
            "dryRun": {"type": "boolean"},
        },
    },
    extensions=WRITE_EXTENSIONS,
    handler=command_handler(CommandName.PAGE_HEAD_UPDATE_TITLE, lambda args: {"title": args["title"]}),
)

_OPTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "wideLayout": {"type": "boolean"},
        "smallText": {"type": "boolean"},
        "showToc": {"type": "boolean"},
        "protectEditing": {"type": "boolean"},
    },
    "additionalProperties": False,
}

PAGE_UPDATE_OPTIONS = ToolSpec(
    name="mnote.page.update_options",
    title="Set page options",
    description=(
        "Set page layout options. An option the runtime has not wired yet (protectEditing by default) is "
        "refused on a real call and reported as a warning on a dry run."
    ),
    toolset="page",
    scope=Scope.PAGE_WRITE,
    annotations=Annotations(read_only=False, destructive=False, idempotent=True),
    contract_schema={
        "type": "object",
        "required": ["workspaceId", "documentId", "options", *WRITE_REQUIRED],
        "properties": {
            "workspaceId": {"type": "string"},
            "documentId": {"type": "string"},
            "options": _OPTIONS_SCHEMA,
            "idempotencyKey": {"type": "string"},
            "dryRun": {"type": "boolean"},
        },
    },
    extensions=WRITE_EXTENSIONS,
    handler=command_handler(
        CommandName.PAGE_LAYOUT_UPDATE_OPTIONS, lambda args: {"options": args["options"]}
    ),
)

PAGE_TOOLS = (PAGE_GET, PAGE_SAVE, PAGE_UPDATE_TITLE, PAGE_UPDATE_OPTIONS)
