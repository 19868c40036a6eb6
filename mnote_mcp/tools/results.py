"""How a kernel outcome reads in the envelope's `result`: the same shape for every write tool."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio.to_thread

from mnote_mcp.kernel.errors import MnoteError
from mnote_mcp.kernel.port import Command, CommandOutcome, Kernel
from mnote_mcp.tools.budget import chars, fits
from mnote_mcp.vocabulary.envelope import ToolRequest, ToolResult
from mnote_mcp.vocabulary.messages import Locale, render_warning

Handler = Callable[[ToolRequest, Kernel], Awaitable[ToolResult]]
# Makes a result that is over the result budget fit it (the limit is in characters of the result's
# JSON); the tool's own way to do so, e.g. a page read answers a piece instead.
Fit = Callable[[ToolRequest, Kernel, ToolResult, int], Awaitable[ToolResult]]
# A write tool's arguments (envelope fields removed) -> its kernel command's payload.
PayloadMap = Callable[[Mapping[str, Any]], dict[str, Any]]


def fields(*names: str) -> PayloadMap:
    """The payload of the named arguments the caller gave, nothing invented."""

    def payload(args: Mapping[str, Any]) -> dict[str, Any]:
        return {name: args[name] for name in names if name in args}

    return payload


def write_result(outcome: CommandOutcome, locale: Locale) -> ToolResult:
    """A dry run: `{"dryRun": true, "diff": [...], ...}`; a write: `{"commandName", "revision", ...}`."""
    warnings = [render_warning(warning, locale) for warning in outcome.warnings]
    if outcome.dry_run:
        plan: dict[str, Any] = {
            "dryRun": True,
            "diff": outcome.diff,
            "commandName": outcome.command_name,
            "currentRevision": outcome.revision,
            "changed": outcome.changed,
            "warnings": warnings,
            **outcome.data,
        }
        if outcome.replayed:  # the real call would replay this write, not make another
            plan["idempotentReplay"] = True
            plan["commandId"] = outcome.command_id
        return ToolResult(result=plan, effect="dry_run", command_id=None)
    result: dict[str, Any] = {
        "commandName": outcome.command_name,
        "revision": outcome.revision,
        "changed": outcome.changed,
        "diff": outcome.diff,
        **outcome.data,
    }
    if warnings:
        result["warnings"] = warnings
    if outcome.replayed:
        result["idempotentReplay"] = True
    return ToolResult(result=result, effect="write", command_id=outcome.command_id)


# The one text a write's report may cut (a unified diff, read top down); every list may be cut too.
_TEXTS = frozenset({"textDiff"})


async def trim_result(request: ToolRequest, kernel: Kernel, outcome: ToolResult, limit: int) -> ToolResult:
    """A write's result over the budget: the write is done, so its report is shortened instead (on
    a worker thread: a report may be as long as the request that made it, 20,000 deleted blocks)."""
    return await anyio.to_thread.run_sync(trimmed, outcome, limit, request.locale)


def trimmed(outcome: ToolResult, limit: int, locale: Locale, code: str = "result_trimmed") -> ToolResult:
    """`outcome` with its report cut to `limit` characters of JSON: the longest of its lists (`diff`,
    `blockIds`, `revertedRevisions`, ... whichever the command reports) or of the dry run's `textDiff`
    is halved, keeping its opening, until the result fits. What was left out is counted per field in
    a `code` warning (`result_trimmed`; never silently), and the result is measured with it in."""
    result = dict(outcome.result)
    omitted: dict[str, int] = {}
    report = result
    while not fits(report, limit):
        present = [
            key
            for key, value in result.items()
            if value and (isinstance(value, list) or (key in _TEXTS and isinstance(value, str)))
        ]
        if not present:
            break  # nothing left to cut (no report of today's commands gets here: MIN_RESULT_CHARS)
        key = max(present, key=lambda name: chars(result[name]))
        value = result[key]
        keep = len(value) // 2
        omitted[key] = omitted.get(key, 0) + len(value) - keep
        result[key] = value[:keep]
        warning = render_warning({"code": code, "details": {"omitted": omitted}}, locale)
        report = {**result, "warnings": [*result.get("warnings", []), warning]}
    return ToolResult(result=report, effect=outcome.effect, command_id=outcome.command_id)


def command_handler(
    command_name: str, payload: PayloadMap, renamed: Mapping[str, str] | None = None
) -> Handler:
    """The handler of every write tool: relay one kernel command, report its outcome; a refusal
    naming a payload key the tool calls otherwise (`renamed`) names the tool's argument instead."""
    words = _renaming(renamed or {})

    async def handle(request: ToolRequest, kernel: Kernel) -> ToolResult:
        assert request.idempotency_key is not None  # required by every write tool's schema
        try:
            outcome = await kernel.execute(
                Command(
                    name=command_name,
                    workspace_id=request.workspace_id,
                    document_id=request.document_id,
                    actor_id=request.actor_id,
                    correlation=request.correlation,
                    idempotency_key=request.idempotency_key,
                    dry_run=request.dry_run,
                    base_revision=request.base_revision,
                    payload=payload(request.args),
                    consent=request.consent,
                    text_diff=request.text_diff,
                )
            )
        except MnoteError as error:
            if words is not None:
                error.details = words(error.details)
            raise
        return write_result(outcome, request.locale)

    return handle


def _renaming(renamed: Mapping[str, str]) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
    """Rewrites every payload key of `renamed` (a whole word: in a pointer, a list, a reason) in a
    refusal's details to the argument's name; details hold only ids, pointers and words of ours."""
    if not renamed:
        return None
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, renamed)) + r")\b")

    def rewrite(value: Any) -> Any:
        if isinstance(value, str):
            return pattern.sub(lambda match: renamed[match.group(1)], value)
        if isinstance(value, list):
            return [rewrite(item) for item in value]
        if isinstance(value, dict):
            return {key: rewrite(item) for key, item in value.items()}
        return value

    return lambda details: {key: rewrite(item) for key, item in details.items()}
