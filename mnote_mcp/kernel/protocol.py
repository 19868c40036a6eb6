"""The runtime protocol v1 as code, shared by the relay adapters (clients) and the reference runtime.

docs/runtime-protocol.md is the prose; this module is the one place both sides take paths, headers,
the HTTP status of each error code and the JSON Schemas of requests and replies from, so the adapters
and the runtime cannot drift apart. Each kernel operation is one `Operation` row of `OPERATIONS`: its
route, its request and answer forms (declared once, in `kernel/port.py`; their schemas derived from
those declarations) and the port method it calls. The relays (`kernel/relays/relay.py`), the runtime's HTTP
routes and its mnote-cli adapter (`runtime/`) are all driven by that table: adding a port method is
one row here and one method in `Relay`.

Schemas never close objects (`additionalProperties` stays open): a field added to a port type in a
later version passes through an older peer instead of breaking it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    Literal,
    NotRequired,
    Protocol,
    TypeVar,
    cast,
    get_args,
    get_origin,
)
from urllib.parse import quote, unquote

from jsonschema_rs import Draft202012Validator, Validator
from typing_extensions import TypedDict

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.port import (
    AuditQuery,
    AuditRecord,
    AuthorizeQuery,
    Command,
    CommandOutcome,
    Correlation,
    HistoryQuery,
    HistoryView,
    JSONObject,
    Kernel,
    PageQuery,
    PageRef,
    PageRevision,
    PagesQuery,
    PageView,
    Refusal,
    RevisionsQuery,
    SearchQuery,
    SearchResult,
    Wire,
    revisions_from_wire,
    revisions_to_wire,
)
from mnote_mcp.kernel.schemas import SCHEMAS

if TYPE_CHECKING:
    from pydantic import JsonValue

PROTOCOL = "mnote-runtime/v1"
CLI_PROTOCOL_VERSION = 1
IDEMPOTENCY_HEADER = "Idempotency-Key"
TRACEPARENT_HEADER = "traceparent"

# The status a runtime answers for each refusal. The body's `error.code` is authoritative; the status
# lets proxies, logs and humans tell the classes apart. 401 is reserved for the service token.
STATUS_OF: dict[ErrorCode, int] = {
    ErrorCode.UNAUTHENTICATED: 403,
    ErrorCode.PERMISSION_DENIED: 403,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.INVALID_ARGUMENT: 400,
    ErrorCode.CONFLICT: 409,
    ErrorCode.IDEMPOTENCY_CONFLICT: 422,
    ErrorCode.OPTION_NOT_WIRED: 422,
    ErrorCode.RUNTIME_UNAVAILABLE: 503,
    ErrorCode.INTERNAL: 500,
}
SERVICE_TOKEN_STATUS = 401
# Statuses that mean "not done, try again": the adapter retries them (bounded, with backoff).
RETRY_STATUSES = frozenset({429, 502, 503, 504})

T = TypeVar("T")
Req = TypeVar("Req")
Ans = TypeVar("Ans")
W = TypeVar("W", bound=Wire)


# -- the idempotency header ----------------------------------------------------------------

# Visible ASCII except "%" passes as is, so ordinary keys are sent verbatim; anything else (spaces,
# non-ASCII) is percent-encoded as UTF-8, because a header value cannot carry it.
_KEY_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")


def encode_key(key: str) -> str:
    return quote(key, safe=_KEY_SAFE)


def decode_key(value: str) -> str:
    return unquote(value)


# -- schemas, derived from the declarations ----------------------------------------------------------


def _validator(schema: JSONObject) -> Validator:
    return Draft202012Validator(schema, validate_formats=False)


def first_error(validator: Validator, value: object) -> tuple[str, str] | None:
    """(JSON pointer, reason) of the first schema violation, or None when the value conforms."""
    if validator.is_valid(value):
        return None
    errors = sorted(
        validator.iter_errors(value), key=lambda e: ([str(part) for part in e.instance_path], e.message)
    )
    error = errors[0]
    return "/" + "/".join(str(part) for part in error.instance_path), error.message[:300]


def check_request(validator: Validator, value: object, pointer_prefix: str = "") -> None:
    """Refuse a request envelope that breaks the protocol, naming where (runtime side)."""
    problem = first_error(validator, value)
    if problem is not None:
        pointer, reason = problem
        raise MnoteError(
            ErrorCode.INVALID_ARGUMENT,
            Reason.ENVELOPE,
            {"pointer": pointer_prefix + (pointer if pointer != "/" else ""), "reason": reason},
        )


@dataclass(frozen=True)
class WireForm(Generic[T]):
    """How a value of type T travels: `declared` is the wire type its schema is derived from (`T`
    itself, or what T is written as), `encode`/`decode` turn one into the other. Its schema is the one
    `kernel/schemas.py` keeps under its name (derived by pydantic from `declared`: `derived_schema`);
    the validator is built on first use."""

    declared: Any  # a type expression
    encode: Callable[[T], JsonValue]
    decode: Callable[[JsonValue], T]

    @property
    def name(self) -> str:
        """`Command`, `list[PageRef]`: the declared type's name, the key of its schema."""
        args = get_args(self.declared)
        if get_origin(self.declared) is list:
            return f"list[{args[0].__name__}]"
        return str(getattr(self.declared, "__name__", None) or self.declared).removeprefix("typing.")

    @cached_property
    def schema(self) -> JSONObject:
        return SCHEMAS[self.name]

    @property
    def derived_schema(self) -> JSONObject:
        """The schema pydantic derives from the declaration (imports pydantic: for kernel/schemas.py)."""
        from mnote_mcp.kernel.wireschema import schema_of

        return schema_of(self.declared)

    @cached_property
    def validator(self) -> Validator:
        return _validator(self.schema)


def modeled(kind: type[W]) -> WireForm[W]:
    """A `Wire` dataclass: `to_wire` out, `from_wire` in."""
    return WireForm(kind, kind.to_wire, cast("Callable[[JsonValue], W]", kind.from_wire))


def listed(kind: type[W]) -> WireForm[list[W]]:
    return WireForm(
        list[kind],  # type: ignore[valid-type]
        lambda items: [item.to_wire() for item in items],
        lambda data: [kind.from_wire(item) for item in cast(list[JSONObject], data)],
    )


def as_is(declared: type[T]) -> WireForm[T]:
    """JSON the kernel builds itself (a TypedDict, a list of them): checked by the schema, never copied
    (a TypedDict is its own JSON, so both ways are the value itself)."""
    return WireForm(
        declared, cast("Callable[[T], JsonValue]", _same), cast("Callable[[JsonValue], T]", _same)
    )


def _same(value: T) -> T:
    return value


class ErrorBody(TypedDict):
    """A refusal on the wire: `MnoteError.to_wire()`."""

    code: str
    reason: str
    details: NotRequired[JSONObject]


class CliRequest(TypedDict):
    """The envelope of one mnote-cli request; the rest is the operation's (`Operation.carrier`)."""

    version: NotRequired[Literal[1]]
    op: str
    traceparent: NotRequired[str]


ERROR = as_is(ErrorBody)
CLI_REQUEST = as_is(CliRequest)


# -- the operations ------------------------------------------------------------------------------------


class MalformedReplyError(ValueError):
    """A reply that does not follow the protocol; the adapter turns it into runtime_unavailable."""


class Traced(Protocol):
    @property
    def correlation(self) -> Correlation: ...


def trace_of(request: Traced) -> str:
    return request.correlation.trace_id


@dataclass(frozen=True)
class Operation(Generic[Req, Ans]):
    """One kernel operation on the wire.

    `name` is the port method and the CLI op; `method` and `path` its HTTP route; `reply_key` the key
    its answer sits under in an HTTP reply. `carrier` is the key of the mnote-cli request that holds
    the request (`"command"`, `"query"`); None means the request is flat, its fields the CLI request's
    own and, over HTTP, the query string of a GET. `trace` gives the trace id a request carries (sent
    as `traceparent`), `key` its idempotency key (the `Idempotency-Key` header). `run` asks a kernel.
    """

    name: str
    method: str
    path: str
    reply_key: str
    request: WireForm[Req]
    answer: WireForm[Ans]
    run: Callable[[Kernel, Req], Awaitable[Ans]]
    carrier: str | None = None
    trace: Callable[[Req], str] | None = None
    key: Callable[[Req], str] | None = None

    def decode(self, value: JsonValue) -> Ans:
        """A reply's value, checked against the answer's schema whole before any of it is read."""
        problem = first_error(self.answer.validator, value)
        if problem is not None:
            raise MalformedReplyError(f"{self.name} reply at {problem[0]}: {problem[1]}")
        return self.answer.decode(value)


def _authorized(value: JsonValue) -> None:
    return None


EXECUTE = Operation(
    "execute",
    "POST",
    "/v1/commands",
    "outcome",
    modeled(Command),
    modeled(CommandOutcome),
    lambda kernel, command: kernel.execute(command),
    carrier="command",
    trace=trace_of,
    key=lambda command: command.idempotency_key,
)
GET_PAGE = Operation(
    "get_page",
    "POST",
    "/v1/pages/query",
    "page",
    modeled(PageQuery),
    as_is(PageView),
    lambda kernel, query: kernel.get_page(query),
    carrier="query",
    trace=trace_of,
)
# An authorized actor is answered `{"authorized": true}`; a refusal is the usual error body.
AUTHORIZE = Operation(
    "authorize",
    "POST",
    "/v1/authorize",
    "authorized",
    modeled(AuthorizeQuery),
    WireForm[None](Literal[True], lambda _: True, _authorized),
    lambda kernel, query: kernel.authorize(
        query.actor_id, query.workspace_id, query.document_id, query.scope
    ),
    carrier="query",
)
LIST_PAGES = Operation(
    "list_pages",
    "GET",
    "/v1/pages",
    "pages",
    modeled(PagesQuery),
    listed(PageRef),
    lambda kernel, query: kernel.list_pages(query),
)
PAGE_REVISIONS = Operation(
    "page_revisions",
    "POST",
    "/v1/pages/revisions",
    "revisions",
    modeled(RevisionsQuery),
    WireForm(
        list[PageRevision],
        lambda revisions: cast("JsonValue", revisions_to_wire(revisions)),
        lambda data: revisions_from_wire(cast(list[PageRevision], data)),
    ),
    lambda kernel, query: kernel.page_revisions(query.actor_id, query.pages),
    carrier="query",
)
PAGE_HISTORY = Operation(
    "page_history",
    "POST",
    "/v1/pages/history",
    "history",
    modeled(HistoryQuery),
    as_is(HistoryView),
    lambda kernel, query: kernel.page_history(query),
    carrier="query",
    trace=trace_of,
)
SEARCH_PAGES = Operation(
    "search_pages",
    "POST",
    "/v1/pages/search",
    "search",
    modeled(SearchQuery),
    as_is(SearchResult),
    lambda kernel, query: kernel.search_pages(query),
    carrier="query",
    trace=trace_of,
)
AUDIT_TRAIL = Operation(
    "audit_trail",
    "GET",
    "/v1/audit",
    "records",
    modeled(AuditQuery),
    as_is(list[AuditRecord]),
    lambda kernel, query: kernel.audit_trail(
        trace_id=query.trace_id, command_id=query.command_id, limit=query.limit
    ),
)
# A write the person refused when asked (issue 25): audited, never run. A route of its own rather than
# a marker on `execute`: a runtime that does not know the marker would ignore it and make the write.
RECORD_REFUSAL = Operation(
    "record_refusal",
    "POST",
    "/v1/refusals",
    "record",
    modeled(Refusal),
    as_is(AuditRecord),
    lambda kernel, refusal: kernel.record_refusal(refusal),
    carrier="refusal",
    trace=trace_of,
)
OPERATIONS: dict[str, Operation[Any, Any]] = {
    op.name: op
    for op in (
        EXECUTE,
        GET_PAGE,
        AUTHORIZE,
        LIST_PAGES,
        PAGE_REVISIONS,
        PAGE_HISTORY,
        SEARCH_PAGES,
        AUDIT_TRAIL,
        RECORD_REFUSAL,
    )
}
HEALTH_PATH = "/v1/health"


def decode_error(value: object) -> MnoteError | None:
    """The refusal an error body carries, or None if it is not a protocol error body."""
    if not isinstance(value, Mapping) or first_error(ERROR.validator, value) is not None:
        return None
    return MnoteError.from_wire(value)


def unavailable(adapter: str, cause: Reason, **details: JsonValue) -> MnoteError:
    """The one failure every transport problem becomes: retryable, and naming only safe facts."""
    return MnoteError(
        ErrorCode.RUNTIME_UNAVAILABLE, cause, {"adapter": adapter, "cause": cause.value, **details}
    )
