"""How an envelope reaches the host: in which forms, and whether a refusal is an `isError` result.

Hosts treat `isError` differently. The MCP spec lists invalid input and business-logic errors as tool
execution errors (`isError: true`); Hermes counts every `isError` result toward a circuit breaker that
cuts the whole server off after three in a row, and pydantic-ai spends a retry on each (its run ends
after two in a row by default). So by default a refusal caused by the call itself is an ordinary
result whose envelope says `ok: false`, with its code, `retryable` and hint (`--refusals error` for the
spec's `isError`); so is a call over the caller's own limits (`rate_limited`: wait, then retry).
Real failures (the runtime unreachable or too slow, a bug) keep `isError` whatever the setting: there
a breaker is right to back off.

Forms: `text` (one text block and no `structuredContent`; tools then declare no `outputSchema`,
because a client must reject a successful result that lacks the structured content its tool declared),
`both` (`structuredContent` plus the same JSON as one text block, for clients that read the structured
form), `structured` (no text block), and `auto`, the default: `both` to a client that speaks the
2026-07-28 protocol, `text` to one on the handshake era. Every agent host we test gives its model the
text; Hermes 0.19.0 (the mcp 1.x SDK, the 2025-11-25 handshake) shows both when both come (the
envelope twice), reads only text on `isError`, and takes a short structured-only success for a
failure; Hermes since 0.20.3 speaks 2026-07-28 and sends one copy of a result whose text is the JSON of
its `structuredContent` (docs/decisions.md, "One setting for every host", "Results for the newest
hosts").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NotRequired

from typing_extensions import TypedDict

from mnote_mcp.kernel.errors import ErrorCode
from mnote_mcp.vocabulary.envelope import Envelope, to_json

RefusalStyle = Literal["error", "result"]
ResultForm = Literal["auto", "both", "structured", "text"]
SentForm = Literal["both", "structured", "text"]  # what one client is sent (`auto` resolved)
REFUSAL_STYLES: tuple[RefusalStyle, ...] = ("error", "result")
RESULT_FORMS: tuple[ResultForm, ...] = ("auto", "both", "structured", "text")

# Refusals caused by the call itself: the caller can change the call (or stop) and try again.
CALLER_REFUSALS = frozenset(
    {
        ErrorCode.UNAUTHENTICATED,
        ErrorCode.PERMISSION_DENIED,
        ErrorCode.NOT_FOUND,
        ErrorCode.INVALID_ARGUMENT,
        ErrorCode.CONFLICT,
        ErrorCode.IDEMPOTENCY_CONFLICT,
        ErrorCode.OPTION_NOT_WIRED,
        # over the caller's own limits (issue 32): it waits and retries; a breaker must not count it
        ErrorCode.RATE_LIMITED,
    }
)
_CALLER_REFUSAL_VALUES = frozenset(code.value for code in CALLER_REFUSALS)


class TextBlock(TypedDict):
    type: Literal["text"]
    text: str


class WireContent(list[TextBlock]):
    """The `content` of a `tools/call` result built here: marks the result as already in wire form,
    so that the server can spare it the SDK's second pass (`mnote_mcp.server.serialize_result`)."""


class CallResult(TypedDict):
    """A `tools/call` result in wire form."""

    content: WireContent
    isError: bool
    resultType: str
    structuredContent: NotRequired[Envelope]


@dataclass(frozen=True, slots=True)
class Delivery:
    """The defaults are the one setting every host we test reads right (docs/decisions.md, "One
    setting for every host")."""

    refusals: RefusalStyle = "result"
    form: ResultForm = "auto"

    def sent(self, modern: bool) -> SentForm:
        """The form a client is sent: `auto` is `both` where the client speaks 2026-07-28 (`modern`)."""
        if self.form == "auto":
            return "both" if modern else "text"
        return self.form

    def declares_output_schema(self, modern: bool = False) -> bool:
        return self.sent(modern) != "text"

    def is_error(self, envelope: Envelope) -> bool:
        error = envelope["error"]
        if envelope["ok"] or error is None:
            return False
        return self.refusals == "error" or error["code"] not in _CALLER_REFUSAL_VALUES

    def call_result(self, envelope: Envelope, modern: bool = False) -> CallResult:
        """The `tools/call` result in wire form (the SDK copies a dict instead of walking a model); in
        `both` the text is exactly the JSON of `structuredContent`, which is how Hermes >= 0.20 knows
        the two for one."""
        form = self.sent(modern)
        result: CallResult = {
            "content": WireContent(
                [] if form == "structured" else [{"type": "text", "text": to_json(envelope)}]
            ),
            "isError": self.is_error(envelope),
            "resultType": "complete",  # required by 2026-07-28; the handshake-era sieve drops it
        }
        if form != "text":
            result["structuredContent"] = envelope
        return result
