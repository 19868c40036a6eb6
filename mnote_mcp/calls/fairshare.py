"""Fair share (issue 32): what one actor may ask of a replica, the same on every transport.

The MCP specification says a server MUST rate limit tool invocations; and no tenant should slow
another. Two bounds, both keyed by the call's cost class (`tools/cost.py`) and the actor:

- a **rate** per class (`ratelimit.Buckets`): `--read-limit`, `--write-limit`, `--search-limit`,
  `--heavy-limit`, `--completion-limit`, calls a minute with a burst, per actor;
- the **admission** of expensive classes (`admission.Admission`): places, one actor's turn, a bounded
  wait.

A tool call is checked by the dispatcher and refused as an envelope the model can act on
(`mnote_tool_rate_limited`, retryable, `details.retryAfterSeconds` and `details.limit`, in the caller's
words); the requests that are not tool calls but read pages (`resources/read`, `prompts/get`,
`resources/list`, `completion/complete`: `REQUEST_COSTS`) by `FairRequests`, a server middleware,
refused as a JSON-RPC error with the same data. Over HTTP every request is also counted from its
headers (`--request-limit`, `transports/limits.RequestLimit`): a flood beyond the limits is answered
429 with `Retry-After` before its body is read.

The limits bind the actor, not the token: docs/decisions.md, "Fair share: what a limit binds".
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Any, Protocol

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError

from mnote_mcp.calls.admission import Admission, AdmissionBounds
from mnote_mcp.calls.ratelimit import Buckets, Refused
from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.tools.cost import REQUEST_COSTS, CallLimit, Cost, rate_limited
from mnote_mcp.vocabulary.identity import Identity
from mnote_mcp.vocabulary.messages import Locale, render_error

REQUESTS = "request"  # the HTTP requests' limit, beside the classes'
# The JSON-RPC error code of a refused request that is not a tool call (an implementation-defined
# code of the -32000..-32019 band; the SDK uses -32000 and -32001).
RATE_LIMITED_CODE = -32009


def limited_series() -> list[tuple[str, str]]:
    """Every (class, reason) a call or request can be limited for (the metrics show each from 0)."""
    return [
        *((cost.value, Reason.RATE.value) for cost in Cost),
        *(
            (cost.value, reason.value)
            for cost in Cost
            if cost.admitted
            for reason in (Reason.IN_FLIGHT, Reason.SHARE, Reason.BUSY)
        ),
        (REQUESTS, Reason.RATE.value),
    ]


class LimitObserver(Protocol):
    """Told of every limited call or request (the metrics): its class (or `request`) and why."""

    def call_limited(self, limit: str, reason: str) -> None: ...


class FairShare:
    """The rates and the admission of one server (see the module). Without arguments nothing is
    limited: a dispatcher made by hand (tests, benchmarks) is not limited unless it asks."""

    def __init__(
        self,
        limits: Mapping[Cost, CallLimit | None] | None = None,
        *,
        requests: CallLimit | None = None,
        admission: AdmissionBounds | None = None,
    ) -> None:
        named: dict[str, CallLimit | None] = {cost.value: limit for cost, limit in (limits or {}).items()}
        self.buckets = Buckets({**named, REQUESTS: requests})
        self.admission = Admission(admission) if admission is not None else None
        self.observer: LimitObserver | None = None

    def check(self, cost: Cost, actor_id: str | None, weight: int = 1) -> MnoteError | None:
        """The refusal of a call of `cost` (weighing `weight` calls) by this actor now, if over its
        rate; else None, and the call is counted."""
        refused = self.buckets.take(cost.value, actor_id or "", weight)
        if refused is None:
            return None
        self._count(cost.value, Reason.RATE)
        limit = refused.limit
        return rate_limited(
            cost, Reason.RATE, refused.retry_after, perMinute=limit.per_minute, burst=limit.burst
        )

    def request(self, actor_id: str | None, weight: int = 1) -> Refused | None:
        """One HTTP request of this actor (from its headers), weighing `weight` requests: None, or how
        long to wait."""
        refused = self.buckets.take(REQUESTS, actor_id or "", weight)
        if refused is not None:
            self._count(REQUESTS, Reason.RATE)
        return refused

    def admitted(self, cost: Cost, actor_id: str | None) -> AbstractAsyncContextManager[None]:
        """Hold what a call of `cost` must hold while it runs (a place, the actor's turn) or raise its
        refusal; nothing for a class that is not admitted."""
        if self.admission is None or not cost.admitted:
            return nullcontext()
        return self._admit(self.admission, cost, actor_id or "")

    @asynccontextmanager
    async def _admit(self, admission: Admission, cost: Cost, actor_id: str) -> AsyncIterator[None]:
        entered = False
        try:
            async with admission.admit(actor_id, cost):
                entered = True
                yield
        except MnoteError as error:
            if not entered and error.code is ErrorCode.RATE_LIMITED:
                self._count(cost.value, error.reason)
            raise

    def _count(self, limit: str, reason: Reason) -> None:
        if self.observer is not None:
            self.observer.call_limited(limit, reason.value)


class FairRequests:
    """Server middleware: the requests of `REQUEST_COSTS` limited and admitted like tool calls of
    their class. Their results have no envelope, so a refusal is a JSON-RPC error: code
    `RATE_LIMITED_CODE`, the message in the server's words, and `data` the envelope's error
    (`code: mnote_tool_rate_limited`, `retryable`, `hint`, `details.retryAfterSeconds`, `details.limit`)."""

    def __init__(
        self,
        fair: FairShare,
        identity_for: Callable[[ServerRequestContext[Any, Any]], Identity],
        locale: Locale,
    ) -> None:
        self.fair = fair
        self.identity_for = identity_for
        self.locale: Locale = locale

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        cost = REQUEST_COSTS.get(ctx.method)
        if cost is None or ctx.request_id is None:
            return await call_next(ctx)
        actor_id = self.identity_for(ctx).actor_id
        refused = self.fair.check(cost, actor_id)
        if refused is not None:
            raise self.error(refused)
        try:
            async with self.fair.admitted(cost, actor_id):
                return await call_next(ctx)
        except MnoteError as error:
            if error.code is ErrorCode.RATE_LIMITED:
                raise self.error(error) from None
            raise

    def error(self, refusal: MnoteError) -> MCPError:
        rendered = render_error(refusal, self.locale)
        return MCPError(code=RATE_LIMITED_CODE, message=rendered["message"], data=dict(rendered))
