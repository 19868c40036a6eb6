"""Schema fragments and the one builder every write tool's input schema comes from."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from mnote_mcp.kernel.blocks import SUPPORTED_TYPES

# contract: the contract's schemas as they are (plus additive extensions); strict: the same, in the
# form strict function-calling hosts need (`strict_form`).
SchemaForm = Literal["contract", "strict"]
SCHEMA_FORMS: tuple[SchemaForm, ...] = ("contract", "strict")

# Levels of nesting the advertised block schema spells out (the kernel accepts up to MAX_DEPTH). A
# schema cannot recurse without `$ref`, which strict hosts refuse, so the levels are written out, each
# as lean as it can be: it is sent with every model request (docs/decisions.md, "Lean tool
# definitions"). Deeper trees are still accepted from hosts that do not enforce the schema (the
# kernel validates blocks), and can be built with block.insert.
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
# `"properties": {}`, and a strict provider then accepts only an empty object). Which type takes
# which prop is said once, in the description. The kernel validates every prop of every block.
_PROPS_SAID = "level: heading 1-6; checked: todo; language: code; icon: callout"
_PROP_TYPES: dict[str, str] = {
    "level": "integer",
    "checked": "boolean",
    "language": "string",
    "icon": "string",
}

# In a block (insert, save), a null prop is no prop, so the schema need not say null.
BLOCK_PROPS: dict[str, Any] = {
    "type": "object",
    "properties": {name: {"type": kind} for name, kind in _PROP_TYPES.items()},
}

# In block.update, props merge into the block's, and null resets one: each value may be null.
PROPS: dict[str, Any] = {
    "type": "object",
    "description": "null resets one",
    "properties": {name: _nullable({"type": kind}) for name, kind in _PROP_TYPES.items()},
}


def block_item(levels: int = BLOCK_LEVELS, *, ids: bool = True) -> dict[str, Any]:
    """The schema of one block, its children spelled out `levels - 1` levels deep (no `$ref`), with an
    `id` where `ids` (a new block has none). Ids are the kernel's to check (their pattern is in
    docs/contract.md), as is everything else of a block: the schema says only what a model must know
    to write one."""
    properties: dict[str, Any] = {
        "type": {"type": "string", "enum": list(SUPPORTED_TYPES)},
        "text": {"type": "string"},
        **({"id": {"type": "string"}} if ids else {}),
        "props": BLOCK_PROPS,
    }
    if levels > 1:
        child = block_item(levels - 1)
        child["properties"]["type"] = {"type": "string"}  # the types are listed once, a level up
        properties["children"] = {"type": "array", "items": child}
    return {"type": "object", "required": ["type"], "properties": properties}


BLOCK_ITEM: dict[str, Any] = block_item()
# What a block list says once: ids, children and which type has children.
BLOCKS_SAID = "a new block has no id; children: under list and todo blocks"
# `mnote.page.save`'s blocks where `mnote.block.insert`'s definition (the same model, spelt out) is
# listed beside it: the item left open, the words saying where its shape is.
BLOCKS_AS_INSERTED: dict[str, Any] = {
    "type": "array",
    "items": {"type": "object"},
    "description": "blocks as mnote.block.insert takes them, plus id (keeps that block) and children",
}

# Added to every write tool: optimistic concurrency. `idempotencyKey` takes no words: a model makes a
# new key for a new change unasked, and a key reused for another change is refused with that hint
# (docs/decisions.md, "Definitions no larger than the filesystem server's").
WRITE_EXTENSIONS: dict[str, dict[str, Any]] = {
    "idempotencyKey": {},
    "baseRevision": {"type": "integer", "minimum": 0, "description": "the revision you read"},
}

# What a tool that acts on a page says of how the page is named (tools/titles.py): once, on
# `documentId`, since every tool's definition goes with every model request.
PAGE_NAMING: dict[str, dict[str, Any]] = {
    "documentId": {"description": 'id or title; workspaceId "" if unknown'},
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


def without_null_branches(schema: Any) -> Any:
    """`schema` with each `anyOf [T, null]` written as T (its description kept)."""
    if isinstance(schema, list):
        return [without_null_branches(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    node = {key: without_null_branches(value) for key, value in schema.items()}
    variants = node.get("anyOf")
    if isinstance(variants, list):
        rest = [variant for variant in variants if variant != {"type": "null"}]
        if len(rest) == 1 and len(rest) < len(variants):
            outer = {key: value for key, value in node.items() if key != "anyOf"}
            return {**rest[0], **outer}
    return node


def _nullable_once(schema: dict[str, Any]) -> dict[str, Any]:
    if any(variant == {"type": "null"} for variant in schema.get("anyOf", ())):
        return schema
    return _nullable(schema)
