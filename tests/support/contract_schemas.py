"""The input schemas of tool contract v1, copied by hand from ../shared/contract (the original).

Kept apart from the code's own copy on purpose: the tests compare the two. The project's own tools
(search, blocks, history) are held to their declared `contract_schema` and to their snapshots
(tests/unit/tools/test_catalog.py), and need nothing here.
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
