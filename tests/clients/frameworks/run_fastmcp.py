"""Runs inside `.ci/frameworks/fastmcp` (fastmcp 4.2.3, mcp 2.3.0), never in the project's environment:
per connection, fastmcp's `Client` over its stdio, streamable HTTP or SSE transport lists the tools and
makes the given calls (`raise_on_error=False`: a refusal is a result to look at). `data` is what fastmcp
made of the structured content against the tool's `outputSchema`.

stdin: {"connections": {"<label>": {..., "calls": [{"name", "arguments"}]}}}
stdout: {"<label>": {"tools": [{name, inputSchema, outputSchema}], "results": [...]}}
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
from typing import Any

fastmcp = importlib.import_module("fastmcp")
transports = importlib.import_module("fastmcp.client.transports")
# Seconds this client waits to connect and for an answer: tests/support/timing.py's patience(60), from the harness.
TIMEOUT = float(os.environ.get("MNOTE_TEST_CLIENT_TIMEOUT", "60"))


def transport_for(connection: dict[str, Any]) -> Any:
    if connection["transport"] == "stdio":
        return transports.StdioTransport(connection["command"], connection["args"], env=connection["env"])
    if connection["transport"] == "http":
        return transports.StreamableHttpTransport(connection["url"], headers=connection["headers"])
    return transports.SSETransport(connection["url"], headers=connection["headers"])


async def run(connection: dict[str, Any], calls: list[dict[str, Any]]) -> dict[str, Any]:
    async with fastmcp.Client(transport_for(connection), timeout=TIMEOUT) as client:
        listed = await client.list_tools()
        results = []
        for call in calls:
            try:
                result = await client.call_tool(call["name"], call["arguments"], raise_on_error=False)
            except Exception as error:  # reported, never hidden
                results.append({"name": call["name"], "thrown": f"{type(error).__name__}: {error}"})
                continue
            results.append(
                {
                    "name": call["name"],
                    "isError": bool(result.is_error),
                    "structuredContent": result.structured_content,
                    "text": [part.text for part in result.content if getattr(part, "type", "") == "text"],
                    "data": result.data is not None,
                }
            )
    return {
        "tools": [
            {"name": tool.name, "inputSchema": tool.inputSchema, "outputSchema": tool.outputSchema}
            for tool in listed
        ],
        "results": results,
    }


async def main() -> None:
    job = json.load(sys.stdin)
    answers = {label: await run(conn, conn["calls"]) for label, conn in job["connections"].items()}
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
