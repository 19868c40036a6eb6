"""Runs inside `.ci/frameworks/openai-agents` (openai-agents 0.24.0, mcp 2.3.0), never in the project's
environment: one agent run per connection, through the SDK's own MCP servers and Runner, against the
scripted model. The configuration is docs/clients.md's snippet: strict schemas converted by the SDK
(`convert_schemas_to_strict=True`), the server run with `--tool-names underscore --schema-form strict`.

A connection with `"person": "<answer>"` goes on after the run's answer: the person replies in the
conversation (a second run with the first one's items), as a host lets its user answer a question.

stdin: {"model_url": ..., "connections": {"<label>": {"transport": "stdio"|"http"|"sse", ...}}}
stdout: {"<label>": {"final": <the run's final output>, "asked": <the answer before the person's>}}
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
from typing import Any

agents = importlib.import_module("agents")
mcp_servers = importlib.import_module("agents.mcp")
openai = importlib.import_module("openai")
# Seconds this client waits to connect and for an answer: tests/support/timing.py's patience(60), from the harness.
TIMEOUT = float(os.environ.get("MNOTE_TEST_CLIENT_TIMEOUT", "60"))


def server_for(connection: dict[str, Any]) -> Any:
    transport = connection["transport"]
    if transport == "stdio":
        params = {"command": connection["command"], "args": connection["args"], "env": connection["env"]}
        return mcp_servers.MCPServerStdio(params=params, name="mnote", client_session_timeout_seconds=TIMEOUT)
    params = {"url": connection["url"], "headers": connection["headers"]}
    if transport == "http":
        return mcp_servers.MCPServerStreamableHttp(
            params=params, name="mnote", client_session_timeout_seconds=TIMEOUT
        )
    return mcp_servers.MCPServerSse(params=params, name="mnote", client_session_timeout_seconds=TIMEOUT)


async def run(label: str, connection: dict[str, Any], model_url: str) -> dict[str, Any]:
    model = agents.OpenAIChatCompletionsModel(
        model="scripted-model", openai_client=openai.AsyncOpenAI(base_url=model_url, api_key="stub")
    )
    async with server_for(connection) as server:
        agent = agents.Agent(
            name="mnote",
            instructions="Edit mnote pages.",
            mcp_servers=[server],
            mcp_config={"convert_schemas_to_strict": True},
            model=model,
        )
        result = await agents.Runner.run(agent, f"run {label}", max_turns=12)
        asked = result.final_output
        if connection.get("person"):
            answer = [*result.to_input_list(), {"role": "user", "content": connection["person"]}]
            result = await agents.Runner.run(agent, answer, max_turns=12)
    return {"final": result.final_output, "asked": asked}


async def main() -> None:
    agents.set_tracing_disabled(True)  # no trace export: nothing leaves the machine
    job = json.load(sys.stdin)
    answers = {label: await run(label, conn, job["model_url"]) for label, conn in job["connections"].items()}
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
