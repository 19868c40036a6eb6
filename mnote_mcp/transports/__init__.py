"""Transports: stdio, and one HTTP app serving streamable HTTP (/mcp) and legacy HTTP+SSE (/sse)."""
