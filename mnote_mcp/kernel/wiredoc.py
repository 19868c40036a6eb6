"""docs/runtime-protocol.md's "Schemas" section, rendered from `protocol.OPERATIONS`.

The schemas a runtime validates requests with and a relay validates replies with are the ones printed
there: each derived from its declaration in kernel/port.py. `python -m mnote_mcp.tools.docs` rewrites
the section; tests/test_declarations.py fails while it is stale.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import JsonValue

from mnote_mcp.kernel.port import JSONObject
from mnote_mcp.kernel.protocol import CLI_REQUEST, ERROR, OPERATIONS, WireForm

SCHEMAS_BEGIN = "# <!-- generated: wire schemas, by `python -m mnote_mcp.tools.docs`; do not edit -->"
SCHEMAS_END = "# <!-- end of generated: wire schemas -->"


def _forms() -> list[WireForm[Any]]:
    return [CLI_REQUEST, ERROR, *(form for op in OPERATIONS.values() for form in (op.request, op.answer))]


def schemas_module() -> str:
    """kernel/schemas.py's block: every wire form's derived schema, one form per line."""
    derived = {form.name: form.derived_schema for form in _forms()}
    rows = ",\n".join(f"{_line(name)}: {_line(schema)}" for name, schema in sorted(derived.items()))
    return f'{SCHEMAS_BEGIN}\n_SCHEMAS = r"""\n{{\n{rows}\n}}\n"""\n{SCHEMAS_END}'


def _line(value: JsonValue) -> str:
    return json.dumps(value, ensure_ascii=False)


def _block(schema: JSONObject) -> str:
    """A schema with one property per line; `$defs` are listed once for the page."""
    body = {key: value for key, value in schema.items() if key != "$defs"}
    properties = body.pop("properties", None)
    if not isinstance(properties, dict):
        return _line(body)
    head = _line(body)[:-1]
    rows = ",\n".join(f"  {_line(name)}: {_line(value)}" for name, value in properties.items())
    return f'{head}{", " if body else ""}"properties": {{\n{rows}\n}}}}'


def _defs(schemas: list[JSONObject]) -> dict[str, JSONObject]:
    found: dict[str, JSONObject] = {}
    for schema in schemas:
        defs = schema.get("$defs")
        if isinstance(defs, dict):
            found.update({name: value for name, value in defs.items() if isinstance(value, dict)})
    return dict(sorted(found.items()))


def _json(text: str) -> list[str]:
    return ["```json", text, "```"]


def schemas_markdown() -> str:
    lines: list[str] = []
    schemas = [CLI_REQUEST.derived_schema, ERROR.derived_schema]
    for op in OPERATIONS.values():
        where = f'under `"{op.carrier}"`' if op.carrier else "its fields at the top level"
        lines += ["", f"#### `{op.name}`: `{op.method} {op.path}`", ""]
        lines += [f"Request (the {'body' if op.carrier else 'query string'}; mnote-cli: {where}):", ""]
        lines += _json(_block(op.request.derived_schema))
        lines += ["", f'Answer (HTTP: under `"{op.reply_key}"`; mnote-cli: `value`):', ""]
        lines += _json(_block(op.answer.derived_schema))
        schemas += [op.request.derived_schema, op.answer.derived_schema]
    lines += ["", "#### Error body, mnote-cli request", ""]
    lines += _json(f"{_block(ERROR.derived_schema)}\n{_block(CLI_REQUEST.derived_schema)}")
    lines += ["", '#### Definitions (`"$ref": "#/$defs/NAME"`)', ""]
    lines += _json("\n".join(f"{_line(name)}: {_block(schema)}" for name, schema in _defs(schemas).items()))
    return "\n".join(lines[1:])
