"""The page tools of contract v1: read a page; save its body, title or options."""

from __future__ import annotations

from typing import Any

from mnote_mcp.kernel.blocks import MAX_BLOCKS, SUPPORTED_TYPES
from mnote_mcp.kernel.errors import ErrorCode, Reason
from mnote_mcp.kernel.port import Kernel
from mnote_mcp.kernel.store.commands import page as page_commands
from mnote_mcp.tools.consent import removes_blocks, renames_shared_page
from mnote_mcp.tools.examples import Example, Ref
from mnote_mcp.tools.failures import (
    BAD_CURSOR,
    BLOCK_NOT_FOUND,
    BLOCK_TYPE,
    PAGE_NOT_FOUND,
    PAGE_TOO_LARGE,
    STALE_CURSOR,
    WRITE_ERRORS,
    ErrorCase,
)
from mnote_mcp.tools.permissions import READ_PAGE, WRITE_PAGE
from mnote_mcp.tools.pieces import fit_piece, page_query
from mnote_mcp.tools.registry import Annotations, ToolSpec
from mnote_mcp.tools.results import fields
from mnote_mcp.tools.schemas import BLOCK_ITEM, page_schema, write_schema
from mnote_mcp.tools.sizes import SizeBudget
from mnote_mcp.tools.toolsets import Toolset
from mnote_mcp.vocabulary.envelope import CORRELATION_FIELDS, ToolRequest, ToolResult


async def _get_page(request: ToolRequest, kernel: Kernel) -> ToolResult:
    view = await kernel.get_page(page_query(request))
    return ToolResult(result=dict(view), effect="read")


PAGE_GET = ToolSpec(
    name="mnote.page.get",
    title="Read page",
    description=(
        "Read an mnote page: title, revision, body summary, options and blocks ({id, type, text, props?, "
        "children?}), or the body as Markdown with block ids. Pass the revision as baseRevision to a later "
        "write. Long pages come in pieces: while nextCursor is present, call again with cursor=nextCursor."
    ),
    summary=(
        "title, revision, body summary, options, blocks — or the body as Markdown with block ids "
        "(`format`), a subset (`blockIds`), in pieces (`maxBlocks`, `cursor`)"
    ),
    returns="`title`, `revision`, `bodySummary`, `pageOptions`, `blocks` (or `markdown`), `nextCursor`",
    toolset=Toolset.PAGE,
    annotations=Annotations(destructive=False, idempotent=True),
    contract_schema=page_schema(
        {
            "includeBody": {"type": "boolean", "default": True},
            "includeOptions": {"type": "boolean", "default": True},
            "includeBlocks": {"type": "boolean", "default": True},
        },
        required=CORRELATION_FIELDS,
    ),
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
    read=_get_page,
    fit=fit_piece,
    empty_means_absent=frozenset({"cursor", "blockIds", "format"}),
    permissions=READ_PAGE,
    errors=(
        PAGE_NOT_FOUND,
        BLOCK_NOT_FOUND.given({"blockIds": ["no_such_block"]}),
        STALE_CURSOR,
        BAD_CURSOR,
    ),
    examples=(
        Example({}, note="the whole page"),
        Example({"format": "markdown", "blockIds": [Ref.BLOCK_2]}, note="one block, as Markdown"),
    ),
    budget=SizeBudget(contract=2_950, strict=3_600),
)

PAGE_SAVE = ToolSpec(
    name="mnote.page.save",
    title="Save page body",
    description=(
        "Page-level fallback writer. mode=replace (default): content becomes the whole body; blocks are matched "
        f"by id (keep ids to update in place, omit for new blocks). mode=append: add blocks at the end. Block "
        f"types: {', '.join(SUPPORTED_TYPES)}. The result lists every inserted, updated, moved and deleted block."
    ),
    summary="replace (default) or append the body, blocks matched by id",
    returns="`commandName`, `revision`, `changed`, `diff`, and `blockIds` of appended blocks",
    toolset=Toolset.PAGE,
    annotations=Annotations(destructive=True, idempotent=True),
    contract_schema=write_schema(
        {"content": {"type": "array"}, "mode": {"type": "string", "enum": ["replace", "append"]}},
        required=(),
        required_last=("content",),
    ),
    extensions={
        "content": {"items": BLOCK_ITEM, "description": "Blocks, in order."},
        "mode": {"description": "replace (default) or append."},
    },
    kernel_validated=frozenset({"content"}),
    empty_means_absent=frozenset({"mode"}),
    command=page_commands.SAVE,
    payload=lambda args: {"content": args["content"], "mode": args.get("mode", "replace")},
    consent=removes_blocks,
    permissions=WRITE_PAGE,
    errors=(*WRITE_ERRORS, BLOCK_TYPE.given({"content": [{"type": "video", "text": "x"}]}), PAGE_TOO_LARGE),
    examples=(
        Example({"content": [{"type": "paragraph", "text": "Appended by an example."}], "mode": "append"}),
    ),
    budget=SizeBudget(contract=4_600, strict=5_350),
)

PAGE_UPDATE_TITLE = ToolSpec(
    name="mnote.page.update_title",
    title="Rename page",
    description="Change a page's title.",
    summary="rename a page",
    returns="`commandName`, `revision`, `changed`, `diff`",
    toolset=Toolset.PAGE,
    annotations=Annotations(destructive=True, idempotent=True),
    contract_schema=write_schema({"title": {"type": "string", "minLength": 1}}, required=["title"]),
    command=page_commands.TITLE,
    payload=fields("title"),
    consent=renames_shared_page,
    permissions=WRITE_PAGE,
    errors=WRITE_ERRORS,
    examples=(Example({"title": "Renamed by an example"}),),
    budget=SizeBudget(contract=2_400, strict=2_780),
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
    summary="layout options; non-wired ones refused / warned",
    returns="`commandName`, `revision`, `changed`, `diff`; a dry run warns of an option not wired",
    toolset=Toolset.PAGE,
    annotations=Annotations(destructive=False, idempotent=True),
    contract_schema=write_schema({"options": _OPTIONS_SCHEMA}, required=["options"]),
    command=page_commands.OPTIONS,
    payload=fields("options"),
    permissions=WRITE_PAGE,
    errors=(
        *WRITE_ERRORS,
        ErrorCase(
            ErrorCode.OPTION_NOT_WIRED,
            Reason.OPTION,
            "an option the runtime has not wired yet (`protectEditing` by default), on a real call",
            "leave the option out; a dry run shows it as a warning",
            example={"options": {"protectEditing": True}},
        ),
    ),
    examples=(Example({"options": {"showToc": True}}),),
    budget=SizeBudget(contract=2_720, strict=3_250),
)

PAGE_TOOLS = (PAGE_GET, PAGE_SAVE, PAGE_UPDATE_TITLE, PAGE_UPDATE_OPTIONS)
