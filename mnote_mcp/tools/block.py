"""Block-level edits: the precise writers, so an agent never rewrites a whole page to change one block.

Each tool is one kernel command addressed by block id. A missing block is `mnote_tool_not_found`; an
edit that cannot be made (an empty change, an anchor inside the moved block, children under a type
that has none) is `mnote_tool_invalid_argument` with a pointer. The result lists `blockIds`, every
block the call inserted, updated, deleted or moved, and the page's new `revision`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mnote_mcp.identity import Scope
from mnote_mcp.kernel.blocks import SUPPORTED_TYPES
from mnote_mcp.kernel.port import CommandName
from mnote_mcp.tools.registry import Annotations, ToolSpec
from mnote_mcp.tools.results import PayloadMap, command_handler
from mnote_mcp.tools.schemas import BLOCK_ITEM, WRITE_EXTENSIONS, WRITE_REQUIRED

_ID: dict[str, Any] = {"type": "string"}  # ids come from mnote.page.get; the kernel checks their form
_PAGE: dict[str, Any] = {"workspaceId": {"type": "string"}, "documentId": {"type": "string"}}
_WRITE: dict[str, Any] = {"idempotencyKey": {"type": "string"}, "dryRun": {"type": "boolean"}}
_PLACEMENT: dict[str, Any] = {
    "afterBlockId": {**_ID, "description": "Place right after this block, as its sibling."},
    "parentId": {**_ID, "description": "Place among this list/todo block's children."},
    "position": {
        "type": "string",
        "enum": ["start", "end"],
        "description": "Without afterBlockId: start (default) or end of parentId's children or the page.",
    },
}


def _schema(required: list[str], properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["workspaceId", "documentId", *required, *WRITE_REQUIRED],
        "properties": {**_PAGE, **properties, **_WRITE},
    }


def _fields(*names: str) -> PayloadMap:
    """The command payload: the named arguments the caller gave, nothing invented."""

    def payload(args: Mapping[str, Any]) -> dict[str, Any]:
        return {name: args[name] for name in names if name in args}

    return payload


BLOCK_INSERT = ToolSpec(
    name="mnote.block.insert",
    title="Insert blocks",
    description=(
        "Insert blocks after afterBlockId, or at the start/end of the page or of parentId's children. "
        "Omit ids for new blocks; the result gives their ids."
    ),
    toolset="block",
    scope=Scope.PAGE_WRITE,
    annotations=Annotations(read_only=False, destructive=False, idempotent=True),
    contract_schema=_schema(
        ["blocks"],
        {"blocks": {"type": "array", "items": BLOCK_ITEM, "description": "Blocks to insert, in order."}}
        | _PLACEMENT,
    ),
    extensions=WRITE_EXTENSIONS,
    kernel_validated=frozenset({"blocks"}),
    handler=command_handler(
        CommandName.PAGE_BLOCK_INSERT, _fields("blocks", "afterBlockId", "parentId", "position")
    ),
)

BLOCK_UPDATE = ToolSpec(
    name="mnote.block.update",
    title="Update block",
    description=(
        "Change one block's type, text or props; what is not given stays. props merge into the block's "
        "(null resets one); a type change drops props the new type lacks."
    ),
    toolset="block",
    scope=Scope.PAGE_WRITE,
    annotations=Annotations(read_only=False, destructive=True, idempotent=True),
    contract_schema=_schema(
        ["blockId"],
        {
            "blockId": _ID,
            "type": {"type": "string", "enum": list(SUPPORTED_TYPES)},
            "text": {"type": "string"},
            "props": {"type": "object", "description": BLOCK_ITEM["properties"]["props"]["description"]},
        },
    ),
    extensions=WRITE_EXTENSIONS,
    handler=command_handler(CommandName.PAGE_BLOCK_UPDATE, _fields("blockId", "type", "text", "props")),
)

BLOCK_DELETE = ToolSpec(
    name="mnote.block.delete",
    title="Delete blocks",
    description="Delete blocks by id, each with its children.",
    toolset="block",
    scope=Scope.PAGE_WRITE,
    annotations=Annotations(read_only=False, destructive=True, idempotent=True),
    contract_schema=_schema(["blockIds"], {"blockIds": {"type": "array", "items": _ID}}),
    extensions=WRITE_EXTENSIONS,
    handler=command_handler(CommandName.PAGE_BLOCK_DELETE, _fields("blockIds")),
)

BLOCK_MOVE = ToolSpec(
    name="mnote.block.move",
    title="Move block",
    description=(
        "Move a block, with its children, after afterBlockId or to the start/end of the page or of "
        "parentId's children."
    ),
    toolset="block",
    scope=Scope.PAGE_WRITE,
    annotations=Annotations(read_only=False, destructive=False, idempotent=True),
    contract_schema=_schema(["blockId"], {"blockId": _ID} | _PLACEMENT),
    extensions=WRITE_EXTENSIONS,
    handler=command_handler(
        CommandName.PAGE_BLOCK_MOVE, _fields("blockId", "afterBlockId", "parentId", "position")
    ),
)

BLOCK_TOOLS = (BLOCK_INSERT, BLOCK_UPDATE, BLOCK_DELETE, BLOCK_MOVE)
