"""One budget for every answer: each request kind the server answers, measured the same way and fitted
within `--max-result-chars` in one place.

An answer is measured as characters of its compact JSON, what hosts count (`tools/budget.py`); a
`tools/call` answer by its envelope, the budget's unit since the start (its `--result-form` may carry
it twice). `ANSWER_KINDS` names every request kind the server has a handler for, and how its answer
is made to fit: a tool's envelope by the dispatcher, before it is delivered (the fit needs the call:
a page read answers a piece, a list its first entries, a write report is trimmed, an error is shown
briefly); the others here, after their handler, from the answer's wire form: a list's first entries
with the cursor to the rest, fewer completions with `hasMore`, a page read as a resource cut to a
piece with the URI of the next, a prompt's attached page or run cut with a line saying how to read
the rest. A kind whose answer is small and fixed says why it needs no fit. A JSON-RPC error (an
unknown tool, an unknown resource: they echo what the caller sent) is shortened to fit.

`WithinBudget` is the server middleware that applies it, innermost, so every answer passes through
it; `tests/unit/tools/test_budget_everywhere.py` holds every handled request kind to a declaration
here and to the budget with oversized data. A new request kind is refused until it is declared.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError

from mnote_mcp.surface.prompts.handlers import PagePrompts
from mnote_mcp.surface.resources.pages import PageResources
from mnote_mcp.tools.budget import Answer, chars, fits

logger = logging.getLogger(__name__)
Context = ServerRequestContext[Any, Any]
Fit = Callable[[Context, Answer, int], Awaitable[Answer]]
_ERROR_ROOM = 200  # the code, the count of what was left out and the JSON around the message
# What the SDK adds to a result after its handler (and this middleware) returned it, on the wire:
# `resultType`, and in the 2026-07-28 era the cache hints `ttlMs` and `cacheScope` (about 60
# characters; found by the hostile-input sweep measuring answers as the client receives them).
SDK_ROOM = 100


@dataclass(frozen=True, slots=True)
class AnswerKind:
    """How one request kind's answer is held to the budget: `fit` cuts an answer over it (None: it
    cannot be over, `why` says why); `measure` is what counts (the answer's JSON by default)."""

    why: str
    fit: Fit | None = None
    measure: Callable[[Answer], int] = chars
    exempt: bool = False  # not held to the budget at all (`why` says why)


def envelope_chars(answer: Answer) -> int:
    """A `tools/call` answer measured by its envelope: the text block is the envelope's compact JSON;
    without one (`--result-form structured`), the structured content is the envelope. A question
    back to the person (`input_required`) has neither and is measured whole."""
    for item in answer.get("content") or []:
        if item.get("type") == "text":
            return len(item["text"])
    if "structuredContent" in answer:
        return chars(answer["structuredContent"])
    return chars(answer)


def fit_list(key: str) -> Fit:
    """The fit of a paginated list (`key`: its entries): the first entries that fit, and the offset
    cursor of the rest, which the list's handler reads as it reads its own (`list_offset`). At least
    one entry; one that alone does not fit has its free text (title, description) cut."""

    async def fit(ctx: Context, answer: Answer, limit: int) -> Answer:
        entries: list[Answer] = answer.get(key) or []
        cursor = (ctx.params or {}).get("cursor")
        start = int(cursor) if isinstance(cursor, str) and cursor.isdigit() else 0  # the handler read it

        def first(count: int) -> Answer:
            return {**answer, key: entries[:count], "nextCursor": str(start + count)}

        count, size = 1, chars(first(1))
        while count < len(entries) - 1 and size + chars(entries[count]) + 1 <= limit:
            size += chars(entries[count]) + 1
            count += 1
        while count > 1 and chars(first(count)) > limit:
            count -= 1
        fitted = first(count)
        if count == len(entries):  # one entry, over the budget alone: the handler's cursor goes on
            fitted.pop("nextCursor")
            if "nextCursor" in answer:
                fitted["nextCursor"] = answer["nextCursor"]
        answer = fitted
        if count == 1 and chars(answer) > limit:
            answer[key] = [_shortened(entries[0], chars(answer) - limit)]
        return answer

    return fit


def _shortened(entry: Answer, over: int) -> Answer:
    """An entry with its free text cut by `over` characters and more (an id is never cut)."""
    cut = dict(entry)
    for field in ("description", "title"):
        text = cut.get(field)
        if isinstance(text, str) and over > 0:
            keep = max(0, len(text) - over - 1)
            over -= len(text) - keep - 1
            cut[field] = text[:keep] + "…"
    return cut


async def fit_completion(ctx: Context, answer: Answer, limit: int) -> Answer:
    """Fewer completion values, the first (the best) ones, and `hasMore`."""
    completion = answer["completion"]
    values: list[str] = completion.get("values") or []

    def first(count: int) -> Answer:
        return {**answer, "completion": {**completion, "values": values[:count], "hasMore": True}}

    count, size = 0, chars(first(0))
    while count < len(values) and size + chars(values[count]) + 1 <= limit:
        size += chars(values[count]) + 1
        count += 1
    while count > 0 and chars(first(count)) > limit:
        count -= 1
    return first(count)


def answer_kinds(pages: PageResources, prompts: PagePrompts) -> dict[str, AnswerKind]:
    """Every request kind the server answers, and how its answer keeps to the budget."""
    return {
        "tools/call": AnswerKind(
            "fitted by the dispatcher before it is delivered (`Dispatcher._within_budget`, errors by"
            " `envelope.failure`): the fit needs the call",
            measure=envelope_chars,
        ),
        "tools/list": AnswerKind(
            "the tool definitions, loaded by the host as definitions rather than read as a result; each"
            " held to its own size budget (`tools/sizes.py`)",
            exempt=True,
        ),
        "resources/list": AnswerKind("a page of resources", fit_list("resources")),
        "resources/templates/list": AnswerKind("a page of templates", fit_list("resourceTemplates")),
        "resources/read": AnswerKind("a page as a resource", pages.fit_read),
        "prompts/list": AnswerKind("a page of prompts", fit_list("prompts")),
        "prompts/get": AnswerKind("a prompt and what it attaches", prompts.fit),
        "completion/complete": AnswerKind("completion values", fit_completion),
        "ping": AnswerKind("empty"),
        "server/discover": AnswerKind("the server's name, capabilities and instructions: fixed, short"),
        "resources/subscribe": AnswerKind("empty"),
        "resources/unsubscribe": AnswerKind("empty"),
        "subscriptions/listen": AnswerKind(
            "the URIs a stream honours, each one the caller sent and may read"
        ),
    }


class WithinBudget:
    """The server middleware holding every answer to `max_chars` (innermost, next to the handler)."""

    def __init__(self, max_chars: int, kinds: Mapping[str, AnswerKind]) -> None:
        self.max_chars = max_chars - SDK_ROOM  # what the handler's answer may take (see SDK_ROOM)
        self.kinds = kinds

    async def __call__(self, ctx: Context, call_next: CallNext) -> HandlerResult:
        try:
            return await self._within(ctx, call_next)
        except MCPError as error:
            raise self._shortened(error) from None

    async def _within(self, ctx: Context, call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        kind = self.kinds.get(ctx.method) if ctx.request_id is not None else None
        if kind is None or kind.exempt or not isinstance(result, dict):
            return result
        if kind.measure is chars:  # serialized once; decoded only near the limit
            over = not fits(result, self.max_chars)
        else:
            over = kind.measure(result) > self.max_chars
        if not over:
            return result
        if kind.fit is not None:
            result = await kind.fit(ctx, result, self.max_chars)
        size = kind.measure(result)
        if size > self.max_chars:
            logger.error(
                "a %s answer of %d characters is over the budget of %d", ctx.method, size, self.max_chars
            )
        return result

    def _shortened(self, error: MCPError) -> MCPError:
        """A JSON-RPC error within the budget: its message's opening and how long it was."""
        data = error.error
        if chars(data.model_dump(by_alias=True, mode="json", exclude_none=True)) <= self.max_chars:
            return error
        message = data.message
        keep = max(0, min(len(message), (self.max_chars - _ERROR_ROOM) // 6))  # 6: the longest escape
        shortened = f"{message[:keep]}… ({len(message):,} characters)"
        detail = data.data if data.data is None or len(orjson.dumps(data.data)) <= _ERROR_ROOM else None
        return MCPError(data.code, shortened, detail)
