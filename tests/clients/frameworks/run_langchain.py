"""Runs inside `.ci/frameworks/langchain` (langchain-mcp-adapters 0.3.2 with mcp 1.30.0, langchain-openai),
never in the project's environment: per connection, the adapters' tools bound to `ChatOpenAI` with
`strict=True` (what a LangChain agent does with them) and a plain agent loop against the scripted model.
The configuration is docs/clients.md's snippet: one session kept open (`client.session(...)`), the
server run with `--tool-names underscore --schema-form strict`. A connection with `"per_call": true`
uses `client.get_tools()` instead, which opens a new session (a new stdio server) for every call.

A connection with `"person": "<answer>"` goes on after the model's answer: the person replies in the
conversation (a human message), and the loop runs again.

stdin: {"model_url": ..., "connections": {"<label>": {"transport": "stdio"|"http"|"sse", ...}}}
stdout: {"<label>": {"final": <the run's last answer>, "asked": <the answer before the person's>}}
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from contextlib import AsyncExitStack
from typing import Any

adapters = importlib.import_module("langchain_mcp_adapters.client")
adapter_tools = importlib.import_module("langchain_mcp_adapters.tools")
messages = importlib.import_module("langchain_core.messages")
tools_module = importlib.import_module("langchain_core.tools")
chat_openai = importlib.import_module("langchain_openai").ChatOpenAI


def server_config(connection: dict[str, Any]) -> dict[str, Any]:
    if connection["transport"] == "stdio":
        return {
            "transport": "stdio",
            "command": connection["command"],
            "args": connection["args"],
            "env": connection["env"],
        }
    transport = "streamable_http" if connection["transport"] == "http" else "sse"
    return {"transport": transport, "url": connection["url"], "headers": connection["headers"]}


async def run(label: str, connection: dict[str, Any], model_url: str) -> dict[str, Any]:
    client = adapters.MultiServerMCPClient({"mnote": server_config(connection)})
    async with AsyncExitStack() as stack:
        if connection.get("per_call"):
            tools = await client.get_tools()
        else:
            session = await stack.enter_async_context(client.session("mnote"))
            tools = await adapter_tools.load_mcp_tools(session)
        model = chat_openai(model="scripted-model", base_url=model_url, api_key="stub").bind_tools(
            tools, strict=True
        )
        by_name = {tool.name: tool for tool in tools}
        history: list[Any] = [messages.HumanMessage(f"run {label}")]
        person, asked = connection.get("person"), None
        for _ in range(24):
            answer = await model.ainvoke(history)
            history.append(answer)
            if not answer.tool_calls:
                if person is None:
                    return {"final": answer.content, "asked": asked if asked is not None else answer.content}
                asked, person = answer.content, None
                history.append(messages.HumanMessage(connection["person"]))
                continue
            for call in answer.tool_calls:
                try:
                    history.append(await by_name[call["name"]].ainvoke(call))
                except tools_module.ToolException as error:  # what LangGraph's ToolNode does with it
                    history.append(
                        messages.ToolMessage(content=str(error), tool_call_id=call["id"], status="error")
                    )
    return {"final": None}


async def main() -> None:
    job = json.load(sys.stdin)
    answers = {label: await run(label, conn, job["model_url"]) for label, conn in job["connections"].items()}
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
