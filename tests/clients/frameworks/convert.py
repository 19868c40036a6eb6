"""Runs inside one framework's own virtual environment (`.ci/frameworks/<name>`), never in the project's.

Reads `{"<listing>": [<MCP tool as listed>, ...], ...}` on stdin (one listing per server setting: a
framework's import alone takes seconds) and prints, per listing and tool, what the framework's own
strict-schema code makes of its input schema, through the framework's entry points:

- openai-agents: `agents.mcp.util.MCPUtil.to_function_tool(tool, server, convert_schemas_to_strict=True)`,
  the path every MCP tool takes into an agent; it falls back to a non-strict tool when
  `ensure_strict_json_schema` refuses the schema (`strict` false in the answer, with the reason).
- pydantic-ai: `pydantic_ai.models._customize_tool_def` with the OpenAI profiles' transformers (the
  OpenAI provider's, and the one OpenAI-compatible endpoints get), first with `strict=None` (what
  `MCPToolset` tools carry: strict if the schema is strict-compatible as it is), then `strict=True`
  (forced; an error is a refusal).

Answer: `{"<listing>": {"<tool>": {"<converter>": {"strict": bool, "schema": {...}, "error": str | null}}}}`.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import sys
from typing import Any


def _openai_agents(tools: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    mcp_types = importlib.import_module("mcp.types")
    util = importlib.import_module("agents.mcp.util")
    servers = importlib.import_module("agents.mcp")
    reasons: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            reasons.append(record.getMessage())

    logging.getLogger("openai.agents").addHandler(Capture())
    logging.getLogger("openai.agents").setLevel(logging.INFO)
    server = servers.MCPServerStdio(params={"command": "unused"}, name="mnote")
    answers: dict[str, dict[str, Any]] = {}
    for tool in tools:
        reasons.clear()
        function_tool = util.MCPUtil.to_function_tool(
            mcp_types.Tool.model_validate(tool), server, convert_schemas_to_strict=True
        )
        strict = bool(function_tool.strict_json_schema)
        answers[tool["name"]] = {
            "strict": strict,
            "schema": function_tool.params_json_schema,
            "error": None if strict else "; ".join(reasons) or "not strict",
            "name": function_tool.name,
        }
    return answers


def _pydantic_ai(tools: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    models = importlib.import_module("pydantic_ai.models")
    profiles = importlib.import_module("pydantic_ai.profiles.openai")
    tool_definition = importlib.import_module("pydantic_ai.tools").ToolDefinition
    transformers = {
        "openai": profiles._OpenAIJsonSchemaTransformer,
        "openai-compatible": profiles.OpenAIJsonSchemaTransformer,
    }
    answers: dict[str, dict[str, Any]] = {}
    for tool in tools:
        for label, transformer in transformers.items():
            for strict in (None, True):
                definition = tool_definition(
                    name=tool["name"],
                    description=tool.get("description"),
                    parameters_json_schema=json.loads(json.dumps(tool["inputSchema"])),
                    strict=strict,
                )
                key = f"{label}/{'auto' if strict is None else 'forced'}"
                try:
                    customized = models._customize_tool_def(transformer, definition)
                except Exception as error:  # a refusal is the answer
                    answers.setdefault(tool["name"], {})[key] = {
                        "strict": False,
                        "schema": None,
                        "error": f"{type(error).__name__}: {error}",
                    }
                    continue
                answers.setdefault(tool["name"], {})[key] = {
                    "strict": bool(customized.strict),
                    "schema": customized.parameters_json_schema,
                    "error": None if customized.strict else "not strict-compatible as it is",
                }
    return answers


def _convert(framework: str, tools: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    if framework == "openai-agents":
        return {name: {"openai-agents": answer} for name, answer in _openai_agents(tools).items()}
    if framework == "pydantic-ai":
        return _pydantic_ai(tools)
    raise SystemExit(f"no strict converter for {framework}")


def main() -> None:
    framework = sys.argv[1]
    listings = json.load(sys.stdin)
    json.dump({label: _convert(framework, tools) for label, tools in listings.items()}, sys.stdout)


if __name__ == "__main__":
    asyncio.run(asyncio.sleep(0))
    main()
