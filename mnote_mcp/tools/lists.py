"""A list read that would not fit one result answers its first entries instead, with the kernel's cursor.

History entries and search hits come in pages the kernel cuts (`limit`) and joins with cursors it
issues. Over the result budget, the read is asked again with the `limit` that fits, measured from the
entries of the first answer, so the shorter page, its `nextCursor` and whatever the cursor pins are
the kernel's own and nothing is left unreachable; a `result_list` warning says why fewer came. One
entry larger than the whole budget (a write's diff of long ids) comes alone, its own lists cut and
counted (`result_cut`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mnote_mcp.kernel.port import Kernel
from mnote_mcp.tools.budget import chars, fits
from mnote_mcp.tools.results import Fit, Handler, trimmed
from mnote_mcp.vocabulary.envelope import ToolRequest, ToolResult
from mnote_mcp.vocabulary.messages import Locale, render_warning

_CURSOR_ROOM = 300  # a nextCursor and its key (a search's is about 80 characters, a history's 40)
_ATTEMPTS = 3


def fit_list(key: str, read: Handler) -> Fit:
    """The fit of a list read whose entries are `result[key]` and whose page size is `limit`."""

    async def fit(request: ToolRequest, kernel: Kernel, outcome: ToolResult, limit: int) -> ToolResult:
        entries = outcome.result.get(key) or []
        if not entries:
            return outcome
        frame = {name: value for name, value in outcome.result.items() if name not in (key, "nextCursor")}
        warning = render_warning({"code": "result_list", "details": {"shown": len(entries)}}, request.locale)
        room = limit - chars(frame) - chars(warning) - _CURSOR_ROOM
        count, used = 0, 0
        while count < len(entries) and (count == 0 or used + chars(entries[count]) + 1 <= room):
            used += chars(entries[count]) + 1
            count += 1
        piece = outcome.result
        for _ in range(_ATTEMPTS):
            again = await read(replace(request, args={**request.args, "limit": count}), kernel)
            piece = dict(again.result)
            shown = render_warning({"code": "result_list", "details": {"shown": count}}, request.locale)
            piece["warnings"] = [*piece.get("warnings", []), shown]
            if fits(piece, limit) or count == 1:
                break
            count = max(1, min(count - 1, int(count * limit / chars(piece) * 0.9)))
        if not fits(piece, limit) and len(piece.get(key) or []) == 1:
            piece = _one_cut(piece, key, limit, request.locale)
        return ToolResult(result=piece, effect=outcome.effect, command_id=outcome.command_id)

    return fit


def _one_cut(piece: dict[str, Any], key: str, limit: int, locale: Locale) -> dict[str, Any]:
    """A page of one entry still over the budget: the entry's own lists cut, counted in `result_cut`."""
    entry = piece[key][0]
    room = limit - (chars(piece) - chars(entry)) - 300  # 300: the warning and its counts
    cut = dict(trimmed(ToolResult(entry, "read"), room, locale, "result_cut").result)
    warnings = cut.pop("warnings", [])[len(entry.get("warnings", [])) :]
    return {**piece, key: [cut], "warnings": [*piece.get("warnings", []), *warnings]}
