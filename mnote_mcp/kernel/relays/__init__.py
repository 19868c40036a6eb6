"""The kernel port relayed to a runtime over HTTP or the mnote-cli JSON protocol: clients of the runtime
protocol, which know nothing of MCP."""
