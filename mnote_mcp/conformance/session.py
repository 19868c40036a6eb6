"""One run of the kit: every request goes to the runtime and to the embedded kernel on the mirror.

`Session.call` is what the checks use: it sends a request to the runtime, notes the exchange for the
operation's `schema.<op>` check (and a refusal for `refusals.reveal_nothing`), asks the mirror the same
question, and compares the two answers (`compare.py`). A reply that breaks the protocol stops the check
that asked (`ProtocolBrokenError`: the check is reported skipped, naming `schema.<op>`, which fails); a different
answer fails it (`CheckFailedError`, with the request, the expected and the actual answer, trimmed).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, Unpack

from mnote_mcp.conformance.compare import BlockIds, first_difference, normal, plain
from mnote_mcp.conformance.options import DEFAULT_SHOWN_CHARS
from mnote_mcp.conformance.seed import Scratch
from mnote_mcp.conformance.wire import Exchange, Wire
from mnote_mcp.kernel.errors import ErrorCode, MnoteError
from mnote_mcp.kernel.limits import PageLimits
from mnote_mcp.kernel.port import (
    Command,
    CommandName,
    Correlation,
    JSONObject,
    Kernel,
    PageQuery,
    Refusal,
    Refused,
)
from mnote_mcp.kernel.protocol import EXECUTE, GET_PAGE, Ans, Operation, Req

if TYPE_CHECKING:
    from _typeshed import DataclassInstance
    from pydantic import JsonValue

D = TypeVar("D", bound="DataclassInstance")

# Refusals whose details are only ids: `refusals.reveal_nothing` holds them to the embedded kernel's,
# every other check compares their code and reason (so a leak fails the one check that names it).
PERMISSION_CODES = frozenset(
    {ErrorCode.UNAUTHENTICATED.value, ErrorCode.PERMISSION_DENIED.value, ErrorCode.NOT_FOUND.value}
)


def shown(value: object, limit: int) -> str:
    """`value` as compact JSON, cut to `limit` characters (saying how much was left out)."""
    text = (
        value
        if isinstance(value, str)
        else json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    )
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


# What a check compares of two answers (`Session.call`'s `keep`): both are narrowed by it first.
Keep = Callable[["JsonValue"], "JsonValue"]


class QueryFlags(TypedDict, total=False):
    """What a check may set of a `PageQuery` besides the page, the actor and the workspace."""

    include_body: bool
    include_options: bool
    include_blocks: bool
    format: str
    block_ids: tuple[str, ...] | None
    max_blocks: int | None
    cursor: str | None


class CheckFailedError(Exception):
    """The runtime broke what the check holds it to."""

    def __init__(self, message: str, *, request: str = "", expected: str = "", actual: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.request = request
        self.expected = expected
        self.actual = actual


class ProtocolBrokenError(Exception):
    """A reply the protocol does not allow: the check cannot go on (its operation's schema check fails)."""

    def __init__(self, op: str, problem: str) -> None:
        super().__init__(f"{op}: {problem}")
        self.op = op
        self.problem = problem


class NotApplicableError(Exception):
    """The check does not apply to this runtime or this run; the message says why."""


@dataclass
class Answer:
    """The runtime's answer to one request and the embedded kernel's."""

    op: str
    request: JsonValue  # the wire request
    exchange: Exchange
    expected_value: Any = None
    expected_error: JSONObject | None = None

    @property
    def ok(self) -> bool:
        return self.exchange.answered

    @property
    def value(self) -> Any:
        return self.exchange.value

    @property
    def error(self) -> JSONObject:
        return self.exchange.error or {}

    @property
    def refusal(self) -> tuple[str, str] | None:
        error = self.exchange.error
        return None if error is None else (str(error.get("code")), str(error.get("reason")))


@dataclass
class OperationLedger:
    """What `schema.<op>` reports: how many replies of the operation were seen, and the first bad one."""

    answers: int = 0
    refusals: int = 0
    broken: Exchange | None = None
    broken_count: int = 0


@dataclass
class RefusalSeen:
    op: str
    request: JsonValue
    exchange: Exchange
    expected: JSONObject | None  # the mirror's refusal of the same request, if it refused


@dataclass
class Session:
    wire: Wire
    mirror: Kernel
    scratch: Scratch
    limits: PageLimits
    shown_chars: int = DEFAULT_SHOWN_CHARS
    nonce: str = field(default_factory=lambda: secrets.token_hex(3))
    ledger: dict[str, OperationLedger] = field(default_factory=dict)
    refusals: list[RefusalSeen] = field(default_factory=list)
    check: str = "kit"  # the check running: names its keys, runs and traces
    ids: BlockIds = field(init=False)

    def __post_init__(self) -> None:
        self.ids = BlockIds(self.scratch.block_ids())

    # -- requests ---------------------------------------------------------------------------------

    async def send(self, op: Operation[Req, Ans], request: Req) -> Exchange:
        """The runtime alone (a check that holds it to an invariant, not to the mirror)."""
        exchange = await self.wire.send(op, request)
        self._note(op, exchange)
        return exchange

    async def ask(self, op: Operation[Req, Ans], request: Req) -> Exchange:
        """The runtime alone, for an answer the check needs (a reply that breaks the protocol blocks it)."""
        exchange = await self.send(op, request)
        if exchange.problem is not None:
            raise ProtocolBrokenError(op.name, exchange.problem)
        return exchange

    async def call(
        self,
        op: Operation[Req, Ans],
        request: Req,
        *,
        mirror: Req | None = None,
        keep: Keep | None = None,
        why: str = "",
    ) -> Answer:
        """`request` to the runtime and (or `mirror`, where a cursor or commandId is the mirror's own)
        to the embedded kernel; the answers must be the same (`keep` narrows both first)."""
        wire = plain(op.request.encode(request))
        self.ids.note_sent(wire)
        exchange = await self.send(op, request)
        if exchange.problem is not None:
            raise ProtocolBrokenError(op.name, exchange.problem)
        if mirror is None:
            translated = self.ids.request_for_mirror(wire)
            mirror = request if translated == wire else op.request.decode(translated)
        answer = Answer(op.name, wire, exchange)
        try:
            answer.expected_value = plain(op.answer.encode(await op.run(self.mirror, mirror)))
        except MnoteError as error:
            refusal = plain(error.to_wire())
            assert isinstance(refusal, dict)
            answer.expected_error = refusal
        if exchange.error is not None:
            self.refusals.append(RefusalSeen(op.name, wire, exchange, answer.expected_error))
        self._compare(answer, keep, why)
        return answer

    def _note(self, op: Operation[Req, Ans], exchange: Exchange) -> None:
        entry = self.ledger.setdefault(op.name, OperationLedger())
        if exchange.problem is not None:
            entry.broken_count += 1
            entry.broken = entry.broken or exchange
        elif exchange.answered:
            entry.answers += 1
        else:
            entry.refusals += 1

    def _compare(self, answer: Answer, keep: Keep | None, why: str) -> None:
        exchange = answer.exchange
        request = answer.request
        if exchange.answered and answer.expected_error is None:
            self.ids.learn(exchange.value, answer.expected_value)
            actual = self.ids.runtime_as_mirror(exchange.value)
            expected = answer.expected_value
            if keep is not None:
                actual, expected = keep(actual), keep(expected)
            self._same(
                request,
                normal(expected),
                normal(actual),
                why or f"{answer.op} answers as the embedded kernel",
            )
            return
        if exchange.error is not None and answer.expected_error is not None:
            got, want = exchange.error, answer.expected_error
            if (got.get("code"), got.get("reason")) != (want["code"], want["reason"]):
                self.fail(
                    why or f"{answer.op} refuses as the embedded kernel",
                    request=request,
                    expected={"error": want},
                    actual={"error": got},
                )
            if want["code"] not in PERMISSION_CODES:
                details = self.ids.runtime_as_mirror(got.get("details", {}))
                self._same(
                    request,
                    normal(want.get("details", {})),
                    normal(details),
                    f"the details of {want['code']} ({want['reason']})",
                )
            return
        expected = (
            {"error": answer.expected_error} if answer.expected_error is not None else answer.expected_value
        )
        actual = {"error": exchange.error} if exchange.error is not None else exchange.value
        refused = "refused" if exchange.error is not None else "answered"
        self.fail(
            f"{answer.op}: the runtime {refused} where the embedded kernel "
            f"{'refused' if answer.expected_error is not None else 'answered'}"
            + (f" ({why})" if why else ""),
            request=request,
            expected=expected,
            actual=actual,
        )

    def _same(self, request: JsonValue, expected: JsonValue, actual: JsonValue, why: str) -> None:
        found = first_difference(expected, actual)
        if found is None:
            return
        pointer, want, got = found
        self.fail(
            f"{why}: differs at {pointer}: expected {shown(want, 200)}, got {shown(got, 200)}",
            request=request,
            expected=expected,
            actual=actual,
        )

    # -- what checks say ----------------------------------------------------------------------------

    def fail(
        self, message: str, *, request: object = None, expected: object = None, actual: object = None
    ) -> None:
        limit = self.shown_chars
        raise CheckFailedError(
            message,
            request="" if request is None else shown(request, limit),
            expected="" if expected is None else shown(expected, limit),
            actual="" if actual is None else shown(actual, limit),
        )

    def expect(
        self,
        condition: bool,
        message: str,
        *,
        request: object = None,
        expected: object = None,
        actual: object = None,
    ) -> None:
        if not condition:
            self.fail(message, request=request, expected=expected, actual=actual)

    # -- building requests ------------------------------------------------------------------------------

    @property
    def ws(self) -> str:
        return self.scratch.ws

    def actor(self, role: str) -> str:
        return self.scratch.actor(role)

    @property
    def trace(self) -> str:
        """This check's trace id: unique to the run, so an audit lookup by it finds this check's records."""
        return f"kit_{self.scratch.tag}_{self.nonce}_{self.check}"

    def correlation(
        self, call: str = "call", *, run: str | None = None, trace: str | None = None
    ) -> Correlation:
        return Correlation(
            f"kit_{self.scratch.tag}_{self.nonce}", run or f"run_{self.check}", call, trace or self.trace
        )

    def key(self, word: str) -> str:
        """An idempotency key of this check's own."""
        return f"{self.nonce}_{self.check}_{word}"

    def command(
        self,
        name: str,
        payload: Mapping[str, object],
        page: str,
        key: str,
        *,
        actor: str = "editor",
        ws: str | None = None,
        dry_run: bool = False,
        base: int | None = None,
        run: str | None = None,
    ) -> Command:
        return Command(
            name=name,
            workspace_id=ws or self.ws,
            document_id=page,
            actor_id=self.actor(actor) if actor else "",
            correlation=self.correlation(f"call_{key}", run=run),
            idempotency_key=self.key(key),
            dry_run=dry_run,
            payload=payload,
            base_revision=base,
        )

    def refusal(
        self,
        page: str,
        key: str,
        outcome: Refused = Refused.DECLINED,
        *,
        actor: str = "editor",
        name: str = CommandName.PAGE_BODY_SAVE,
        trace: str | None = None,
    ) -> Refusal:
        """A write the person refused, named as `command` names one (its key is this check's own)."""
        return Refusal(
            name,
            self.ws,
            page,
            self.actor(actor),
            self.correlation(f"call_{key}", trace=trace),
            self.key(key),
            outcome,
        )

    def query(
        self, page: str, actor: str = "editor", *, ws: str | None = None, **flags: Unpack[QueryFlags]
    ) -> PageQuery:
        return PageQuery(ws or self.ws, page, self.actor(actor) if actor else "", self.correlation(), **flags)

    async def execute(self, command: Command, why: str = "") -> Answer:
        return await self.call(EXECUTE, command, why=why)

    async def written(self, command: Command, why: str = "") -> Answer:
        """A command the check needs to succeed: refused, it fails the check there."""
        answer = await self.call(EXECUTE, command, why=why)
        self.expect(
            answer.ok, f"{command.name} must be answered ({why})", request=answer.request, actual=answer.error
        )
        return answer

    async def revision(self, page: str, *, actor: str = "owner", ws: str | None = None) -> int:
        """The page's revision (the same on the mirror, or the check fails here)."""
        brief = self.query(
            page, actor, ws=ws, include_body=False, include_options=False, include_blocks=False
        )
        answer = await self.call(GET_PAGE, brief, why=f"the page {page} after the check's writes")
        return int(answer.value["revision"]) if answer.ok else -1

    def expect_refused(self, answer: Answer, message: str, code: str, reason: str | None = None) -> None:
        """`answer` is a refusal with `code` (and `reason`, when one is named)."""
        refusal = answer.refusal
        refused = refusal is not None and refusal[0] == code and reason in (None, refusal[1])
        self.expect(
            refused, message, request=answer.request, actual=answer.value if answer.ok else answer.error
        )

    async def expect_revision(self, page: str, expected: int, message: str) -> None:
        """The page is at `expected` (what a check's writes, or its refusals, left it at)."""
        revision = await self.revision(page)
        self.expect(revision == expected, message, expected=expected, actual=revision)

    async def rest(self, op: Operation[D, Ans], request: D, first: Answer, message: str) -> Answer:
        """What follows `first` (the answer to `request`, which must name a cursor): the runtime asked
        with its cursor, the mirror with its own."""
        self.expect(first.ok and "nextCursor" in first.value, message, actual=first.value)
        return await self.call(
            op,
            replace(request, cursor=first.value["nextCursor"]),
            mirror=replace(request, cursor=first.expected_value["nextCursor"]),
        )

    def variant(self, request: D, **fields: object) -> D:
        """The same request with these fields changed (a dry run of it, another trace)."""
        return replace(request, **fields)
