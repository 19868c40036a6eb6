"""Runs inside `.ci/frameworks/pydantic-ai` (pydantic-ai-slim 2.68 with fastmcp 4.2.3 and mcp 2.3.0), never
in the project's environment: one agent run per connection, through `MCPToolset` and `Agent`, against
the scripted model on the OpenAI provider. The configuration is docs/clients.md's snippet: the server
run with `--tool-names underscore --schema-form strict`, which pydantic-ai finds strict by itself.

A connection with `"person": "<answer>"` goes on after the run's answer: the person replies in the
conversation (a second run with the first one's messages as its history).

stdin: {"model_url": ..., "connections": {"<label>": {"transport": "stdio"|"http"|"sse", ...}}}
stdout: {"<label>": {"final": <the run's output>, "asked": <the answer before the person's>}}
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
from typing import Any

pydantic_ai = importlib.import_module("pydantic_ai")
pydantic_mcp = importlib.import_module("pydantic_ai.mcp")
openai_models = importlib.import_module("pydantic_ai.models.openai")
openai_provider = importlib.import_module("pydantic_ai.providers.openai")
transports = importlib.import_module("fastmcp.client.transports")
# Seconds this client waits to connect and for an answer: tests/support/timing.py's patience(60), from the harness.
TIMEOUT = float(os.environ.get("MNOTE_TEST_CLIENT_TIMEOUT", "60"))


def toolset_for(connection: dict[str, Any]) -> Any:
    if connection["transport"] == "stdio":
        stdio = transports.StdioTransport(connection["command"], connection["args"], env=connection["env"])
        return pydantic_mcp.MCPToolset(stdio, init_timeout=TIMEOUT, read_timeout=TIMEOUT)
    # fastmcp picks SSE for a URL ending in /sse, streamable HTTP otherwise
    return pydantic_mcp.MCPToolset(
        connection["url"], headers=connection["headers"], init_timeout=TIMEOUT, read_timeout=TIMEOUT
    )


async def run(label: str, connection: dict[str, Any], model_url: str) -> dict[str, Any]:
    model = openai_models.OpenAIChatModel(
        "scripted-model", provider=openai_provider.OpenAIProvider(base_url=model_url, api_key="stub")
    )
    agent = pydantic_ai.Agent(model, toolsets=[toolset_for(connection)])
    async with agent:
        result = await agent.run(f"run {label}")
        asked = result.output
        if connection.get("person"):
            result = await agent.run(connection["person"], message_history=result.all_messages())
    return {"final": result.output, "asked": asked}


async def main() -> None:
    job = json.load(sys.stdin)
    answers = {label: await run(label, conn, job["model_url"]) for label, conn in job["connections"].items()}
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
