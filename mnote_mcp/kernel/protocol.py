"""The runtime protocol v1 as code, shared by the relay adapters (clients) and the reference runtime.

docs/runtime-protocol.md is the prose; this module is the single place both sides take paths, headers,
the HTTP status of each error code and the JSON schemas of requests and replies from, so the adapters and the runtime cannot drift apart. Each kernel operation is one
`Operation` row: adding a port method means one row here, one client method, one runtime handler.

Schemas never close objects (`additionalProperties` stays open): a field added to a port type in a
later version passes through an older peer instead of breaking it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from jsonschema_rs import Draft202012Validator, Validator

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.port import CommandOutcome, PageRef, revisions_from_wire
from mnote_mcp.kernel.scopes import Scope

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


# -- the idempotency header ----------------------------------------------------------------

# Visible ASCII except "%" passes as is, so ordinary keys are sent verbatim; anything else (spaces,
# non-ASCII) is percent-encoded as UTF-8, because a header value cannot carry it.
_KEY_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")


def encode_key(key: str) -> str:
    return quote(key, safe=_KEY_SAFE)


def decode_key(value: str) -> str:
    return unquote(value)


# -- schemas -----------------------------------------------------------------------------------

_STRING = {"type": "string"}
_CORRELATION = {
    "type": "object",
    "required": ["sessionId", "runId", "toolCallId", "traceId"],
    "properties": {name: _STRING for name in ("sessionId", "runId", "toolCallId", "traceId")},
}
COMMAND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": [
        "command",
        "workspaceId",
        "documentId",
        "actorId",
        "correlation",
        "idempotencyKey",
        "dryRun",
        "payload",
    ],
    "properties": {
        "command": {"type": "string", "minLength": 1},
        "workspaceId": _STRING,
        "documentId": _STRING,
        "actorId": _STRING,
        "correlation": _CORRELATION,
        "idempotencyKey": _STRING,
        "dryRun": {"type": "boolean"},
        "baseRevision": {"type": ["integer", "null"]},
        "payload": {"type": "object"},
    },
}
PAGE_QUERY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["workspaceId", "documentId", "actorId", "correlation"],
    "properties": {
        "workspaceId": _STRING,
        "documentId": _STRING,
        "actorId": _STRING,
        "correlation": _CORRELATION,
        "includeBody": {"type": "boolean"},
        "includeOptions": {"type": "boolean"},
        "includeBlocks": {"type": "boolean"},
    },
}
_NULLABLE_STRING = {"type": ["string", "null"]}
HISTORY_QUERY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["workspaceId", "documentId", "actorId", "correlation"],
    "properties": {
        "workspaceId": _STRING,
        "documentId": _STRING,
        "actorId": _STRING,
        "correlation": _CORRELATION,
        "filter": {
            "type": ["object", "null"],
            "properties": {
                "runId": _NULLABLE_STRING,
                "sessionId": _NULLABLE_STRING,
                "actorId": _NULLABLE_STRING,
            },
        },
        "sinceRevision": {"type": ["integer", "null"]},
        "limit": {"type": ["integer", "null"]},
        "cursor": _NULLABLE_STRING,
    },
}
SEARCH_QUERY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["actorId", "correlation"],
    "properties": {
        "actorId": _STRING,
        "correlation": _CORRELATION,
        "query": _NULLABLE_STRING,
        "workspaceId": _NULLABLE_STRING,
        "workspaces": {"type": ["array", "null"], "items": _STRING},
        "limit": {"type": ["integer", "null"]},
        "cursor": _NULLABLE_STRING,
    },
}
AUTHORIZE_QUERY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["actorId", "workspaceId", "documentId", "scope"],
    "properties": {
        "actorId": _STRING,
        "workspaceId": _STRING,
        "documentId": _STRING,
        "scope": {"type": "string", "enum": [scope.value for scope in Scope]},
    },
}
AUDIT_QUERY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "traceId": {"type": ["string", "null"]},
        "commandId": {"type": ["string", "null"]},
        "limit": {"type": "integer", "minimum": 0},
    },
}
_OBJECTS = {"type": "array", "items": {"type": "object"}}
OUTCOME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["commandName", "dryRun", "commandId", "revision", "changed"],
    "properties": {
        "commandName": _STRING,
        "dryRun": {"type": "boolean"},
        "commandId": {"type": ["string", "null"]},
        "revision": {"type": "integer"},
        "changed": {"type": "boolean"},
        "diff": _OBJECTS,
        "warnings": _OBJECTS,
        "replayed": {"type": "boolean"},
        "data": {"type": "object"},
    },
}
PAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["documentId", "workspaceId", "title", "revision"],
    "properties": {
        "documentId": _STRING,
        "workspaceId": _STRING,
        "title": _STRING,
        "revision": {"type": "integer"},
        "bodySummary": _STRING,
        "pageOptions": {"type": "object"},
        "blocks": _OBJECTS,
    },
}
HISTORY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["workspaceId", "documentId", "revision", "historyFrom", "entries"],
    "properties": {
        "workspaceId": _STRING,
        "documentId": _STRING,
        "revision": {"type": "integer"},
        "historyFrom": {"type": "integer"},
        "entries": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["revision", "commandName", "commandId", "actorId", "createdAt", "diff"],
                "properties": {"revision": {"type": "integer"}, "diff": _OBJECTS},
            },
        },
        "nextCursor": _STRING,
    },
}
SEARCH_HITS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["hits"],
    "properties": {
        "hits": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["workspaceId", "documentId", "title", "revision", "updatedAt"],
                "properties": {
                    "workspaceId": _STRING,
                    "documentId": _STRING,
                    "title": _STRING,
                    "revision": {"type": "integer"},
                    "updatedAt": _STRING,
                    "snippets": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["blockId", "text"],
                            "properties": {"blockId": _STRING, "text": _STRING},
                        },
                    },
                },
            },
        },
        "nextCursor": _STRING,
    },
}
_PAGE_REF = {
    "type": "object",
    "required": ["workspaceId", "documentId", "title", "revision"],
    "properties": {
        "workspaceId": _STRING,
        "documentId": _STRING,
        "title": _STRING,
        "revision": {"type": "integer"},
    },
}
PAGE_REFS_SCHEMA: dict[str, Any] = {"type": "array", "items": _PAGE_REF}
AUDIT_RECORDS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {"type": "object", "required": ["commandId"], "properties": {"commandId": _STRING}},
}
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["code", "reason"],
    "properties": {"code": _STRING, "reason": _STRING, "details": {"type": "object"}},
}
_PAGE_KEY = {
    "type": "object",
    "required": ["workspaceId", "documentId"],
    "properties": {"workspaceId": _STRING, "documentId": _STRING},
}
PAGE_REVISIONS_QUERY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["actorId", "pages"],
    "properties": {"actorId": _STRING, "pages": {"type": "array", "items": _PAGE_KEY}},
}
REVISIONS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["workspaceId", "documentId", "revision"],
        "properties": {"workspaceId": _STRING, "documentId": _STRING, "revision": {"type": "integer"}},
    },
}
CLI_REQUEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["op"],
    "properties": {
        "version": {"const": CLI_PROTOCOL_VERSION},
        "op": {"type": "string"},
        "traceparent": _STRING,
    },
}


def _validator(schema: dict[str, Any]) -> Validator:
    return Draft202012Validator(schema, validate_formats=False)


def first_error(validator: Validator, value: Any) -> tuple[str, str] | None:
    """(JSON pointer, reason) of the first schema violation, or None when the value conforms."""
    if validator.is_valid(value):
        return None
    errors = sorted(
        validator.iter_errors(value), key=lambda e: ([str(part) for part in e.instance_path], e.message)
    )
    error = errors[0]
    return "/" + "/".join(str(part) for part in error.instance_path), error.message[:300]


def check_request(validator: Validator, value: Any, pointer_prefix: str = "") -> None:
    """Refuse a request envelope that breaks the protocol, naming where (runtime side)."""
    problem = first_error(validator, value)
    if problem is not None:
        pointer, reason = problem
        raise MnoteError(
            ErrorCode.INVALID_ARGUMENT,
            Reason.ENVELOPE,
            {"pointer": pointer_prefix + (pointer if pointer != "/" else ""), "reason": reason},
        )


COMMAND = _validator(COMMAND_SCHEMA)
PAGE_REVISIONS_QUERY = _validator(PAGE_REVISIONS_QUERY_SCHEMA)
PAGE_QUERY = _validator(PAGE_QUERY_SCHEMA)
HISTORY_QUERY = _validator(HISTORY_QUERY_SCHEMA)
SEARCH_QUERY = _validator(SEARCH_QUERY_SCHEMA)
AUTHORIZE_QUERY = _validator(AUTHORIZE_QUERY_SCHEMA)
AUDIT_QUERY = _validator(AUDIT_QUERY_SCHEMA)
CLI_REQUEST = _validator(CLI_REQUEST_SCHEMA)
_ERROR = _validator(ERROR_SCHEMA)


# -- replies -----------------------------------------------------------------------------------


class MalformedReplyError(ValueError):
    """A reply that does not follow the protocol; the adapter turns it into runtime_unavailable."""


@dataclass(frozen=True, slots=True)
class Operation:
    """One kernel operation on the wire: its HTTP route, its CLI op name, and how its reply decodes."""

    name: str
    method: str
    path: str
    reply_key: str
    schema: Validator
    convert: Callable[[Any], Any]

    def decode(self, value: Any) -> Any:
        problem = first_error(self.schema, value)
        if problem is not None:
            raise MalformedReplyError(f"{self.name} reply at {problem[0]}: {problem[1]}")
        return self.convert(value)


EXECUTE = Operation(
    "execute", "POST", "/v1/commands", "outcome", _validator(OUTCOME_SCHEMA), CommandOutcome.from_wire
)
GET_PAGE = Operation("get_page", "POST", "/v1/pages/query", "page", _validator(PAGE_SCHEMA), dict)
LIST_PAGES = Operation(
    "list_pages",
    "GET",
    "/v1/pages",
    "pages",
    _validator(PAGE_REFS_SCHEMA),
    lambda refs: [PageRef.from_wire(ref) for ref in refs],
)
AUDIT_TRAIL = Operation("audit_trail", "GET", "/v1/audit", "records", _validator(AUDIT_RECORDS_SCHEMA), list)
PAGE_REVISIONS = Operation(
    "page_revisions",
    "POST",
    "/v1/pages/revisions",
    "revisions",
    _validator(REVISIONS_SCHEMA),
    revisions_from_wire,
)
PAGE_HISTORY = Operation(
    "page_history", "POST", "/v1/pages/history", "history", _validator(HISTORY_SCHEMA), dict
)
SEARCH_PAGES = Operation(
    "search_pages", "POST", "/v1/pages/search", "search", _validator(SEARCH_HITS_SCHEMA), dict
)
# An authorized actor is answered `{"authorized": true}`; a refusal is the usual error body.
AUTHORIZE = Operation(
    "authorize", "POST", "/v1/authorize", "authorized", _validator({"const": True}), lambda _: None
)
OPERATIONS: dict[str, Operation] = {
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
    )
}
HEALTH_PATH = "/v1/health"


def decode_error(value: Any) -> MnoteError | None:
    """The refusal an error body carries, or None if it is not a protocol error body."""
    if not isinstance(value, Mapping) or first_error(_ERROR, value) is not None:
        return None
    return MnoteError.from_wire(value)


def unavailable(adapter: str, cause: Reason, **details: Any) -> MnoteError:
    """The one failure every transport problem becomes: retryable, and naming only safe facts."""
    return MnoteError(
        ErrorCode.RUNTIME_UNAVAILABLE, cause, {"adapter": adapter, "cause": cause.value, **details}
    )


def authorize_query(actor_id: str, workspace_id: str, document_id: str, scope: Scope) -> dict[str, str]:
    """The body of an `authorize` request (both relays send exactly this)."""
    return {"actorId": actor_id, "workspaceId": workspace_id, "documentId": document_id, "scope": scope.value}
