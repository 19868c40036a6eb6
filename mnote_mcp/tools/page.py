"""The page tools of contract v1: read a page; save its body, title or options."""

from __future__ import annotations

from typing import Any

from mnote_mcp.kernel.blocks import MAX_TEXT_LENGTH
from mnote_mcp.kernel.errors import ErrorCode, Reason
from mnote_mcp.kernel.store.commands import page as page_commands
from mnote_mcp.kernel.store.commands import text as text_commands
from mnote_mcp.tools.consent import removes_blocks, renames_shared_page
from mnote_mcp.tools.examples import HUGE_KEY, MANY_NEW_BLOCKS, Call, Example, Ref, Stage
from mnote_mcp.tools.failures import (
    BAD_CURSOR,
    BLOCK_NOT_FOUND,
    BLOCK_TYPE,
    BLOCK_WRITE_ERRORS,
    PAGE_NOT_FOUND,
    PAGE_TOO_LARGE,
    STALE_CURSOR,
    WRITE_ERRORS,
    ErrorCase,
)
from mnote_mcp.tools.inputs import (
    EditTextArgs,
    OptionsArgs,
    PageGetArgs,
    PageSaveArgs,
    TitleArgs,
    typed_extensions,
)
from mnote_mcp.tools.outputs import PageRead, WriteAnswer
from mnote_mcp.tools.permissions import READ_PAGE, WRITE_PAGE
from mnote_mcp.tools.pieces import fit_piece, read_page
from mnote_mcp.tools.registry import Annotations, ToolSpec
from mnote_mcp.tools.results import fields
from mnote_mcp.tools.schemas import BLOCK_ITEM, BLOCKS_AS_INSERTED, BLOCKS_SAID, page_schema, write_schema
from mnote_mcp.tools.sizes import SizeBudget
from mnote_mcp.tools.toolsets import Toolset
from mnote_mcp.vocabulary.envelope import CORRELATION_FIELDS

PAGE_GET = ToolSpec(
    name="mnote.page.get",
    title="Read page",
    description=("Read or show a page 读取、查看页面: blocks, or format=markdown with block ids."),
    summary=(
        "title, revision, body summary, options, blocks — or the body as Markdown with block ids "
        "(`format`), a subset (`blockIds`), in pieces (`maxBlocks`, `cursor`)"
    ),
    returns=(
        "`title`, `revision`, `bodySummary`, `pageOptions`, `blocks` (or `markdown`), `nextCursor`; in a piece"
        " of a block larger than one result, `blockPiece`"
    ),
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
    extensions=typed_extensions(PageGetArgs, "format", "blockIds", "maxBlocks", "cursor"),
    quiet=frozenset({"maxBlocks"}),  # pieces come by themselves (--max-result-chars)
    read=read_page,
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
    hostile=(Example({"format": "markdown"}, note="the whole page as Markdown"),),
    arguments=PageGetArgs,
    output=PageRead,
    oversized=(
        Example({}, stage=Stage.BIG, note="the whole page"),
        Example({"format": "markdown"}, stage=Stage.BIG, note="as Markdown"),
        Example({"blockIds": [Ref.BLOCK_2]}, stage=Stage.HUGE_BLOCK, note="one 65,000-character block"),
        Example(
            {"blockIds": [Ref.BLOCK_2], "format": "markdown"},
            stage=Stage.HUGE_BLOCK,
            note="one 65,000-character block as Markdown",
        ),
        Example(
            {"blockIds": [f"missing_{n:05d}" for n in range(2_000)]},
            stage=Stage.BIG,
            fits=True,
            note="2,000 missing ids",
        ),
    ),
    asked=(
        ("read the onboarding checklist page", "读取入职清单页面"),
        ("show me what the project plan page says", "查看项目计划页面"),
    ),
    budget=SizeBudget(contract=730, strict=1_020),
)

PAGE_SAVE = ToolSpec(
    name="mnote.page.save",
    title="Save page body",
    description=(
        "Rewrite a page's whole body 重写整页正文 (replace keeps blocks by id, deletes the rest) or append."
        " Small edits: edit_text."
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
    extensions={"content": {"items": BLOCK_ITEM, "description": BLOCKS_SAID}},
    kernel_validated=frozenset({"content"}),
    quiet=frozenset(),  # a replace overwrites what the model read: baseRevision fences it
    said_in=("mnote.block.insert", {"content": BLOCKS_AS_INSERTED}),
    empty_means_absent=frozenset({"mode"}),
    command=page_commands.SAVE,
    payload=lambda args: {"content": args["content"], "mode": args.get("mode", "replace")},
    consent=removes_blocks,
    permissions=WRITE_PAGE,
    errors=(*WRITE_ERRORS, BLOCK_TYPE.given({"content": [{"type": "video", "text": "x"}]}), PAGE_TOO_LARGE),
    examples=(
        Example({"content": [{"type": "paragraph", "text": "Appended by an example."}], "mode": "append"}),
    ),
    arguments=PageSaveArgs,
    output=WriteAnswer,
    oversized=(
        Example({"content": MANY_NEW_BLOCKS}, stage=Stage.BIG, note="a rewrite"),
        Example({"content": MANY_NEW_BLOCKS, "dryRun": True}, stage=Stage.BIG, note="a rewrite, dry run"),
        Example(
            {"content": [{"type": "paragraph", "text": "x", HUGE_KEY: 1}]},
            stage=Stage.BIG,
            fits=True,
            note="a huge key",
        ),
    ),
    asked=(("rewrite the whole page body", "重写整个页面的正文"),),
    budget=SizeBudget(contract=880, strict=2_120),
)

PAGE_UPDATE_TITLE = ToolSpec(
    name="mnote.page.update_title",
    title="Rename page",
    description="Rename a page 重命名页面 (its title 标题).",
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
    arguments=TitleArgs,
    output=WriteAnswer,
    oversized=(Example({"title": "T" * 50_000}, stage=Stage.BIG, fits=True, note="too long"),),
    asked=(
        ("rename the page to Q3 roadmap", "把页面重命名为第三季度路线图"),
        ("change the title of this page", "修改这个页面的标题"),
    ),
    budget=SizeBudget(contract=540, strict=610),
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
    description=("Set page layout options 设置页面布局."),
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
            example={"options": {"protectEditing": True}},
        ),
    ),
    examples=(Example({"options": {"showToc": True}}),),
    arguments=OptionsArgs,
    output=WriteAnswer,
    oversized=(Example({"options": {HUGE_KEY: True}}, stage=Stage.BIG, fits=True, note="a huge option"),),
    asked=(("turn on the wide layout for this page", "把这个页面设为宽屏布局"),),
    budget=SizeBudget(contract=700, strict=880),
)

_EDIT: dict[str, Any] = {
    "type": "object",
    "required": ["oldText", "newText"],
    "properties": {
        "oldText": {"type": "string"},
        "newText": {"type": "string"},
        "replaceAll": {"type": "boolean"},
    },
    "additionalProperties": False,
}

PAGE_EDIT_TEXT = ToolSpec(
    name="mnote.page.edit_text",
    title="Edit page text",
    description=(
        "Fix a typo or replace words in a page 替换文字、改错别字: exact oldText to newText, in order, all"
        " or none; oldText once, or blockId/replaceAll."
    ),
    summary="replace exact text (several edits, in order, all or none) in a page or one block",
    returns="`commandName`, `revision`, `changed`, `diff`, `blockIds` of the blocks whose text changed",
    toolset=Toolset.PAGE,
    annotations=Annotations(destructive=True, idempotent=True),
    contract_schema=write_schema(
        {"edits": {"type": "array", "items": _EDIT}, "blockId": {"type": "string"}}, required=["edits"]
    ),
    kernel_validated=frozenset({"edits"}),
    empty_means_absent=frozenset({"blockId"}),
    command=text_commands.REPLACE,
    payload=fields("edits", "blockId"),
    permissions=WRITE_PAGE,
    errors=(
        *BLOCK_WRITE_ERRORS,
        BLOCK_NOT_FOUND.given({"blockId": "no_such_block"}),
        ErrorCase(
            ErrorCode.INVALID_ARGUMENT,
            Reason.TEXT_MISSING,
            "an edit's `oldText` is not on the page, or in the block (`details.pointer`; `details.candidates`:"
            " blocks with similar text, `{blockId, text}`)",
            example={"blockId": None, "edits": [{"oldText": "text on no page", "newText": "x"}]},
        ),
        ErrorCase(
            ErrorCode.INVALID_ARGUMENT,
            Reason.TEXT_AMBIGUOUS,
            "an edit's `oldText` occurs more than once and `replaceAll` is not set (`details.matches`;"
            " `details.candidates`: where, `{blockId, text}`)",
        ),
        PAGE_TOO_LARGE,
    ),
    examples=(
        Example(
            {"edits": [{"oldText": "for an edit", "newText": "by a text edit"}], "blockId": Ref.BLOCK_2},
            setup=(Call("mnote.block.update", {"blockId": Ref.BLOCK_2, "text": "Written for an edit."}),),
        ),
    ),
    oversized=(
        Example(
            {"edits": [{"oldText": "plan", "newText": "p", "replaceAll": True}]},
            stage=Stage.BIG,
            note="2,000 blocks replaced",
        ),
        Example(
            {"edits": [{"oldText": "plan", "newText": "p"}]},
            stage=Stage.BIG,
            fits=True,
            note="2,000 matches, ambiguous",
        ),
        Example(
            {"edits": [{"oldText": "plan " * 18_000, "newText": "x"}]},
            stage=Stage.BIG,
            fits=True,
            note="a huge text found nowhere",
        ),
    ),
    hostile=(
        Example(
            {"edits": [{"oldText": "a", "newText": "aa", "replaceAll": True}] * text_commands.MAX_EDITS},
            note="doubling",
        ),
        Example({"edits": [{"oldText": "a", "newText": "b" * MAX_TEXT_LENGTH, "replaceAll": True}]}),
    ),
    arguments=EditTextArgs,
    output=WriteAnswer,
    asked=(
        ("fix the typo in the meeting minutes", "改正会议纪要里的错别字"),
        ("replace colour with color in the style guide", "把风格指南里的colour替换成color"),
    ),
    budget=SizeBudget(contract=850, strict=950),
)

PAGE_TOOLS = (PAGE_GET, PAGE_SAVE, PAGE_UPDATE_TITLE, PAGE_UPDATE_OPTIONS, PAGE_EDIT_TEXT)
