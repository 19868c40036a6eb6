"""JSON Schemas derived from the types that declare a tool's result (`tools/outputs.py`) and
arguments (`tools/inputs.py`), by pydantic as the runtime protocol's are (`kernel/wireschema.py`),
in the spelling of the hand-written schemas beside them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from functools import cache
from typing import TYPE_CHECKING, cast

from mnote_mcp.kernel.port import JSONObject

if TYPE_CHECKING:
    from pydantic import JsonValue


def _inline(node: JsonValue, defs: Mapping[str, JsonValue], keep: frozenset[str], lean: bool) -> JsonValue:
    """`node` with every `$ref` to a definition not in `keep` replaced by the definition itself, said
    short: no `additionalProperties: {}` (what an object allows anyway), an `anyOf` of bare types as
    one list of types, and where `lean`, no `type` beside the values of `const` or `enum` (an input
    schema keeps it: strict hosts want a `type` on every property)."""
    if isinstance(node, list):
        return [_inline(item, defs, keep, lean) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] not in keep:
        return _inline(defs[ref[8:]], defs, keep, lean)
    out: dict[str, JsonValue] = {}
    for key, value in node.items():
        if key == "properties" and isinstance(value, dict):  # names, not keywords
            out[key] = {name: _inline(sub, defs, keep, lean) for name, sub in value.items()}
        else:
            out[key] = _inline(value, defs, keep, lean)
    if out.get("additionalProperties") == {}:
        del out["additionalProperties"]
    if lean and ("const" in out or "enum" in out):
        out.pop("type", None)  # the values say it
    variants = out.get("anyOf")
    if isinstance(variants, list) and all(isinstance(v, dict) and set(v) == {"type"} for v in variants):
        del out["anyOf"]
        out["type"] = [
            kind for variant in variants if isinstance(variant, dict) for kind in _types(variant["type"])
        ]
    return out


def _types(kind: JsonValue) -> list[JsonValue]:
    return kind if isinstance(kind, list) else [kind]


def _recursive(defs: Mapping[str, JsonValue]) -> frozenset[str]:
    """The definitions that refer to themselves (a block's children): only they stay as `$defs`."""
    return frozenset(name for name, schema in defs.items() if f'"#/$defs/{name}"' in json.dumps(schema))


@cache
def derived_schema(declared: object, *, lean: bool = True) -> JSONObject:
    """The JSON Schema of a declared type: no titles or descriptions, `null` as a type, every
    definition inlined but a recursive one (left in `$defs`, which an output schema lifts to its
    root, where `#/$defs/...` points)."""
    from pydantic import JsonValue

    from mnote_mcp.kernel.wireschema import schema_of

    # Names the declarations' modules import only for type checking, as kernel/wireschema.py gives them.
    for module in (declared.__module__, "mnote_mcp.vocabulary.messages", "mnote_mcp.kernel.port"):
        vars(sys.modules[module]).setdefault("JsonValue", JsonValue)
    schema = dict(schema_of(declared))
    defs = schema.pop("$defs", None)
    defs = defs if isinstance(defs, dict) else {}
    keep = _recursive(defs)
    inlined = cast(JSONObject, _inline(schema, defs, keep, lean))
    if keep:
        inlined["$defs"] = {name: _inline(defs[name], defs, keep, lean) for name in sorted(keep)}
    return inlined


def declared_schema(declared: object, *, lean: bool = True) -> JSONObject:
    """`derived_schema`, as generated into `tools/typedschemas.py` (no pydantic at start), or derived
    now for a type not generated yet (a new tool's, until `python -m mnote_mcp.tools.docs` runs)."""
    from mnote_mcp.tools.typedschemas import TYPED_SCHEMAS

    kept = TYPED_SCHEMAS.get(getattr(declared, "__name__", ""))
    return kept if kept is not None else derived_schema(declared, lean=lean)


TYPED_BEGIN = "# <!-- generated: typed schemas, by `python -m mnote_mcp.tools.docs`; do not edit -->"
TYPED_END = "# <!-- end of generated: typed schemas -->"


def typed_schemas_module(outputs: Iterable[object], arguments: Iterable[object]) -> str:
    """tools/typedschemas.py's block: each result type's schema (lean) and each arguments type's."""
    derived = {getattr(kind, "__name__", ""): derived_schema(kind) for kind in outputs}
    derived |= {getattr(kind, "__name__", ""): derived_schema(kind, lean=False) for kind in arguments}
    rows = ",\n".join(
        f"{json.dumps(name)}: {json.dumps(schema, ensure_ascii=False)}"
        for name, schema in sorted(derived.items())
    )
    return f'{TYPED_BEGIN}\n_SCHEMAS = r"""\n{{\n{rows}\n}}\n"""\n{TYPED_END}'
