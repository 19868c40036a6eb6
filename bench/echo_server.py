"""The floor: a minimal low-level MCP server on the same SDK with one echo tool, over stdio or HTTP.

Written the way a minimal server is usually written (the SDK's own examples), so that the ratios in
docs/performance.md compare mnote-mcp with what any Python MCP server on this SDK pays. With `size`,
it answers as many characters as mnote-mcp's read answer holds, so both move the same bytes.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp.types as types
from mcp.server import Server

ECHO = types.Tool(
    name="echo",
    title="Echo",
    description="Return `text`, or a text of `size` characters.",
    input_schema={
        "type": "object",
        "properties": {"text": {"type": "string"}, "size": {"type": "integer", "minimum": 0}},
    },
    annotations=types.ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True),
)


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[ECHO])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
    text = str(arguments["text"]) if "text" in arguments else "x" * int(arguments.get("size", 0))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


server: Server[Any] = Server("echo", version="1", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio() -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def serve_http(port: int) -> None:
    import uvicorn

    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        serve_http(int(sys.argv[2]))
    else:
        anyio.run(serve_stdio)
