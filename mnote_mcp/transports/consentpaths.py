"""What the server says at start-up about consent: which paths can ask the person before a write and
which fall back, and to what (issue 31: the transport chooses nothing silently)."""

from __future__ import annotations

from mnote_mcp.config import ServerConfig


def consent_paths(config: ServerConfig) -> list[str]:
    """The start-up lines saying which paths can ask the person before a write and which fall back
    (issue 31: the transport chooses nothing silently)."""
    confirmation = config.confirmation
    if confirmation.policy == "never":
        return ["consent: --confirm never: no write asks the person first"]
    fallback = {
        "handle": "answered with a confirmation handle, nothing written until the agent sends it back",
        "write": "WRITTEN UNASKED (--confirm-fallback write)",
        "refuse": "refused (--confirm-fallback refuse)",
    }[confirmation.fallback]
    lines = [f"consent: --confirm {confirmation.policy}; a client without form elicitation: {fallback}"]
    if config.transport == "stdio":
        lines.append("consent: stdio asks a client that declares form elicitation (elicitation/create)")
        return lines
    if config.streamable_http:
        if config.stateless:
            legacy = f"cannot ask on 2025-11-25 (--stateless: no channel for the answer): {fallback}"
        else:
            legacy = "asks on 2025-11-25 over an SSE answer to the call that needs it (elicitation/create)"
        lines.append(f"consent: /mcp {legacy}; asks on 2026-07-28 with input_required")
    if config.sse:
        lines.append("consent: /sse asks (elicitation/create on the session's stream)")
    return lines
