"""Asking the person before a write (`--confirm`): dry run, rule, question, answer, then the write.

An agent can replace a page, delete a subtree or revert a run in one call; the history makes that
recoverable, not consented. Under `--confirm destructive` (the default) a write tool's call is first
run as a dry run with the same arguments and key; the tool's declared rule (`ToolSpec.consent`,
`tools/consent.py`) reads that plan, and when it is destructive the person is asked, through the
client, with the plan's summary in the session's locale (`vocabulary/consent.py`). `always` asks
before every write that changes something, `never` asks nothing.

- accept: the write is made, once, with the caller's own request (its `idempotencyKey` unchanged),
  after a second dry run shows the same impact as the one the person accepted (else they are asked
  again about the new one, at most `MAX_QUESTIONS` times, then `conflict`/`plan_changed`);
- decline, cancel, or no answer within `--confirm-timeout`: `permission_denied` with reason
  `declined`, `cancelled` or `confirm_timeout`, nothing written but the kernel's audit record of the
  refusal (`Kernel.record_refusal`: effect `refused`, outcome the reason; its id in the refusal's
  `details.auditCommandId`), kept out of the idempotency ledger so the same key may be written later;
- a client that cannot be asked (no form elicitation, or no channel to ask on) gets the confirmation
  result (`--confirm-fallback handle`, the default, issue 31): nothing written, the plan's summary and
  a single-use handle (`mnote_mcp.calls.handles`), audited as held (`confirmation_required`); the agent asks
  its person in the conversation and sends the same call again with the handle as its idempotency
  key, which is then written once (`_redeem`). `write` writes it unasked, `refuse` refuses it
  (`confirm_unavailable`);
- an undo of the caller's own run never asks (`tools/consent.py`, `Exempt.OWN_RUN`), under any
  policy: the way back from what an agent just did must not depend on a channel that may not exist;
- a replay of a key already written, a dry run, and a write that changes nothing never ask.

Every write says how it was consented (`Consent`, in its audit record's `detail.consent`): `asked`,
`handle`, `fallback` (written unasked under `--confirm-fallback write`), `not_needed`, `own_run`.

How the question travels is the server's business (`mnote_mcp.surface.elicitation`: `elicitation/create` on
2025-11-25, an `input_required` result and its retry on 2026-07-28); here it is an `Asker`, whose
`prior` holds the answers a retried request brings and whose `ask` either waits for the answer or
raises `ConfirmationPending` to end this request with the question.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal, Protocol

import anyio

from mnote_mcp.calls.handles import DEFAULT_HANDLE_TTL, Binding, Handles, is_handle
from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.port import Consent, Kernel, PageQuery, Refusal, Refused
from mnote_mcp.tools.consent import Destruction, Exempt, before_plan, never
from mnote_mcp.vocabulary.consent import Impact, change_text, impact_of, page_name, question_text
from mnote_mcp.vocabulary.disclosure import may_read
from mnote_mcp.vocabulary.envelope import ToolRequest, ToolResult
from mnote_mcp.vocabulary.naming import ToolNames, respell

if TYPE_CHECKING:  # the registry imports the MCP SDK; the configuration reads this module without it
    from mnote_mcp.tools.registry import ToolSpec

ConfirmPolicy = Literal["never", "destructive", "always"]
ConfirmFallback = Literal["handle", "write", "refuse"]
Answer = Literal["accept", "decline", "cancel", "timeout"]
CONFIRM_POLICIES: tuple[ConfirmPolicy, ...] = ("never", "destructive", "always")
CONFIRM_FALLBACKS: tuple[ConfirmFallback, ...] = ("handle", "write", "refuse")
DEFAULT_CONFIRM_TIMEOUT = 120.0
# How often one call may ask: a plan that keeps changing under the person's eyes ends in a conflict.
MAX_QUESTIONS = 3
logger = logging.getLogger(__name__)
# What a refusal says in `error.details.confirmation`, and the reason that picks its words.
_REFUSALS: dict[str, tuple[str, Reason]] = {
    "decline": ("declined", Reason.DECLINED),
    "cancel": ("cancelled", Reason.CANCELLED),
    "timeout": ("timeout", Reason.CONFIRM_TIMEOUT),
}


@dataclass(frozen=True, slots=True)
class Confirmation:
    """The confirmation settings: which writes ask (`policy`), what a client that cannot be asked
    gets (`fallback`), how long an answer may take (`timeout`, seconds) and how long a confirmation
    handle stays good (`handle_ttl`, seconds)."""

    policy: ConfirmPolicy = "destructive"
    fallback: ConfirmFallback = "handle"
    timeout: float = DEFAULT_CONFIRM_TIMEOUT
    handle_ttl: float = DEFAULT_HANDLE_TTL


DEFAULT_CONFIRMATION = Confirmation()


@dataclass(frozen=True, slots=True)
class Question:
    """What the person is asked: `text` in the session's locale; `digest` binds the answer to the
    impact they were shown (`Impact.digest`)."""

    text: str
    digest: str
    tool: str
    impact: Impact
    destruction: Destruction | None


class Asker(Protocol):
    """How one request asks its client (`mnote_mcp.surface.elicitation`)."""

    @property
    def prior(self) -> Mapping[str, Answer]:
        """Answers this request already carries, by question digest (a 2026-07-28 retry's)."""
        ...

    async def ask(self, question: Question) -> Answer:
        """The person's answer, or `ConfirmationPending` when it arrives with a later request."""
        ...


class ConfirmationPending(Exception):  # noqa: N818 -- a control-flow signal, not an error
    """The question goes back to the client as this request's result; the answer comes with its retry."""

    def __init__(self, question: Question) -> None:
        super().__init__(question.tool)
        self.question = question


def refused(answer: Answer, settings: Confirmation) -> MnoteError:
    """The refusal a non-accepting answer gets: nothing was written."""
    said, reason = _REFUSALS[answer]
    details: dict[str, object] = {"confirmation": said}
    if answer == "timeout":
        details["timeoutSeconds"] = settings.timeout
    return MnoteError(ErrorCode.PERMISSION_DENIED, reason, details)


async def confirmed_write(
    spec: ToolSpec,
    request: ToolRequest,
    kernel: Kernel,
    settings: Confirmation,
    asker: Asker | None,
    *,
    tool: str,
    style: ToolNames,
    scope: anyio.CancelScope,
    call_timeout: float,
    handles: Handles,
    principal: str,
) -> ToolResult:
    """Run `spec`'s handler for `request`, asking the person first where the policy says so.

    `tool` is the tool's name as advertised, `style` how tool names are spelled in the question.
    `scope` is the call's cancel scope: its deadline is lifted while the person is asked (the answer
    has `settings.timeout` of its own) and set to `call_timeout` again for the write. `handles`
    issue and verify confirmation handles, bound to `principal` (who the caller is).
    """
    if not spec.writes or request.dry_run:
        return await spec.handler(request, kernel)
    if is_handle(request.idempotency_key):
        return await _redeem(spec, request, kernel, handles, principal)
    if not might_ask(spec, settings):
        return await spec.handler(replace(request, consent=Consent.NOT_NEEDED), kernel)
    known = before_plan(spec.consent, request)
    if known is Exempt.OWN_RUN:
        return await spec.handler(replace(request, consent=Consent.OWN_RUN), kernel)
    if known is None and settings.policy == "destructive":
        return await spec.handler(replace(request, consent=Consent.NOT_NEEDED), kernel)
    if asker is None and settings.fallback == "write":
        # The operator's choice: written unasked, as before issue 31, and without a plan first.
        return await spec.handler(replace(request, consent=Consent.FALLBACK), kernel)
    answers: dict[str, Answer] = dict(asker.prior) if asker is not None else {}
    # The plan's operations decide; its text (the costly `textDiff` of a long page) only once asked.
    planned = replace(request, dry_run=True, text_diff=False)
    consent = Consent.NOT_NEEDED
    for asked in range(MAX_QUESTIONS + 1):
        plan = (await spec.handler(planned, kernel)).result
        if plan.get("idempotentReplay"):
            break  # the key was written before: the call replays that write, and changes nothing
        refusal = next((answer for answer in answers.values() if answer != "accept"), None)
        if refusal is not None:
            error = refused(refusal, settings)
            await _audit_refusal(kernel, request, spec, error)
            raise error
        if not plan.get("changed"):
            break
        impact = impact_of(plan)
        verdict = await spec.consent(request, impact, kernel)
        if verdict is Exempt.OWN_RUN:
            consent = Consent.OWN_RUN
            break
        destruction = verdict if isinstance(verdict, Destruction) else None
        if settings.policy == "destructive" and destruction is None:
            break
        if asker is None:
            if settings.fallback == "refuse":
                raise MnoteError(
                    ErrorCode.PERMISSION_DENIED, Reason.CONFIRM_UNAVAILABLE, {"confirmation": "unavailable"}
                )
            shown = await _with_text(spec, request, kernel, impact)
            raise await _held(spec, request, kernel, plan, shown, handles, principal)
        if answers.get(impact.digest()) == "accept":
            consent = Consent.ASKED
            break
        if asked == MAX_QUESTIONS:
            raise MnoteError(ErrorCode.CONFLICT, Reason.PLAN_CHANGED, {"questions": MAX_QUESTIONS})
        shown = await _with_text(spec, request, kernel, impact)
        question = await _question(request, kernel, shown, impact.digest(), destruction, tool, style)
        with _waiting(scope, call_timeout):
            answers[question.digest] = await asker.ask(question)
    return await spec.handler(replace(request, consent=consent), kernel)


def binding(request: ToolRequest, principal: str) -> Binding:
    """What a handle for `request` is bound to: the caller, the tool, the page and the arguments
    (not the idempotency key, which the handle becomes, nor the correlation ids)."""
    return Binding(
        principal=principal,
        tool=request.tool_name,
        workspace_id=request.workspace_id,
        document_id=request.document_id,
        base_revision=request.base_revision,
        args=request.args,
    )


async def _held(
    spec: ToolSpec,
    request: ToolRequest,
    kernel: Kernel,
    plan: Mapping[str, object],
    impact: Impact,
    handles: Handles,
    principal: str,
) -> MnoteError:
    """The confirmation result: nothing written; what would change, and the handle that writes it
    once the person agreed (audited as held, its id in `details.auditCommandId`). The removed lines
    and the title are page text, shown to a caller whose dry run of a write to the page just passed
    the kernel's checkpoints (so one who may read it), as the question through elicitation shows them."""
    revision = plan.get("currentRevision")
    assert isinstance(revision, int)  # every dry run's result (`tools/results.write_result`)
    handle = handles.issue(binding(request, principal), revision)
    details: dict[str, object] = {
        "confirmation": "required",
        "confirmationKey": handle,
        "expiresInSeconds": int(handles.ttl),
        "page": page_name(await _title(request, kernel)),
        "change": change_text(impact, request.locale),
        "revision": revision,
    }
    if impact.removed_lines:
        details["removedLines"] = list(impact.removed_lines)
    error = MnoteError(ErrorCode.PERMISSION_DENIED, Reason.CONFIRMATION_REQUIRED, details)
    await _audit_refusal(kernel, request, spec, error, Refused.HELD)
    logger.info(
        "held %s for confirmation: %s/%s at revision %d (trace %s)",
        request.tool_name,
        request.workspace_id,
        request.document_id,
        revision,
        request.correlation.trace_id,
    )
    return error


async def _redeem(
    spec: ToolSpec, request: ToolRequest, kernel: Kernel, handles: Handles, principal: str
) -> ToolResult:
    """A write sent with a confirmation handle as its key: written once if the handle is this
    server's for exactly this call and caller, unused, in date, and the page is still at the
    revision the person was shown; refused, nothing written, otherwise."""
    assert request.idempotency_key is not None
    try:
        handle = handles.verify(request.idempotency_key, binding(request, principal), check_expiry=False)
    except MnoteError:
        logger.warning(
            "refused a confirmation handle not issued for this call: %s by %s (trace %s)",
            request.tool_name,
            request.actor_id,
            request.correlation.trace_id,
        )
        raise
    plan = (await spec.handler(replace(request, dry_run=True, text_diff=False), kernel)).result
    if plan.get("idempotentReplay"):
        raise MnoteError(
            ErrorCode.PERMISSION_DENIED,
            Reason.CONFIRMATION_USED,
            {"confirmation": "used", "commandId": plan.get("commandId")},
        )
    handles.check_expiry(handle)
    if plan.get("currentRevision") != handle.revision:
        raise MnoteError(
            ErrorCode.CONFLICT,
            Reason.CONFIRMATION_STALE,
            {
                "confirmation": "stale",
                "revision": handle.revision,
                "currentRevision": plan.get("currentRevision"),
            },
        )
    return await spec.handler(replace(request, consent=Consent.HANDLE), kernel)


async def _audit_refusal(
    kernel: Kernel, request: ToolRequest, spec: ToolSpec, error: MnoteError, outcome: Refused | None = None
) -> None:
    """The kernel's audit record of the refused (or held) write, its id added to the refusal's
    details. The person's answer stands whatever happens to the record: a kernel that cannot keep it
    (a runtime without the route, one that is down, one older than the outcome) is logged, and the
    write is refused all the same."""
    assert request.idempotency_key is not None and spec.command is not None  # (a write tool)
    command = spec.command.name
    refusal = Refusal(
        name=command,
        **request.on_page(),
        idempotency_key=request.idempotency_key,
        outcome=outcome or Refused(error.reason.value),
    )
    try:
        record = await kernel.record_refusal(refusal)
    except MnoteError as failure:
        logger.warning(
            "refused %s not audited: %s/%s (trace %s)",
            command,
            failure.code.value,
            failure.reason.value,
            request.correlation.trace_id,
        )
        return
    error.details["auditCommandId"] = record["commandId"]


def might_ask(spec: ToolSpec, settings: Confirmation) -> bool:
    """Whether a (real, not dry-run) call of `spec` may need the person's consent under `settings`:
    if not, it runs as it always did, with no dry run first. The transports read this too (an SSE
    answer for a call that may ask, `transports/asking.py`)."""
    if not spec.writes or settings.policy == "never":
        return False
    return settings.policy == "always" or spec.consent is not never


async def _with_text(spec: ToolSpec, request: ToolRequest, kernel: Kernel, impact: Impact) -> Impact:
    """`impact` with the first lines of text its write removes, from a dry run with its `textDiff`:
    made only once the person is to be asked (the check itself plans without it)."""
    plan = (await spec.handler(replace(request, dry_run=True), kernel)).result
    return replace(impact, removed_lines=impact_of(plan).removed_lines)


async def _question(
    request: ToolRequest,
    kernel: Kernel,
    impact: Impact,
    digest: str,
    destruction: Destruction | None,
    tool: str,
    style: ToolNames,
) -> Question:
    """The question for this plan, naming the page by its title (read as the caller), quoting what it
    removes; to a connection not granted `page.read`, by its id and counts alone. `digest` is the
    plan's, which the answer is bound to (`Impact.digest` of the operations)."""
    page_text = may_read(request.capability_scope)
    text = question_text(
        impact,
        tool=tool,
        page=await _title(request, kernel) if page_text else request.document_id,
        locale=request.locale,
        shared=destruction is Destruction.RENAMES_SHARED,
        page_text=page_text,
    )
    return Question(
        text=respell(text, style), digest=digest, tool=tool, impact=impact, destruction=destruction
    )


async def _title(request: ToolRequest, kernel: Kernel) -> str:
    """The page's title, read as the caller (its id if it has none)."""
    view = await kernel.get_page(
        PageQuery(**request.on_page(), include_body=False, include_options=False, include_blocks=False)
    )
    return str(view.get("title") or request.document_id)


@contextmanager
def _waiting(scope: anyio.CancelScope, call_timeout: float) -> Iterator[None]:
    """The call's deadline does not run while a person reads the question; it starts again after."""
    scope.deadline = math.inf
    try:
        yield
    finally:
        scope.deadline = anyio.current_time() + call_timeout
