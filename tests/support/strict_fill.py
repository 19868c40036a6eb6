"""What a strict host sends: every field of the schema filled, the ones the model means to leave out
with a placeholder.

Strict function calling (OpenAI's `strict: true`, which the OpenAI Agents SDK and pydantic-ai turn on)
makes every property required and forbids any other, so a model cannot omit an optional field: it
sends null where the schema allows it, or an empty string or list. `fill` does that to a call:

- `"null"`: every optional field the call leaves out is null (the strict form offers null for all);
- `"empty"`: strings the model leaves out are "", arrays [], objects filled the same way inside, and
  the rest null; except the fields where empty is a value (a block's text "" clears it, an empty
  language removes it), which a model leaving them alone sends as null.

Blocks inside arrays are filled too (their `id`, `text`, `props` with every key, `children`), as a
strict host forces them. The filled call must then do exactly what the call did without them.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any, Literal

Placeholder = Literal["null", "empty"]
PLACEHOLDERS: tuple[Placeholder, ...] = ("null", "empty")
# Where "" is a value, not an absence: a model leaving these alone sends null. (Property names, at any
# depth: a block's `text`, the `props` of block.update, whose "" values reset a prop.)
EMPTY_IS_A_VALUE = frozenset({"text", "props"})


def fill(schema: Mapping[str, Any], arguments: Mapping[str, Any], placeholder: Placeholder) -> dict[str, Any]:
    """`arguments` with every property of the (strict-form) `schema` present."""
    filled = _fill_object(schema, dict(copy.deepcopy(arguments)), placeholder)
    assert isinstance(filled, dict)
    return filled


def _variants(schema: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [variant for variant in schema.get("anyOf", [schema]) if variant.get("type") != "null"]


def _fill_object(
    schema: Mapping[str, Any], value: dict[str, Any], placeholder: Placeholder
) -> dict[str, Any]:
    for name, sub in schema.get("properties", {}).items():
        if name in value:
            value[name] = _fill_given(sub, value[name], placeholder)
        else:
            value[name] = _left_out(name, sub, placeholder)
    return value


def _fill_given(schema: Mapping[str, Any], value: Any, placeholder: Placeholder) -> Any:
    """A value the call gives: objects inside it (blocks, props) get their missing fields too."""
    for variant in _variants(schema):
        if variant.get("type") == "object" and isinstance(value, dict):
            return _fill_object(variant, value, placeholder)
        if (
            variant.get("type") == "array"
            and isinstance(value, list)
            and isinstance(variant.get("items"), dict)
        ):
            return [_fill_given(variant["items"], item, placeholder) for item in value]
    return value


def _left_out(name: str, schema: Mapping[str, Any], placeholder: Placeholder) -> Any:
    nullable = any(variant.get("type") == "null" for variant in schema.get("anyOf", []))
    assert nullable, f"{name}: an optional field the strict form does not let a model leave out"
    if placeholder == "null" or name in EMPTY_IS_A_VALUE:
        return None
    (variant,) = _variants(schema)
    kind = variant.get("type")
    if kind == "string" and "enum" not in variant and re.search(variant.get("pattern", ""), ""):
        return ""  # where the schema lets the model send it
    if kind == "array":
        return []
    if kind == "object":
        return _fill_object(variant, {}, placeholder)
    return None  # integers, booleans and enums have no empty value: null
