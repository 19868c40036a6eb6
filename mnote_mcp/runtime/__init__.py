"""The reference runtime: the embedded kernel served over the runtime protocol v1.

The kernel adapters in `mnote_mcp.kernel.relays.http` and `mnote_mcp.kernel.relays.cli` are clients; this package is
the server side of the same protocol (`mnote-mcp runtime serve` over HTTP, `mnote-mcp runtime cli`
behind the mnote-cli JSON protocol). It is what the adapters are tested against, and it lets several
MCP server processes share one kernel.
"""
