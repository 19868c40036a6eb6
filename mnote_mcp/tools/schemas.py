"""Schema fragments and the one builder every write tool's input schema comes from."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from mnote_mcp.kernel.blocks import BLOCK_ID_PATTERN, SUPPORTED_TYPES

# contract: the contract's schemas as they are (plus additive extensions); strict: the same, in the
# form strict function-calling hosts need (`strict_form`).
SchemaForm = Literal["contract", "strict"]
SCHEMA_FORMS: tuple[SchemaForm, ...] = ("contract", "strict")

# Levels of nesting the advertised block schema spells out (the kernel accepts up to MAX_DEPTH). A
# schema cannot recurse without `$ref`, which strict hosts refuse, so the levels are written out: each
# costs ~0.6 KB of `tools/list` per tool that takes blocks. Deeper trees are still accepted from hosts
# that do not enforce the schema (the kernel validates blocks), and can be built with block.insert.
BLOCK_LEVELS = 2


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """`anyOf` of single types (portable to one-`type` dialects), the description kept outside."""
    inner = {key: value for key, value in schema.items() if key != "description"}
    nullable: dict[str, Any] = {"anyOf": [inner, {"type": "null"}]}
    if "description" in schema:
        nullable["description"] = schema["description"]
    return nullable


# Every prop of every block type, declared: an object with no `properties` is "anything" to a strict
# host, which then either refuses the tool (OpenAI Agents SDK) or closes it to `{}` (Hermes adds
# `"properties": {}`, and a strict provider then accepts only an empty object). Values may be null:
# in block.update null resets a prop; in a block, null is the same as leaving the prop out.
PROPS: dict[str, Any] = {
    "type": "object",
    "description": "Only the block type's own prop; null resets it.",
    "properties": {
        "level": _nullable({"type": "integer", "minimum": 1, "maximum": 6, "description": "heading: 1-6"}),
        "checked": _nullable({"type": "boolean", "description": "todo"}),
        "language": _nullable({"type": "string", "description": "code"}),
        "icon": _nullable({"type": "string", "description": "callout"}),
    },
    "additionalProperties": False,
}


def block_item(levels: int = BLOCK_LEVELS) -> dict[str, Any]:
    """The schema of one block, its children spelled out `levels - 1` levels deep (no `$ref`)."""
    properties: dict[str, Any] = {
        "id": {"type": "string", "pattern": BLOCK_ID_PATTERN},
        "type": {"type": "string", "enum": list(SUPPORTED_TYPES)},
        "text": {"type": "string"},
        "props": PROPS,
    }
    if levels > 1:
        properties["children"] = {
            "type": "array",
            "items": block_item(levels - 1),
            "description": "Nested blocks; list and todo items only.",
        }
    return {"type": "object", "required": ["type"], "additionalProperties": False, "properties": properties}


BLOCK_ITEM: dict[str, Any] = block_item()

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


# Keywords a strict host refuses or drops (`default`; length and count limits on the OpenAI profile of
# pydantic-ai): the strict form states them in the description instead, and the server still checks them.
_STRICT_UNSUPPORTED = ("default", "minLength", "maxLength", "maxItems")


def strict_form(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The strict-compatible form of an input schema (`--schema-form strict`).

    What OpenAI-style strict function calling requires, done by the server so that no host's converter
    has to guess: every object closed (`additionalProperties: false`) and every property required,
    the optional ones nullable (`anyOf [T, null]`; null means "not given", and is accepted in every
    form), no `default`, no length limits, no `$ref`. A call valid in the contract form is valid here
    once its nulls are left out, which is what the server does before it validates.
    """
    converted: dict[str, Any] = {
        key: value for key, value in schema.items() if key not in _STRICT_UNSUPPORTED
    }
    notes = [f"{key} {json.dumps(schema[key])}" for key in _STRICT_UNSUPPORTED if key in schema]
    if notes:
        described = str(schema.get("description", "")).rstrip()
        converted["description"] = f"{described} ({', '.join(notes)})".strip()
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        required = set(schema.get("required", ()))
        converted["properties"] = {
            name: strict_form(sub) if name in required else _nullable_once(strict_form(sub))
            for name, sub in properties.items()
        }
        converted["required"] = list(properties)
        converted["additionalProperties"] = False
    if isinstance(schema.get("items"), Mapping):
        converted["items"] = strict_form(schema["items"])
    if isinstance(schema.get("anyOf"), list):
        converted["anyOf"] = [strict_form(variant) for variant in schema["anyOf"]]
    return converted


def _nullable_once(schema: dict[str, Any]) -> dict[str, Any]:
    if any(variant == {"type": "null"} for variant in schema.get("anyOf", ())):
        return schema
    return _nullable(schema)
