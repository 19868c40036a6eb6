"""Measuring results against the result budget (`--max-result-chars`), cheaply enough for every call.

Sizes are characters of compact JSON, what hosts count (a CJK character is one character, three
bytes). The envelope around a result is measured from its few strings, not by building it.
"""

from __future__ import annotations

from typing import Any

import orjson

from mnote_mcp.kernel.port import Correlation
from mnote_mcp.vocabulary.envelope import ToolResult, success
from mnote_mcp.vocabulary.scopes import ALL_SCOPES

# A result of this many characters fits Hermes's 100,000-character cut in every result form: "both"
# doubles it and escapes the text copy (x2.1-2.4 measured), "structured" adds 4-7% (docs/hermes.md).
DEFAULT_MAX_RESULT_CHARS = 40_000
MIN_RESULT_CHARS = 4_000  # room for the envelope, a piece of one block and its warning
_UTF8_MOST = 4  # bytes of one character at most
Answer = dict[str, Any]  # a request's answer in its wire form (what the SDK sends as the result)


def chars(value: Any) -> int:
    return len(orjson.dumps(value).decode("utf-8"))


def text_chars(text: str) -> int:
    """The characters `text` takes inside a JSON string (escapes included, quotes not)."""
    return chars(text) - 2


def fits(value: Any, limit: int) -> bool:
    """Whether `value`'s JSON is at most `limit` characters; bytes bound characters from above and
    from below (a character is one to four bytes), so the decode is only paid near the limit."""
    raw = orjson.dumps(value)
    if len(raw) <= limit:
        return True
    return len(raw) <= _UTF8_MOST * limit and len(raw.decode("utf-8")) <= limit


def _frame_strings(
    tool: str, correlation: Correlation, workspace_id: str, document_id: str, outcome: ToolResult
) -> list[Any]:
    return [
        tool,
        correlation.tool_call_id,
        correlation.trace_id,
        outcome.effect,
        outcome.command_id,
        workspace_id,
        document_id,
    ]


_EMPTY_CORRELATION = Correlation(session_id="", run_id="", tool_call_id="", trace_id="")
_EMPTY = ToolResult(result={}, effect="none", command_id=None)
# The envelope's JSON without its variable strings and result: measured once, from the real builder.
_FRAME = (
    chars(success("", _EMPTY_CORRELATION, "", "", _EMPTY, scopes=ALL_SCOPES, locale="en"))
    - chars(_frame_strings("", _EMPTY_CORRELATION, "", "", _EMPTY))
    - chars(_EMPTY.result)
)


def result_limit(
    max_chars: int,
    tool: str,
    correlation: Correlation,
    workspace_id: str,
    document_id: str,
    outcome: ToolResult,
) -> int:
    """How many characters the `result` may take so that the whole success envelope fits `max_chars`."""
    return max_chars - _FRAME - chars(_frame_strings(tool, correlation, workspace_id, document_id, outcome))
