"""The floor: a minimal low-level MCP server on the same SDK, over stdio or HTTP.

Written the way a minimal server is usually written (the SDK's own examples, the standard json
module), so that the ratios in docs/performance.md compare mnote-mcp with what any Python MCP server
on this SDK pays. Two tools:

- `echo_page {blocks}` answers a page-like JSON object of that many blocks the way a tool with an
  `outputSchema` must (structuredContent plus the same JSON as text): the same protocol work mnote's
  envelope costs, without any of mnote's own work. This is the floor the targets compare with.
- `echo {size}` answers plain text of that many characters: the bare minimum, reported alongside.

`python bench/echo_server.py` serves stdio through the SDK's `stdio_server()`; `... mnote-stdio`
through mnote's own stdio transport (and uvloop when installed), as `mnote-mcp` serves;
`... http PORT` streamable HTTP (`http-stateless PORT` without sessions).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import mcp.types as types
from mcp.server import Server

_HINTS = types.ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
TOOLS = [
    types.Tool(
        name="echo",
        description="Return a text of `size` characters.",
        input_schema={"type": "object", "properties": {"size": {"type": "integer", "minimum": 0}}},
        annotations=_HINTS,
    ),
    types.Tool(
        name="echo_page",
        description="Return a page-like object of `blocks` blocks, as structured content and as text.",
        input_schema={"type": "object", "properties": {"blocks": {"type": "integer", "minimum": 0}}},
        output_schema={"type": "object", "required": ["ok", "result"]},
        annotations=_HINTS,
    ),
]


def page(blocks: int) -> dict[str, Any]:
    body = [
        {"id": f"b{n}", "type": "paragraph", "text": f"Block {n}: the plan for step {n} of the project."}
        for n in range(blocks)
    ]
    return {"ok": True, "toolName": "echo_page", "result": {"title": "Echo", "revision": 1, "blocks": body}}


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
    if params.name == "echo_page":
        structured = page(int(arguments.get("blocks", 0)))
        text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=structured
        )
    return types.CallToolResult(
        content=[types.TextContent(type="text", text="x" * int(arguments.get("size", 0)))]
    )


server: Server[Any] = Server("echo", version="1", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio() -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_mnote_stdio() -> None:
    """The same server through mnote's stdio transport (the second floor: the transport's gain apart)."""
    from mnote_mcp.transports.stdio import stdio_transport

    async with stdio_transport() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def serve_http(port: int, stateless: bool = False) -> None:
    import uvicorn

    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1", stateless_http=stateless)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] in ("http", "http-stateless"):
        serve_http(int(sys.argv[2]), stateless=sys.argv[1] == "http-stateless")
    elif len(sys.argv) > 1 and sys.argv[1] == "mnote-stdio":  # on uvloop when installed, as mnote-mcp
        try:
            import uvloop

            options: dict[str, Any] = {"loop_factory": uvloop.new_event_loop}
        except ImportError:
            options = {}
        anyio.run(serve_mnote_stdio, backend_options=options)
    else:
        anyio.run(serve_stdio)
