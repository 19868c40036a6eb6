"""What every layer may use: logging, loopback addresses, secret files, trace context, the HTTP guards,
the MCP SDK's private names (one adapter), telemetry (docs/architecture.md, "base")."""
