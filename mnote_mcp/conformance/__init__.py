"""The conformance kit: `mnote-mcp runtime check`, what a runtime's authors run against their service.

Every operation of the runtime protocol's table (`kernel/protocol.py`'s `OPERATIONS`) is checked
against a running runtime, over HTTP or the mnote-cli JSON protocol, on a scratch workspace the kit
ships as a seed: its answers must follow the generated schemas and be what the embedded kernel answers
the same requests on a mirror store seeded the same way, and the scenarios (idempotent replays, stale
revisions and rebase, revert, history, search, permission refusals that reveal nothing, the page size
limit, audit commandIds, the handshake) must hold. docs/runtime-protocol.md, "The conformance kit",
says how to run it and what each check guarantees. Nothing here imports the MCP SDK.
"""
