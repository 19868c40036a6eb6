"""One tool call, start to finish: map, validate, check scope, run, and always answer an envelope.

The SDK's low-level server neither validates arguments nor catches exceptions (it would turn them into
JSON-RPC errors the model never sees), so this is where every failure becomes an `isError` envelope.
Only an unknown tool name escapes, as `UnknownToolError`, to become a protocol error. The dispatcher
also counts the calls in flight (`InFlight`), so that a closing connection or a stopping server can let
them answer first.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Protocol, TypeVar

import anyio
import anyio.to_thread

from mnote_mcp.base.logs import log_call
from mnote_mcp.base.running import Running
from mnote_mcp.base.telemetry.tracing import call_span, new_trace_id, record_outcome, span_ids, tracing_on
from mnote_mcp.calls.confirmation import (
    DEFAULT_CONFIRMATION,
    Asker,
    Confirmation,
    ConfirmationPending,
    confirmed_write,
    might_ask,
)
from mnote_mcp.calls.fairshare import FairShare
from mnote_mcp.calls.handles import Handles
from mnote_mcp.calls.mapping import (
    Arguments,
    Caller,
    admit,
    argument_items,
    build_request,
    correlate,
    exact_numbers,
    normalize_arguments,
)
from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.port import Correlation, Kernel
from mnote_mcp.tools.budget import DEFAULT_MAX_RESULT_CHARS, fits, result_limit
from mnote_mcp.tools.cost import Cost
from mnote_mcp.tools.registry import Registry, ToolSpec
from mnote_mcp.tools.resultcheck import result_check
from mnote_mcp.tools.results import trim_result
from mnote_mcp.tools.titles import page_named
from mnote_mcp.vocabulary.envelope import (
    DEFAULT_MAX_ARGUMENT_DEPTH,
    Envelope,
    ToolRequest,
    ToolResult,
    disclosed,
    failure,
    success,
)
from mnote_mcp.vocabulary.identity import Identity
from mnote_mcp.vocabulary.messages import DEFAULT_LOCALE, Locale
from mnote_mcp.vocabulary.naming import respell_envelope
from mnote_mcp.vocabulary.scopes import Scope

logger = logging.getLogger(__name__)
T = TypeVar("T")
DEFAULT_GRACE_SECONDS = 30.0
# Arguments with more items than this (array entries, object members: 20,000 block ids) are heavy:
# checked on a worker thread once the caller is let in. Below it, checks take well under a millisecond.
INLINE_ARGUMENT_ITEMS = 2_000
# A call with heavy arguments is charged as a heavy read, one call per this many items (counted up to
# 16 times it): 20,000 block ids weigh 11 calls (fair share, issue 32).
HEAVY_WEIGHT_CAP = 16 * INLINE_ARGUMENT_ITEMS
_QUIET_ROUNDS = 3
_ROUND_SECONDS = 0.02


# A failure that is the server's, not the caller's: the span of such a call is marked an error.
SERVER_FAULTS = frozenset({ErrorCode.RUNTIME_UNAVAILABLE, ErrorCode.INTERNAL})


class UnknownToolError(LookupError):
    pass


class CallObserver(Protocol):
    """Told of every answered call (the metrics): the tool, its error's code and reason (None for a
    success) and how long it took."""

    def call_answered(self, tool: str, code: str | None, reason: str | None, seconds: float) -> None: ...


class InFlight(Running):
    """The tool calls in progress; `wait_idle` returns once there are none; `stop` ends them."""

    def __init__(self) -> None:
        super().__init__()
        self.stopping = False  # set by `stop`: calls answer `shutting_down`
        self.closing = False  # set when the server stops accepting: it is no longer ready (/readyz)

    def stop(self) -> int:
        """The server is stopping and will not wait any longer: every call in flight is cancelled and
        answers `shutting_down` (a call on a worker thread is abandoned, not interrupted, as after its
        timeout: its transaction commits or rolls back whole, and the idempotency ledger makes the
        retry safe); a call that arrives from now on is answered so at once. How many were cancelled."""
        self.stopping = True
        return self.cancel()

    async def wait_idle(self, grace: float = DEFAULT_GRACE_SECONDS) -> bool:
        """True when idle; False when the grace period ran out first."""
        return await self.settle(grace)

    async def settle(self, grace: float = DEFAULT_GRACE_SECONDS) -> bool:
        """Wait until idle and staying idle: a request read just before the end may not have reached
        its handler yet, so idleness must hold across a few scheduling rounds."""
        with anyio.move_on_after(grace):
            quiet = 0
            while quiet < _QUIET_ROUNDS:
                await anyio.sleep(_ROUND_SECONDS)
                if self.count:
                    quiet = 0
                    await self.wait_idle(grace)
                else:
                    quiet += 1
            return True
        return False


class Dispatcher:
    def __init__(
        self,
        registry: Registry,
        kernel: Kernel,
        *,
        locale: Locale = DEFAULT_LOCALE,
        read_only: bool = False,
        call_timeout: float = 60.0,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
        max_argument_depth: int = DEFAULT_MAX_ARGUMENT_DEPTH,
        confirmation: Confirmation = DEFAULT_CONFIRMATION,
        fair: FairShare | None = None,
    ) -> None:
        self.registry = registry
        # What a read-only server still answers, as its refusal of a write names them: the tools this
        # server serves that do not write, derived from the registry (the hint once named two by hand).
        self.read_tools = [spec.advertised_name(registry.style) for spec in registry.specs if not spec.writes]
        self.kernel = kernel
        self.locale: Locale = locale
        self.read_only = read_only
        self.call_timeout = call_timeout
        self.max_result_chars = max_result_chars
        self.max_argument_depth = max_argument_depth
        self.confirmation = confirmation
        self.fair = fair or FairShare()  # per-actor rates and the admission (nothing limited by default)
        # Confirmation handles, under a key of this process until the server installs the key file's.
        self.handles = Handles(ttl=confirmation.handle_ttl)
        self.inflight = InFlight()
        self.observer: CallObserver | None = None  # metrics, when served (telemetry.metrics.Metrics)
        self.result_check = result_check()  # tests only: every result against its tool's outputSchema

    def exposes(self, spec: ToolSpec, scopes: frozenset[Scope]) -> bool:
        """Whether `tools/list` shows the tool to a connection granted `scopes`: a tool it could only
        be refused (a write tool in read-only mode, a tool needing a scope it lacks) is not listed."""
        return not (self.read_only and spec.writes) and spec.scope in scopes

    def may_ask(self, name: str, arguments: object) -> bool:
        """Whether a call of `name` with `arguments` may have to ask the person first (a transport
        that can carry the question only in some framings chooses by this: `transports/asking.py`)."""
        spec = self.registry.find(name)
        if spec is None or not might_ask(spec, self.confirmation):
            return False
        return not (isinstance(arguments, dict) and arguments.get("dryRun") is True)

    async def call(
        self,
        name: str,
        arguments: Arguments | None,
        meta: Arguments | None,
        identity: Identity,
        asker: Asker | None = None,
    ) -> Envelope:
        """The call's envelope. `asker` is how this request may ask the person to confirm a write
        (`mnote_mcp.calls.confirmation`; None: it cannot); `ConfirmationPending` escapes when the question
        must go back to the client as the request's result."""
        spec = self.registry.find(name)
        if spec is None:
            raise UnknownToolError(name)
        with self.inflight.track():
            return await self._call(spec, arguments, meta, identity, asker)

    async def _permission_first(self, spec: ToolSpec, caller: Caller) -> None:
        """Before an invalid argument is reported, the kernel's checkpoints: a caller who may not make
        this call at all hears that (the contract's order: login, member, page read, then write), not
        what is wrong with arguments for a page it may not use. Asked only when something is invalid,
        or before heavy arguments are checked at all, so a light valid call costs nothing more: the
        kernel checks permissions first on its own. A tool that names no page (search) has no page
        checkpoint: its arguments are judged first."""
        if not caller.page_bound:
            return
        with anyio.move_on_after(self.call_timeout):
            await self.kernel.authorize(caller.actor_id, caller.workspace_id, caller.document_id, spec.scope)

    async def _call(
        self,
        spec: ToolSpec,
        arguments: Arguments | None,
        meta: Arguments | None,
        identity: Identity,
        asker: Asker | None,
    ) -> Envelope:
        started = time.perf_counter()
        traced = tracing_on()
        start_ns = time.time_ns() if traced else 0
        name = spec.advertised_name(self.registry.style)  # the envelope names the tool as served
        schema = self.registry.schema(spec)
        raw = dict(arguments or {})
        # Long arguments (20,000 block ids) are checked on a worker thread, and only once the kernel
        # has let the caller in: nothing the size of a request runs on the event loop, and a caller
        # who may not make the call costs no more for sending much (issue 26).
        items = argument_items(raw, schema, HEAVY_WEIGHT_CAP, skip=spec.kernel_validated)
        heavy = items > INLINE_ARGUMENT_ITEMS
        # Over its actor's rate, a call is answered before any other work (fair share, issue 32).
        cost = Cost.HEAVY if heavy else spec.cost_class
        refused = self.fair.check(cost, identity.actor_id, 1 + items // INLINE_ARGUMENT_ITEMS)
        heavy = heavy and refused is None
        args = raw if refused else await _checked(heavy, partial(normalize_arguments, spec, raw, schema))
        max_id = self.registry.max_id_chars
        correlation = correlate(args, meta, identity, max_id, new_trace_id if traced else None)
        ids = correlation.to_wire()
        try:
            if traced:
                with call_span(spec.name, ids, start_ns, identity.actor_id) as span:
                    envelope, error = await self._answer(
                        spec, name, args, meta, identity, correlation, heavy, asker, refused, cost
                    )
                    audit = envelope["audit"]
                    record_outcome(
                        span,
                        workspace_id=audit.get("workspaceId"),
                        document_id=audit.get("documentId"),
                        command_id=audit.get("commandId"),
                        code=error.code.value if error else None,
                        reason=error.reason.value if error else None,
                        server_fault=error is not None and error.code in SERVER_FAULTS,
                    )
                ids = {**ids, **span_ids(span, correlation.trace_id)}
            else:
                envelope, error = await self._answer(
                    spec, name, args, meta, identity, correlation, heavy, asker, refused, cost
                )
        except ConfirmationPending:
            # The question goes back as this request's result; the call goes on with its retry.
            log_call(
                spec.name, identity.actor_id, "confirm_pending", (time.perf_counter() - started) * 1000, ids
            )
            raise
        seconds = time.perf_counter() - started
        log_call(
            spec.name,
            identity.actor_id,
            error.code.value if error else "ok",
            seconds * 1000,
            ids,
            commandId=envelope["audit"].get("commandId"),
        )
        if self.observer is not None:
            self.observer.call_answered(
                spec.name, error.code.value if error else None, error.reason.value if error else None, seconds
            )
        return envelope

    async def _answer(
        self,
        spec: ToolSpec,
        name: str,
        args: Arguments,
        meta: Arguments | None,
        identity: Identity,
        correlation: Correlation,
        heavy: bool,
        asker: Asker | None,
        refused: MnoteError | None = None,
        cost: Cost = Cost.READ,
    ) -> tuple[Envelope, MnoteError | None]:
        """The call's envelope, and the error it answers (None for a success): `refused` when the
        call was over its rate; an expensive call (`cost`) runs once admitted (never a write: it may
        wait for the person's confirmation)."""
        max_id = self.registry.max_id_chars
        # Echoed in the envelope: only ids of a sane length (a longer one is refused below anyway).
        workspace_id = _echo(args.get("workspaceId"), max_id)
        document_id = _echo(args.get("documentId"), max_id)
        # What the caller may be shown of a page's text: nothing until the connection's scopes are known.
        scopes: frozenset[Scope] = frozenset()
        try:
            if refused is not None:
                raise refused
            if self.inflight.stopping:
                raise shutting_down()
            if spec.writes and self.read_only:
                raise MnoteError(
                    ErrorCode.PERMISSION_DENIED, Reason.READ_ONLY, {"readTools": self.read_tools}
                )
            caller = await _checked(heavy, partial(admit, spec, args, meta, identity))
            scopes = caller.scopes
            named = spec.page_bound and not caller.workspace_id  # "": the page is found by its name
            if named:
                args, caller = await self._page_named(args, caller, identity, None)
            try:
                request, outcome, scope = await self._run(
                    spec, name, args, caller, correlation, heavy, asker, identity, cost
                )
            except MnoteError as error:
                if named or not _no_such_page(spec, error):
                    raise
                # Not a page id of that workspace: a title there? (tools/titles.py; else the same error)
                args, caller = await self._page_named(args, caller, identity, caller.workspace_id, error)
                request, outcome, scope = await self._run(
                    spec, name, args, caller, correlation, heavy, asker, identity, cost
                )
            if scope.cancelled_caught and self.inflight.stopping:
                raise shutting_down()
            if scope.cancelled_caught or outcome is None:
                # A write may still commit after this; its idempotency key makes the retry safe.
                raise MnoteError(
                    ErrorCode.RUNTIME_UNAVAILABLE, Reason.TIMEOUT, {"timeoutSeconds": self.call_timeout}
                )
            envelope = success(
                name,
                correlation,
                request.workspace_id if spec.page_bound else request.workspace_id or None,
                request.document_id if spec.page_bound else None,
                outcome,
                scopes=scopes,
                locale=request.locale,
            )
            if self.result_check is not None:
                self.result_check.check(spec, envelope)
            failed: MnoteError | None = None
        except MnoteError as error:
            envelope = failure(
                name,
                correlation,
                workspace_id,
                document_id,
                error,
                self.locale,
                self.max_result_chars,
                scopes=scopes,
            )
            failed = error
        except ConfirmationPending:
            raise  # the question goes back as this request's result (`_call` logs it)
        except Exception:
            logger.exception("tool %s failed unexpectedly (trace %s)", spec.name, correlation.trace_id)
            failed = MnoteError(ErrorCode.INTERNAL, Reason.UNEXPECTED)
            envelope = failure(
                name,
                correlation,
                workspace_id,
                document_id,
                failed,
                self.locale,
                self.max_result_chars,
                scopes=scopes,
            )
        return respell_envelope(envelope, self.registry.style), failed

    async def _run(
        self,
        spec: ToolSpec,
        name: str,
        args: Arguments,
        caller: Caller,
        correlation: Correlation,
        heavy: bool,
        asker: Asker | None,
        identity: Identity,
        cost: Cost,
    ) -> tuple[ToolRequest, ToolResult | None, anyio.CancelScope]:
        """The call made, once the caller is let in: its request, outcome (None where the scope it ran
        in was cancelled: a timeout, a stop) and that scope. An expensive call (`cost`) runs once
        admitted (never a write: it may wait for the person's confirmation)."""
        outcome: ToolResult | None = None
        try:
            if heavy:
                await self._permission_first(spec, caller)
            request = await _checked(heavy, partial(self._request, spec, args, caller, correlation))
            deadline = anyio.current_time() + self.call_timeout
            admitted = self.fair.admitted(Cost.WRITE if spec.writes else cost, caller.actor_id)
            with self.inflight.cancellable(anyio.CancelScope(deadline=deadline)) as scope:
                async with admitted:  # an expensive call's place and turn (fair share)
                    made = await confirmed_write(
                        spec,
                        request,
                        self.kernel,
                        self.confirmation,
                        asker,
                        tool=name,
                        style=self.registry.style,
                        scope=scope,
                        call_timeout=self.call_timeout,
                        handles=self.handles,
                        principal=identity.principal,
                    )
                    # Before the budget, so that what is measured is what is sent.
                    made = disclosed(made, caller.scopes, request.locale)
                    outcome = await self._within_budget(spec, request, correlation, made)
        except MnoteError as error:
            if error.code is ErrorCode.INVALID_ARGUMENT:
                await self._permission_first(spec, caller)
            raise
        return request, outcome, scope

    async def _page_named(
        self,
        args: Arguments,
        caller: Caller,
        identity: Identity,
        workspace_id: str | None,
        missing: MnoteError | None = None,
    ) -> tuple[Arguments, Caller]:
        """The call's arguments and caller aimed at the one page whose title (or id) `documentId` is,
        in `workspace_id` (None: any of the caller's); `missing` is raised again where no page is."""
        try:
            with anyio.fail_after(self.call_timeout):
                page = await page_named(
                    self.kernel, caller.actor_id, caller.document_id, workspace_id, identity.workspaces
                )
        except TimeoutError:
            raise MnoteError(
                ErrorCode.RUNTIME_UNAVAILABLE, Reason.TIMEOUT, {"timeoutSeconds": self.call_timeout}
            ) from None
        except MnoteError as error:
            if missing is not None and error.code is ErrorCode.NOT_FOUND:
                raise missing from None
            raise
        found = {"workspaceId": page.workspace_id, "documentId": page.document_id}
        return {**args, **found}, replace(
            caller, workspace_id=page.workspace_id, document_id=page.document_id
        )

    def _request(
        self, spec: ToolSpec, args: Arguments, caller: Caller, correlation: Correlation
    ) -> ToolRequest:
        """The request envelope, once its numbers are exact and it matches the advertised schema."""
        exact = exact_numbers(
            args, self.registry.schema(spec), skip=spec.kernel_validated, max_depth=self.max_argument_depth
        )
        return build_request(spec, self.registry.validator(spec), exact, caller, correlation, self.locale)

    async def _within_budget(
        self, spec: ToolSpec, request: ToolRequest, correlation: Correlation, outcome: ToolResult
    ) -> ToolResult:
        """No envelope over `max_result_chars`: the tool's own fit (a page read answers a piece), else
        the write report is trimmed."""
        limit = result_limit(
            self.max_result_chars, spec.name, correlation, request.workspace_id, request.document_id, outcome
        )
        if fits(outcome.result, limit):
            return outcome
        fit = spec.fit or trim_result
        return await fit(request, self.kernel, outcome, limit)


def shutting_down() -> MnoteError:
    """The server stopped before the call finished (or began): a write may still commit after this;
    its idempotency key makes the retry safe."""
    return MnoteError(ErrorCode.RUNTIME_UNAVAILABLE, Reason.SHUTTING_DOWN, {"cause": "shutting_down"})


async def _checked(heavy: bool, check: Callable[[], T]) -> T:
    """`check()` on the event loop, or, for heavy arguments, on a worker thread."""
    return await anyio.to_thread.run_sync(check) if heavy else check()


def _no_such_page(spec: ToolSpec, error: MnoteError) -> bool:
    """The kernel found no page by that id, to a member of the workspace: the name may be a title."""
    return spec.page_bound and error.code is ErrorCode.NOT_FOUND and error.reason is Reason.PAGE


def _echo(value: object, max_chars: int) -> str | None:
    return value if isinstance(value, str) and len(value) <= max_chars else None
