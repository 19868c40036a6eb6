"""The input schemas of tool contract v1, copied by hand from ../shared/contract (the original).

Kept apart from the code's own copy on purpose: the tests compare the two.
"""

from __future__ import annotations

from typing import Any

CORRELATION = ["sessionId", "runId", "toolCallId", "traceId"]

CONTRACT: dict[str, dict[str, Any]] = {
    "mnote.page.get": {
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
    "mnote.page.save": {
        "type": "object",
        "required": [
            "workspaceId",
            "documentId",
            "sessionId",
            "runId",
            "toolCallId",
            "traceId",
            "idempotencyKey",
            "dryRun",
            "content",
        ],
        "properties": {
            "workspaceId": {"type": "string"},
            "documentId": {"type": "string"},
            "content": {"type": "array"},
            "mode": {"type": "string", "enum": ["replace", "append"]},
            "idempotencyKey": {"type": "string"},
            "dryRun": {"type": "boolean"},
        },
    },
    "mnote.page.update_title": {
        "type": "object",
        "required": [
            "workspaceId",
            "documentId",
            "title",
            "sessionId",
            "runId",
            "toolCallId",
            "traceId",
            "idempotencyKey",
            "dryRun",
        ],
        "properties": {
            "workspaceId": {"type": "string"},
            "documentId": {"type": "string"},
            "title": {"type": "string", "minLength": 1},
            "idempotencyKey": {"type": "string"},
            "dryRun": {"type": "boolean"},
        },
    },
    "mnote.page.update_options": {
        "type": "object",
        "required": [
            "workspaceId",
            "documentId",
            "options",
            "sessionId",
            "runId",
            "toolCallId",
            "traceId",
            "idempotencyKey",
            "dryRun",
        ],
        "properties": {
            "workspaceId": {"type": "string"},
            "documentId": {"type": "string"},
            "options": {
                "type": "object",
                "properties": {
                    "wideLayout": {"type": "boolean"},
                    "smallText": {"type": "boolean"},
                    "showToc": {"type": "boolean"},
                    "protectEditing": {"type": "boolean"},
                },
                "additionalProperties": False,
            },
            "idempotencyKey": {"type": "string"},
            "dryRun": {"type": "boolean"},
        },
    },
    "mnote.artifact.create_summary": {
        "type": "object",
        "required": [
            "workspaceId",
            "documentId",
            "summary",
            "sessionId",
            "runId",
            "toolCallId",
            "traceId",
            "idempotencyKey",
            "dryRun",
        ],
        "properties": {
            "workspaceId": {"type": "string"},
            "documentId": {"type": "string"},
            "summary": {"type": "string"},
            "idempotencyKey": {"type": "string"},
            "dryRun": {"type": "boolean"},
        },
    },
    "mnote.artifact.create_ai_note": {
        "type": "object",
        "required": [
            "workspaceId",
            "documentId",
            "content",
            "sessionId",
            "runId",
            "toolCallId",
            "traceId",
            "idempotencyKey",
            "dryRun",
        ],
        "properties": {
            "workspaceId": {"type": "string"},
            "documentId": {"type": "string"},
            "content": {"type": "string"},
            "idempotencyKey": {"type": "string"},
            "dryRun": {"type": "boolean"},
        },
    },
}

WRITE_TOOLS = [name for name in CONTRACT if name != "mnote.page.get"]

# The block tools are this project's, not contract v1's; their declared schemas are copied here by hand
# all the same, so the surface tests hold them to exactly what was decided (docs/decisions.md).
_WRITE_TAIL = ["sessionId", "runId", "toolCallId", "traceId", "idempotencyKey", "dryRun"]
_BLOCK_ID = {"type": "string"}
_PAGE = {"workspaceId": {"type": "string"}, "documentId": {"type": "string"}}
_WRITE = {"idempotencyKey": {"type": "string"}, "dryRun": {"type": "boolean"}}
_PLACEMENT = {
    "afterBlockId": _BLOCK_ID,
    "parentId": _BLOCK_ID,
    "position": {"type": "string", "enum": ["start", "end"]},
}
BLOCK_TYPES = [
    "paragraph",
    "heading",
    "bulleted_list",
    "numbered_list",
    "todo",
    "quote",
    "code",
    "callout",
    "divider",
]

BLOCK_TOOLS: dict[str, dict[str, Any]] = {
    "mnote.block.insert": {
        "type": "object",
        "required": ["workspaceId", "documentId", "blocks", *_WRITE_TAIL],
        "properties": {**_PAGE, "blocks": {"type": "array"}, **_PLACEMENT, **_WRITE},
    },
    "mnote.block.update": {
        "type": "object",
        "required": ["workspaceId", "documentId", "blockId", *_WRITE_TAIL],
        "properties": {
            **_PAGE,
            "blockId": _BLOCK_ID,
            "type": {"type": "string", "enum": BLOCK_TYPES},
            "text": {"type": "string"},
            # Declared key by key (issue 10 item 5): a host that closes open objects still lets the
            # model send props; null resets a prop.
            "props": {
                "type": "object",
                "properties": {
                    "level": {"anyOf": [{"type": "integer", "minimum": 1, "maximum": 6}, {"type": "null"}]},
                    "checked": {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
                    "language": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                    "icon": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                },
                "additionalProperties": False,
            },
            **_WRITE,
        },
    },
    "mnote.block.delete": {
        "type": "object",
        "required": ["workspaceId", "documentId", "blockIds", *_WRITE_TAIL],
        "properties": {**_PAGE, "blockIds": {"type": "array", "items": _BLOCK_ID}, **_WRITE},
    },
    "mnote.block.move": {
        "type": "object",
        "required": ["workspaceId", "documentId", "blockId", *_WRITE_TAIL],
        "properties": {**_PAGE, "blockId": _BLOCK_ID, **_PLACEMENT, **_WRITE},
    },
}

# The history tools (kernel v2), declared here by hand for the same reason.
HISTORY_TOOLS: dict[str, dict[str, Any]] = {
    "mnote.page.history": {
        "type": "object",
        "required": ["workspaceId", "documentId", *CORRELATION],
        "properties": {
            **_PAGE,
            "filter": {
                "type": "object",
                "properties": {
                    "runId": {"type": "string"},
                    "sessionId": {"type": "string"},
                    "actorId": {"type": "string"},
                },
                "additionalProperties": False,
            },
            "sinceRevision": {"type": "integer", "minimum": 0},
            "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
            "cursor": {"type": "string"},
        },
    },
    "mnote.page.revert": {
        "type": "object",
        "required": ["workspaceId", "documentId", *_WRITE_TAIL],
        "properties": {
            **_PAGE,
            "undoRunId": {"type": "string"},
            "commandId": {"type": "string"},
            "toRevision": {"type": "integer", "minimum": 0},
            **_WRITE,
        },
    },
}

# The search tool (issue 13), declared here by hand for the same reason: it names no page.
SEARCH_TOOLS: dict[str, dict[str, Any]] = {
    "mnote.page.search": {
        "type": "object",
        "required": [*CORRELATION],
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 200},
            "workspaceId": {"type": "string"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
            "cursor": {"type": "string"},
        },
    },
}

SURFACE: dict[str, dict[str, Any]] = {**CONTRACT, **SEARCH_TOOLS, **BLOCK_TOOLS, **HISTORY_TOOLS}
