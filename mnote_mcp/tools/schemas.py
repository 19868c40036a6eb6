"""Schema fragments and the one builder every write tool's input schema comes from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mnote_mcp.kernel.blocks import BLOCK_ID_PATTERN, SUPPORTED_TYPES

BLOCK_ITEM: dict[str, Any] = {
    "type": "object",
    "required": ["type"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "pattern": BLOCK_ID_PATTERN},
        "type": {"type": "string", "enum": list(SUPPORTED_TYPES)},
        "text": {"type": "string"},
        "props": {
            "type": "object",
            "description": "heading.level 1-6, todo.checked, code.language, callout.icon",
        },
        "children": {"type": "array", "description": "Nested blocks; list and todo items only."},
    },
}

# Added to every write tool: optimistic concurrency, and words for the contract's bare properties.
WRITE_EXTENSIONS: dict[str, dict[str, Any]] = {
    "idempotencyKey": {
        "description": "One key per intended change; a retry with the same key replays the first result.",
    },
    "dryRun": {"description": "true: return the plan and diff, write nothing."},
    "baseRevision": {
        "type": "integer",
        "minimum": 0,
        "description": "Revision read from mnote.page.get; refused with the current revision if it moved on.",
    },
}

# The contract lists these as required on every write tool, after the tool's own fields.
WRITE_REQUIRED: tuple[str, ...] = ("sessionId", "runId", "toolCallId", "traceId", "idempotencyKey", "dryRun")


def page_schema(properties: Mapping[str, Any], *, required: Sequence[str] = ()) -> dict[str, Any]:
    """An input schema addressed to one page: `workspaceId`, `documentId`, then the tool's properties."""
    return {
        "type": "object",
        "required": ["workspaceId", "documentId", *required],
        "properties": {"workspaceId": {"type": "string"}, "documentId": {"type": "string"}, **properties},
    }


def write_schema(
    properties: Mapping[str, Any], *, required: Sequence[str], required_last: Sequence[str] = ()
) -> dict[str, Any]:
    """The contract's shape of a write tool's input schema, the only place it is written down.

    The page ids, the tool's own properties, `idempotencyKey` and `dryRun`; required are the page ids,
    `required`, the correlation ids, the key and `dryRun`, then `required_last` (the contract lists
    `mnote.page.save`'s `content` after the others).
    """
    schema = page_schema(
        {**properties, "idempotencyKey": {"type": "string"}, "dryRun": {"type": "boolean"}},
        required=[*required, *WRITE_REQUIRED, *required_last],
    )
    return schema
