"""The contract's unified request and response envelopes, and the output schema that states them.

Every `tools/call` answer is one response envelope, success or failure; the MCP layer puts it in both
`structuredContent` and a text block. Failures keep the contract's shape (`result: null`,
`audit.effect: "none"`, no `commandId`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NotRequired

import orjson
from typing_extensions import TypedDict

from mnote_mcp.kernel.errors import ErrorCode, MnoteError
from mnote_mcp.kernel.port import Consent, Correlation, JSONObject
from mnote_mcp.vocabulary.disclosure import WITHHELD_WARNING, withheld_details, withheld_result
from mnote_mcp.vocabulary.messages import SHOWN_STEPS, Locale, RenderedError, render_error, render_warning
from mnote_mcp.vocabulary.scopes import Scope

Effect = Literal["read", "write", "dry_run", "none"]
# The contract requires these on every call; this server fills in any the caller leaves out.
CORRELATION_FIELDS: tuple[str, ...] = ("sessionId", "runId", "toolCallId", "traceId")
# The client's ids (the four above and `idempotencyKey`) are echoed, logged, stored in the ledger and
# the audit trail: each is at most this many characters (`--max-id-chars`; the schemas say so).
ID_FIELDS: tuple[str, ...] = (*CORRELATION_FIELDS, "idempotencyKey")
DEFAULT_MAX_ID_CHARS = 256
# Arguments nest at most this deep (`--max-argument-depth`); block content is the kernel's to check.
DEFAULT_MAX_ARGUMENT_DEPTH = 32


class OnPage(TypedDict):
    """The page a call is on and who makes it, as the port's queries, commands and refusals name them."""

    workspace_id: str
    document_id: str
    actor_id: str
    correlation: Correlation


@dataclass(frozen=True, slots=True)
class ToolRequest:
    """The contract's request envelope (docs/contract.md, "The request"): one tool call, fully
    attributed, with the business arguments in `args`."""

    tool_name: str
    workspace_id: str
    document_id: str
    actor_id: str
    correlation: Correlation
    idempotency_key: str | None
    dry_run: bool
    capability_scope: frozenset[Scope]
    args: dict[str, Any]
    base_revision: int | None = None
    locale: Locale = "zh-CN"
    # The workspaces the caller's credentials allow (a bearer token limited to some), None: any.
    workspaces: frozenset[str] | None = None
    # How the person consented to this write, once that is decided (`mnote_mcp.calls.confirmation`).
    consent: Consent | None = None
    # False: a dry run that needs only the plan's operations, not its `textDiff` (`Command.text_diff`).
    text_diff: bool = True
    # The call's own arguments named its `runId` (the model's choice), rather than the connection, its
    # `_meta` or the server: such a run is not the caller's own for an unasked undo (`tools/consent.py`).
    run_named: bool = False

    def on_page(self) -> OnPage:
        """For a port call made for this one: its page and caller are this call's, said once here."""
        return {
            "workspace_id": self.workspace_id,
            "document_id": self.document_id,
            "actor_id": self.actor_id,
            "correlation": self.correlation,
        }


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool handler produced: the envelope's `result` plus its audit facts."""

    result: dict[str, Any]
    effect: Effect
    command_id: str | None = None


class Audit(TypedDict):
    effect: Effect
    commandId: NotRequired[str | None]  # a success's; a failure has none
    workspaceId: str | None
    documentId: str | None


class Envelope(TypedDict):
    """The contract's response envelope (docs/contract.md, "3. The response"); `OUTPUT_SCHEMA` below."""

    ok: bool
    toolName: str
    toolCallId: str
    traceId: str
    result: dict[str, Any] | None  # the tool's own result (`ToolResult.result`)
    audit: Audit
    error: RenderedError | None


def disclosed(outcome: ToolResult, scopes: frozenset[Scope], locale: Locale) -> ToolResult:
    """`outcome` as a caller granted `scopes` may see it: without page text unless it may read the
    page (`vocabulary.disclosure`), a `page_text_withheld` warning naming what was left out."""
    result, withheld = withheld_result(outcome.result, scopes)
    if not withheld:
        return outcome
    warning = render_warning({"code": WITHHELD_WARNING, "details": {"withheld": withheld}}, locale)
    result["warnings"] = [*result.get("warnings", []), warning]
    return ToolResult(result=result, effect=outcome.effect, command_id=outcome.command_id)


def success(
    tool_name: str,
    correlation: Correlation,
    workspace_id: str | None,
    document_id: str | None,
    outcome: ToolResult,
    *,
    scopes: frozenset[Scope],
    locale: Locale,
) -> Envelope:
    """The success envelope, as the caller granted `scopes` may see it (`disclosed`: no page text
    without `page.read`; no default, so no answer can leave the question out)."""
    outcome = disclosed(outcome, scopes, locale)
    return {
        "ok": True,
        "toolName": tool_name,
        "toolCallId": correlation.tool_call_id,
        "traceId": correlation.trace_id,
        "result": outcome.result,
        "audit": {
            "effect": outcome.effect,
            "commandId": outcome.command_id,
            "workspaceId": workspace_id,
            "documentId": document_id,
        },
        "error": None,
    }


def failure(
    tool_name: str,
    correlation: Correlation,
    workspace_id: str | None,
    document_id: str | None,
    error: MnoteError,
    locale: Locale,
    max_chars: int | None = None,
    *,
    scopes: frozenset[Scope],
) -> Envelope:
    """The failure envelope; with `max_chars`, its error shown more and more briefly until the whole
    envelope's JSON fits (an error is a result too: `--max-result-chars` holds it). Its details as a
    caller granted `scopes` may see them: no page text without `page.read` (`vocabulary.disclosure`)."""
    shown_error = MnoteError(error.code, error.reason, withheld_details(error.details, scopes))
    envelope: Envelope = {
        "ok": False,
        "toolName": tool_name,
        "toolCallId": correlation.tool_call_id,
        "traceId": correlation.trace_id,
        "result": None,
        "audit": {"effect": "none", "workspaceId": workspace_id, "documentId": document_id},
        "error": None,
    }
    for shown in SHOWN_STEPS:
        envelope["error"] = render_error(shown_error, locale, shown)
        if max_chars is None or len(to_json(envelope)) <= max_chars:
            break
    return envelope


def to_json(envelope: Envelope) -> str:
    """Compact UTF-8 JSON (orjson: the text block is built on every call, ten times faster than json)."""
    return orjson.dumps(envelope).decode("utf-8")


def _nullable(schema: JSONObject) -> JSONObject:
    """`anyOf` of single types: portable to clients that map schemas onto a one-`type` dialect."""
    return {"anyOf": [schema, {"type": "null"}]}


_NULLABLE_STRING = _nullable({"type": "string"})

OUTPUT_SCHEMA: JSONObject = {
    "type": "object",
    "required": ["ok", "toolName", "toolCallId", "traceId", "result", "audit", "error"],
    "properties": {
        "ok": {"type": "boolean"},
        "toolName": {"type": "string"},
        "toolCallId": {"type": "string"},
        "traceId": {"type": "string"},
        "result": _nullable({"type": "object"}),
        "audit": {
            "type": "object",
            "required": ["effect", "workspaceId", "documentId"],
            "properties": {
                "effect": {"type": "string", "enum": ["read", "write", "dry_run", "none"]},
                "commandId": _NULLABLE_STRING,
                "workspaceId": _NULLABLE_STRING,
                "documentId": _NULLABLE_STRING,
            },
        },
        "error": _nullable(
            {
                "type": "object",
                "required": ["code", "message", "retryable"],
                "properties": {
                    "code": {"type": "string", "enum": [code.value for code in ErrorCode]},
                    "message": {"type": "string"},
                    "retryable": {"type": "boolean"},
                    "hint": {"type": "string"},
                    "details": {"type": "object"},
                },
            }
        ),
    },
}
