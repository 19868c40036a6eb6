"""Schema fragments shared by several tool declarations (block items, write-tool properties)."""

from __future__ import annotations

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

# The contract lists these as required on every write tool, after the page ids.
WRITE_REQUIRED: list[str] = ["sessionId", "runId", "toolCallId", "traceId", "idempotencyKey", "dryRun"]
