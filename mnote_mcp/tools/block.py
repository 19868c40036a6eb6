"""Block-level edits: the precise writers, so an agent never rewrites a whole page to change one block.

Each tool is one kernel command addressed by block id. A missing block is `mnote_tool_not_found`; an
edit that cannot be made (an empty change, an anchor inside the moved block, children under a type
that has none) is `mnote_tool_invalid_argument` with a pointer. The result lists `blockIds`, every
block the call inserted, updated, deleted or moved, and the page's new `revision`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mnote_mcp.kernel.errors import ErrorCode, Reason
from mnote_mcp.kernel.store.commands import block as block_commands
from mnote_mcp.tools.consent import deletes_subtrees_or_many
from mnote_mcp.tools.examples import (
    HUGE_KEY,
    MANY_NEW_BLOCKS,
    Example,
    Ref,
    Stage,
    edited_everywhere,
    long_text,
)
from mnote_mcp.tools.failures import (
    BLOCK_NOT_FOUND,
    BLOCK_TYPE,
    BLOCK_WRITE_ERRORS,
    PAGE_TOO_LARGE,
    ErrorCase,
)
from mnote_mcp.tools.inputs import DeleteArgs, InsertArgs, MoveArgs, UpdateArgs
from mnote_mcp.tools.outputs import WriteAnswer
from mnote_mcp.tools.permissions import WRITE_PAGE
from mnote_mcp.tools.registry import Annotations, ToolSpec
from mnote_mcp.tools.results import PayloadMap, fields
from mnote_mcp.tools.schemas import PROPS, block_item, write_schema
from mnote_mcp.tools.sizes import SizeBudget
from mnote_mcp.tools.toolsets import Toolset

_ID: dict[str, Any] = {"type": "string"}  # ids come from mnote.page.get; the kernel checks their form
# Where a block goes; the tool's description says how the three combine.
_PLACEMENT: dict[str, Any] = {
    "afterBlockId": _ID,
    "parentId": _ID,
    "position": {"type": "string", "enum": ["start", "end"]},
}
_PLACED = "after afterBlockId, or at position start (default)/end of the page or parentId"
# A heading's section: the heading and the blocks after it up to the next heading as high (kernel
# commands/section.py); one flag on move and delete rather than two more tools (docs/decisions.md).
# Said in full: a model takes "a section" for a heading's own paragraphs, and a heading of level 1
# takes its level-2 sub-sections too (issue 35: 16 blocks moved where a model expected 4).
_SECTION: dict[str, Any] = {"section": {"type": "boolean"}}
_SECTION_IS = "section:true: each heading with all under it, sub-sections too, to the next heading as high"


_PLACEMENT_EMPTY = frozenset({"afterBlockId", "parentId", "position"})

_NO_SUCH_BLOCK = BLOCK_NOT_FOUND.given({"blockId": "no_such_block"})  # the tools that take one blockId
_RETURNS = "`commandName`, `revision`, `changed`, `diff`, `blockIds` of every block {}"


def _placed(*names: str) -> PayloadMap:
    """The payload of a placing tool: with an anchor, `position` (which applies only without one) is
    dropped, so a strict host that must fill both is not refused for it."""
    pick = fields(*names)

    def payload(args: Mapping[str, Any]) -> dict[str, Any]:
        chosen = pick(args)
        if "afterBlockId" in chosen:
            chosen.pop("position", None)
        return chosen

    return payload


BLOCK_INSERT = ToolSpec(
    name="mnote.block.insert",
    title="Insert blocks",
    description=(f"Add blocks or to-dos to a page 添加内容或待办 {_PLACED}."),
    summary="insert blocks after a block, or at the start/end of the page or of a parent's children",
    returns=_RETURNS.format("inserted"),
    toolset=Toolset.BLOCK,
    annotations=Annotations(destructive=False, idempotent=True),
    contract_schema=write_schema(
        {"blocks": {"type": "array", "items": block_item(levels=1, ids=False)}} | _PLACEMENT,
        required=["blocks"],
    ),
    kernel_validated=frozenset({"blocks"}),
    empty_means_absent=_PLACEMENT_EMPTY,
    command=block_commands.INSERT,
    payload=_placed("blocks", "afterBlockId", "parentId", "position"),
    permissions=WRITE_PAGE,
    errors=(
        *BLOCK_WRITE_ERRORS,
        BLOCK_NOT_FOUND.given({"afterBlockId": "no_such_block"}),
        BLOCK_TYPE.given({"blocks": [{"type": "video", "text": "x"}]}),
        PAGE_TOO_LARGE,
    ),
    examples=(
        Example(
            {
                "blocks": [{"type": "paragraph", "text": "Inserted by an example."}],
                "afterBlockId": Ref.BLOCK_2,
            }
        ),
        Example(
            {"blocks": [{"type": "todo", "text": "A task", "props": {"checked": False}}], "position": "end"}
        ),
    ),
    arguments=InsertArgs,
    output=WriteAnswer,
    oversized=(
        Example({"blocks": MANY_NEW_BLOCKS, "position": "end"}, stage=Stage.BIG, note="2,000 blocks"),
        Example(
            {"blocks": [{"type": "paragraph", "text": "x", HUGE_KEY: 1}]},
            stage=Stage.BIG,
            fits=True,
            note="a huge key",
        ),
    ),
    asked=(
        ("add a to-do to the launch checklist", "在发布清单里添加一个待办事项"),
        ("add a paragraph at the end of the page", "在页面末尾添加一段内容"),
    ),
    budget=SizeBudget(contract=1_090, strict=1_440),
)

BLOCK_UPDATE = ToolSpec(
    name="mnote.block.update",
    title="Update block",
    description=(
        "Change one block's type, text or props 修改块类型、勾选待办 (checked:true ticks a to-do); props merge."
    ),
    summary="change one block's type, text or props (props merge)",
    returns=_RETURNS.format("updated"),
    toolset=Toolset.BLOCK,
    annotations=Annotations(destructive=True, idempotent=True),
    contract_schema=write_schema(
        {
            "blockId": _ID,
            "type": {"type": "string"},
            "text": {"type": "string"},
            "props": PROPS,
        },
        required=["blockId"],
    ),
    empty_means_absent=frozenset({"type"}),  # "" is no type; text "" is a value (clears the text)
    quiet=frozenset(),  # text overwrites what the model read: baseRevision fences it
    command=block_commands.UPDATE,
    payload=fields("blockId", "type", "text", "props"),
    permissions=WRITE_PAGE,
    errors=(
        *BLOCK_WRITE_ERRORS,
        _NO_SUCH_BLOCK,
        ErrorCase(
            ErrorCode.INVALID_ARGUMENT,
            Reason.SCHEMA,
            "nothing to change: no `type`, `text` or `props` given",
            "give what should change",
            example={"text": None},
        ),
        PAGE_TOO_LARGE,
    ),
    examples=(Example({"blockId": Ref.BLOCK_2, "text": "Updated by an example."}),),
    oversized=(long_text("text", blockId=Ref.BLOCK_1),),
    by_default=False,  # --toolsets all (or block / history, or --tools) adds it
    arguments=UpdateArgs,
    output=WriteAnswer,
    asked=(
        ("tick off the first to-do", "把第一个待办勾选为完成"),
        ("change this block's type to a quote", "把这个块的类型改成引用"),
    ),
    budget=SizeBudget(contract=910, strict=1_200),
)

BLOCK_DELETE = ToolSpec(
    name="mnote.block.delete",
    title="Delete blocks",
    description=f"Delete blocks or a section 删除块或章节, with children. {_SECTION_IS}.",
    summary="delete blocks by id, with their children (or a heading with its section)",
    returns=_RETURNS.format("deleted"),
    toolset=Toolset.BLOCK,
    annotations=Annotations(destructive=True, idempotent=True),
    contract_schema=write_schema(
        {"blockIds": {"type": "array", "items": _ID}} | _SECTION, required=["blockIds"]
    ),
    command=block_commands.DELETE,
    payload=fields("blockIds", "section"),
    consent=deletes_subtrees_or_many,
    permissions=WRITE_PAGE,
    errors=(*BLOCK_WRITE_ERRORS, BLOCK_NOT_FOUND.given({"blockIds": ["no_such_block"]})),
    examples=(Example({"blockIds": [Ref.BLOCK_3]}),),  # one: the per-tool tests run each in turn
    hostile=(Example({"blockIds": [Ref.BLOCK_1], "section": True}, note="a heading with its section"),),
    oversized=(
        Example({"blockIds": Ref.EVERY_BLOCK}, stage=Stage.BIG, note="2,000 blocks"),
        Example(
            {"blockIds": Ref.EVERY_BLOCK, "baseRevision": Ref.SEEDED_REVISION},
            setup=(edited_everywhere("plan", "changed"),),
            stage=Stage.BIG,
            fits=True,
            note="a conflict over 2,000 blocks",
        ),
    ),
    by_default=False,  # --toolsets all (or block / history, or --tools) adds it
    arguments=DeleteArgs,
    output=WriteAnswer,
    asked=(
        ("delete the old risks section", "删除旧的风险章节"),
        ("delete this block", "删除这个块"),
    ),
    budget=SizeBudget(contract=700, strict=790),
)

BLOCK_MOVE = ToolSpec(
    name="mnote.block.move",
    title="Move block",
    description=(
        f"Move blocks or a section 移动块或章节: blockId, then blockIds, with children, {_PLACED}."
        f" {_SECTION_IS}."
    ),
    summary="move blocks (or a heading with its section), with their children, after a block or under a parent",
    returns=_RETURNS.format("moved"),
    toolset=Toolset.BLOCK,
    annotations=Annotations(destructive=False, idempotent=True),
    contract_schema=write_schema(
        {"blockId": _ID, "blockIds": {"type": "array", "items": _ID}} | _SECTION | _PLACEMENT,
        required=["blockId"],
    ),
    empty_means_absent=_PLACEMENT_EMPTY,
    command=block_commands.MOVE,
    payload=_placed("blockId", "blockIds", "section", "afterBlockId", "parentId", "position"),
    permissions=WRITE_PAGE,
    errors=(
        *BLOCK_WRITE_ERRORS,
        _NO_SUCH_BLOCK,
        ErrorCase(
            ErrorCode.INVALID_ARGUMENT,
            Reason.SCHEMA,
            "the anchor (`afterBlockId` or `parentId`) is the moved block or inside it",
            "anchor the block outside its own subtree",
            example={"afterBlockId": Ref.BLOCK_1},
        ),
    ),
    examples=(
        Example({"blockId": Ref.BLOCK_1, "afterBlockId": Ref.BLOCK_2}),
        Example({"blockId": Ref.BLOCK_2, "position": "end"}, note="to the end of the page"),
        Example(
            {"blockId": Ref.BLOCK_1, "section": True, "position": "end"}, note="a heading with its section"
        ),
    ),
    arguments=MoveArgs,
    output=WriteAnswer,
    oversized=(
        Example(
            {"blockId": Ref.BLOCK_1, "afterBlockId": HUGE_KEY},
            stage=Stage.BIG,
            fits=True,
            note="a huge anchor",
        ),
    ),
    asked=(("move the next steps section to the top", "把下一步章节移动到页面开头"),),
    budget=SizeBudget(contract=940, strict=1_150),
)

BLOCK_TOOLS = (BLOCK_INSERT, BLOCK_UPDATE, BLOCK_DELETE, BLOCK_MOVE)
