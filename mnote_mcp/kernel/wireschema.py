"""pydantic's view of the wire forms (kernel/port.py): the markers their annotations name, and the
JSON Schemas derived from them.

Nothing that serves a call imports this module. The runtime protocol checks requests and replies
against the schemas as `kernel/schemas.py` keeps them (generated from here by `python -m
mnote_mcp.tools.docs`, checked current by tests/unit/tools/test_registry.py), and `Wire.from_wire` reads
a form without pydantic: a process that reads wire forms (the reference runtime, `runtime cli` once
per call, a relay) never pays for importing pydantic. Here pydantic derives the schemas, and
tests/unit/kernel/test_port.py holds `to_wire`/`from_wire` to what pydantic makes of each declaration.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any, cast, get_args

from pydantic import Field, JsonValue, SkipValidation, TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue
from pydantic_core import CoreSchema

from mnote_mcp.kernel import port
from mnote_mcp.kernel.port import MAX_INT64, JSONObject

# The names the declarations' annotations use (kernel/port.py's, and the protocol's own TypedDicts):
# pydantic resolves them in the declaring module's namespace, where the module itself imports them
# only for type checking.
_MARKERS: dict[str, object] = {
    "Field": Field,
    "JsonValue": JsonValue,
    "Revision": Annotated[int, Field(ge=0, le=MAX_INT64)],
    "SkipValidation": SkipValidation,
}
_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def adapter(kind: Any) -> TypeAdapter[Any]:
    """pydantic's adapter of a wire type (any type expression), built once."""
    found = _ADAPTERS.get(kind)
    if found is None:
        for declared in (kind, *get_args(kind)):
            vars(sys.modules[getattr(declared, "__module__", port.__name__)]).update(_MARKERS)
        found = _ADAPTERS[kind] = TypeAdapter(kind)
    return found


class _WireSchema(GenerateJsonSchema):
    """pydantic's JSON Schema in the protocol's spelling (see `_tidy`)."""

    def generate(self, schema: CoreSchema, mode: JsonSchemaMode = "validation") -> JsonSchemaValue:
        return cast(JsonSchemaValue, _tidy(super().generate(schema, mode)))


def _tidy(node: JsonValue) -> JsonValue:
    """No titles or descriptions (the prose is docs/runtime-protocol.md), no defaults that are not
    plain values, and `null` allowed as a type where pydantic writes `anyOf: [X, {type: null}]`:
    `{type: [X, "null"]}`, as a hand-written schema would (and as jsonschema reports it: "is not of
    types ...")."""
    if isinstance(node, list):
        return [_tidy(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, JsonValue] = {}
    for key, value in node.items():
        if key in ("properties", "$defs") and isinstance(value, dict):  # names, not keywords
            out[key] = {name: _tidy(schema) for name, schema in value.items()}
        elif key not in ("title", "description") and not (
            key == "default" and isinstance(value, dict | list)
        ):
            out[key] = _tidy(value)
    options = out.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        (other,) = (option for option in options if option != {"type": "null"})
        if isinstance(other, dict) and isinstance(other.get("type"), str):
            del out["anyOf"]
            out = {**other, **out, "type": [other["type"], "null"]}
    return out


def schema_of(declared: Any) -> JSONObject:
    """The JSON Schema of a declared wire type (a `Wire` dataclass, a TypedDict, a list of them)."""
    schema = adapter(declared).json_schema(by_alias=True, schema_generator=_WireSchema)
    return cast(JSONObject, schema)
