"""How much of a model's context a tool's definition takes, measured the way an agent pays for it.

A host sends every tool's definition with every model request: its name, description and input
schema, as a function definition (the output schema and annotations never reach the model). What the
model reads of a tool is that definition as the host builds it, here Hermes 0.19.0, the host this
server is built for: `mcp__<server key>__<name, [A-Za-z0-9_] only>`, the description, and the input
schema after Hermes's repairs (`tools/mcp_tool.py` `_normalize_mcp_input_schema` and
`tools/schema_sanitizer.py`: a nullable `anyOf [T, null]` collapsed to T with `nullable: true`,
`properties: {}` added to an object without any, a `required` naming no property dropped), in
either schema form. tests/clients/test_hermes.py holds this measure to the definitions Hermes itself
builds; tests/unit/tools/test_catalog.py holds every tool to its `SizeBudget`, and the README's size
table is generated from both (`tools/docs.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from mnote_mcp.tools.schemas import SchemaForm

# The server key of the shipped Hermes examples: the model sees `mcp__mnote__mnote_page_get`.
SERVER_KEY = "mnote"
_NOT_NAME = re.compile(r"[^A-Za-z0-9_]")
_CARRIED = ("title", "description", "default", "examples")  # kept from a collapsed union's outer node


@dataclass(frozen=True, slots=True)
class SizeBudget:
    """Bytes the tool's definition may take as a model is given it (`model_bytes`), in each schema
    form. A tripwire against bloat, set a little above the tool's size when it was declared; raising
    it is a decision, visible in the diff."""

    contract: int
    strict: int

    def of(self, form: SchemaForm) -> int:
        return self.contract if form == "contract" else self.strict


def model_name(tool_name: str, server_key: str = SERVER_KEY) -> str:
    """The name Hermes gives the model (`mcp_prefixed_tool_name`)."""
    return f"mcp__{_NOT_NAME.sub('_', server_key)}__{_NOT_NAME.sub('_', tool_name)}"


def hermes_schema(schema: Any) -> Any:
    """An input schema as Hermes 0.19.0 hands it to the model (the repairs that apply to ours)."""
    if isinstance(schema, list):
        return [hermes_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    node = {key: hermes_schema(value) for key, value in schema.items()}
    variants = node.get("anyOf")
    if isinstance(variants, list):
        rest = [v for v in variants if not (isinstance(v, dict) and v.get("type") == "null")]
        if len(rest) == 1 and len(rest) != len(variants):
            replacement = dict(rest[0]) if isinstance(rest[0], dict) else {}
            replacement.setdefault("nullable", True)
            for key in _CARRIED:
                if key in node and key not in replacement:
                    replacement[key] = node[key]
            return hermes_schema(replacement)
    if node.get("type") == "object":
        if not isinstance(node.get("properties"), dict):
            node["properties"] = {}
        if isinstance(node.get("required"), list):
            required = [name for name in node["required"] if name in node["properties"]]
            if required:
                node["required"] = required
            else:
                del node["required"]
    return node


def function_definition(name: str, description: str, input_schema: dict[str, Any]) -> dict[str, Any]:
    """What Hermes gives the model for one tool (`_convert_mcp_schema`, in the OpenAI tool format)."""
    return {
        "type": "function",
        "function": {
            "name": model_name(name),
            "description": description,
            "parameters": hermes_schema(input_schema),
        },
    }


def definition_bytes(definition: dict[str, Any]) -> int:
    """Compact JSON, UTF-8: how the definitions are counted against the filesystem server's."""
    return len(orjson.dumps(definition))


# The tools Hermes adds for a server that has resources and prompts (`_build_utility_schemas`), as it
# words them: mnote has both, so its model is sent all four with every request.
HERMES_UTILITY_TOOLS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    (
        "list_resources",
        "List available resources from MCP server '{key}'",
        {"type": "object", "properties": {}},
    ),
    (
        "read_resource",
        "Read a resource by URI from MCP server '{key}'",
        {
            "type": "object",
            "properties": {"uri": {"type": "string", "description": "URI of the resource to read"}},
            "required": ["uri"],
        },
    ),
    (
        "list_prompts",
        "List available prompts from MCP server '{key}'",
        {"type": "object", "properties": {}},
    ),
    (
        "get_prompt",
        "Get a prompt by name from MCP server '{key}'",
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "Name of the prompt to retrieve"},
                "arguments": {
                    "type": "object",
                    "description": "Optional arguments to pass to the prompt",
                    "properties": {},
                    "additionalProperties": True,
                },
            },
            "required": ["name"],
        },
    ),
)


def utility_tool_bytes(server_key: str = SERVER_KEY) -> int:
    """The bytes of Hermes's resource and prompt tools for this server: sent with every request too."""
    return sum(
        definition_bytes(
            {
                "type": "function",
                "function": {
                    "name": model_name(name, server_key),
                    "description": description.format(key=server_key),
                    "parameters": parameters,
                },
            }
        )
        for name, description, parameters in HERMES_UTILITY_TOOLS
    )
