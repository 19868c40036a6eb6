"""W3C trace context (`traceparent`), read and written in one place.

An MCP client may pass `traceparent` in a call's `_meta` or as an HTTP header; the relays send one on
every runtime request; the reference runtime reads it back. All of them use these three functions.
"""

from __future__ import annotations

import hashlib
import re

# version-traceid-parentid-flags; a later version may append fields after the flags. Both are used
# with `fullmatch`: `$` alone would let a value with a final newline through (into a header).
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_HEX32 = re.compile(r"[0-9a-f]{32}")


def trace_id_of(value: object) -> str | None:
    """The trace id of a well-formed `traceparent`, else None (never an error: tracing is advisory).

    Version `ff` is invalid, version `00` has nothing after the flags, and an all-zero trace or parent
    id is invalid (W3C Trace Context, section 3.2). Case and surrounding blanks are forgiven.
    """
    if not isinstance(value, str):
        return None
    match = _TRACEPARENT.fullmatch(value.strip().lower())
    if match is None:
        return None
    version, trace_id, parent_id, _flags, rest = match.groups()
    if version == "ff" or (version == "00" and rest) or set(trace_id) == {"0"} or set(parent_id) == {"0"}:
        return None
    return trace_id


def w3c_trace_id(trace_id: str) -> str:
    """The 32-hex trace id a runtime sees for an envelope trace id.

    A trace id that already is one (what a W3C `traceparent` in `_meta` or a generated id gives) is
    kept, lower-cased, so traces join across systems; anything else (`trace_1`) is hashed, stably, so
    every command of one envelope trace still lands in one W3C trace.
    """
    lowered = trace_id.lower()
    if _HEX32.fullmatch(lowered) and set(lowered) != {"0"}:
        return lowered
    return hashlib.sha256(trace_id.encode("utf-8")).hexdigest()[:32]


def traceparent(trace_id: str) -> str:
    """`00-<trace-id>-<new parent span id>-01`: one new span per outgoing request, sampled."""
    import secrets  # (here: `runtime cli` reads a trace id, never makes one, and need not load it)

    return f"00-{w3c_trace_id(trace_id)}-{secrets.token_hex(8)}-01"
