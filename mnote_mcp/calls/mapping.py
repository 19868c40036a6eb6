"""From an MCP `tools/call` to the contract's request envelope (docs/contract.md, "2. The request").

Correlation ids: arguments, then the request `_meta` (`mnote/sessionId`, ..., or a W3C `traceparent`),
then the connection's bindings, then generated. The actor only ever comes from the connection.
Scopes: the connection's grant, narrowed (never widened) by `capabilityScope`.
"""

from __future__ import annotations

import json
import math
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mnote_mcp.base.tracecontext import trace_id_of
from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason, invalid
from mnote_mcp.kernel.port import Correlation
from mnote_mcp.tools.registry import ToolSpec
from mnote_mcp.vocabulary.envelope import (
    CORRELATION_FIELDS,
    DEFAULT_MAX_ARGUMENT_DEPTH,
    DEFAULT_MAX_ID_CHARS,
    ToolRequest,
)
from mnote_mcp.vocabulary.identity import Identity
from mnote_mcp.vocabulary.messages import Locale
from mnote_mcp.vocabulary.scopes import Scope

if TYPE_CHECKING:
    from jsonschema_rs import ValidationError, Validator

META_PREFIX = "mnote/"
ENVELOPE_FIELDS = frozenset(
    {
        *CORRELATION_FIELDS,
        "workspaceId",
        "documentId",
        "idempotencyKey",
        "dryRun",
        "capabilityScope",
        "actorId",
        "baseRevision",
    }
)
_MAX_REASON = 300
_MAX_ERRORS = 5
# The integers the kernel stores (SQLite INTEGER) and every JSON encoder on the way can carry.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# A call's arguments (or its `_meta`) as the client sent them: JSON not yet checked, so every value is
# looked at before it is used. A tool's advertised JSON Schema is read the same way.
Arguments = Mapping[str, object]
Schema = Mapping[str, object]


def members(value: object) -> Mapping[str, object]:
    """A JSON object's members, or none if `value` is not an object."""
    return value if isinstance(value, Mapping) else {}


def correlate(
    arguments: Arguments,
    meta: Arguments | None,
    identity: Identity,
    max_chars: int = DEFAULT_MAX_ID_CHARS,
    new_trace_id: Callable[[], str] | None = None,
) -> Correlation:
    """The four ids, first found wins. Never fails: junk in one place just falls through to the next,
    and so does an id longer than `max_chars` (an argument that long is then refused by the schema,
    but its envelope and log line carry a generated id, never the oversized one).

    A generated `toolCallId` is random (64 bits), never derived from the JSON-RPC id: request ids
    restart at 1 on every connection, so `call_3` would name a call of every run that got that far.
    A generated `traceId` is `new_trace_id()`: random, or while tracing the current span's trace id
    (`telemetry.tracing.new_trace_id`).
    """
    meta = meta or {}

    def pick(name: str) -> str | None:
        for source in (arguments.get(name), meta.get(META_PREFIX + name)):
            if isinstance(source, str) and 0 < len(source) <= max_chars:
                return source
        if name == "traceId":
            from_parent = trace_id_of(meta.get("traceparent"))
            if from_parent:
                return from_parent
        bound = identity.bindings.get(name)
        return bound if bound and len(bound) <= max_chars else None

    return Correlation(
        session_id=pick("sessionId") or identity.generated_session_id,
        run_id=pick("runId") or identity.generated_run_id,
        tool_call_id=pick("toolCallId") or _token("call"),
        trace_id=pick("traceId") or (new_trace_id or random_trace_id)(),
    )


def random_trace_id() -> str:
    return secrets.token_hex(16)


def _token(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


def normalize_arguments(spec: ToolSpec, arguments: Arguments, schema: Schema) -> dict[str, object]:
    """The arguments as the contract form reads them, whichever form the host was shown.

    - Object and array arguments sent as JSON text (some clients do) are decoded, nothing else.
    - null means "not given" for an optional property (a strict host must send every field; the
      strict form offers null for the ones the model leaves out), in every form, so that a model that
      sends null is never refused for it. Inside an object argument too (`options`, `filter`), except
      where the schema itself allows null as a value (a block's `props`: null resets a prop).
    - "" and [] mean "not given" where nothing else can be meant (`ToolSpec.absent_when_empty`): an
      empty cursor, no block ids (the whole page), an empty scope list, an empty correlation id; and
      wherever the schema refuses every empty value (`minLength`, `minItems`, an enum without "").
    """
    properties = members(schema.get("properties"))
    listed = schema.get("required")
    required = set(listed) if isinstance(listed, list) else set()
    empty_absent = spec.absent_when_empty
    normalized: dict[str, object] = {}
    for name, raw in arguments.items():
        declared = members(properties.get(name))
        value = _decoded(raw, declared.get("type"))
        if value is None and name not in required:
            continue
        if (
            isinstance(value, str | list)
            and not value
            and name not in required
            and (name in empty_absent or _never_empty(declared))
        ):
            continue
        if isinstance(value, dict) and isinstance(declared.get("properties"), dict):
            value = _without_nulls(value, members(declared.get("properties")))
        normalized[name] = value
    return normalized


def _never_empty(schema: Schema) -> bool:
    """An optional property whose schema refuses any empty value: an empty one can only mean "not given"."""
    words = schema.get("enum")
    return bool(schema.get("minLength") or schema.get("minItems")) or (
        isinstance(words, list) and "" not in words
    )


def _decoded(value: object, expected: object) -> object:
    if expected not in ("object", "array") or not isinstance(value, str):
        return value
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser: left to the schema
        return value
    return parsed if isinstance(parsed, dict if expected == "object" else list) else value


def _without_nulls(value: Arguments, properties: Schema) -> dict[str, object]:
    return {
        key: item
        for key, item in value.items()
        if item is not None or _allows_null(properties.get(key)) or key not in properties
    }


def _allows_null(schema: object) -> bool:
    variants = members(schema).get("anyOf")
    return isinstance(variants, list) and {"type": "null"} in variants


def exact_numbers(
    arguments: Arguments,
    schema: Schema,
    *,
    skip: frozenset[str] = frozenset(),
    max_depth: int = DEFAULT_MAX_ARGUMENT_DEPTH,
) -> dict[str, object]:
    """Arguments whose numbers mean exactly what they say, nested no deeper than `max_depth`.

    JSON has one number type, so `3.0` is 3: an integral float given for a property the schema
    declares `integer` becomes that int (and is then checked like any int: a stale `baseRevision` of
    `3.0` is a conflict, not skipped). An integer beyond 64 bits, which the kernel cannot store, or a
    number that is not finite, is refused with its JSON pointer, as is deeper nesting. Properties in
    `skip` (block content) are the kernel's to check, block by block.
    """
    properties = members(schema.get("properties"))
    exact = dict(arguments)
    for name, value in arguments.items():
        declared = members(properties.get(name)).get("type")
        if declared == "integer" and isinstance(value, float) and value.is_integer():
            exact[name] = int(value)
    # Only containers go on the stack, each with its pointer; a scalar is checked where it stands and
    # its pointer is spelt only if it is refused (an array of 20,000 ids costs 20,000 type checks).
    checked = {name: value for name, value in exact.items() if name not in skip}
    stack: list[tuple[Mapping[str, object] | list[object], str, int]] = [(checked, "", 0)]
    while stack:
        container, pointer, depth = stack.pop()
        if depth > max_depth:
            raise invalid(pointer, f"nested deeper than {max_depth} levels")
        items = container.items() if isinstance(container, Mapping) else enumerate(container)
        for key, value in items:
            if isinstance(value, str | bool) or value is None:
                continue
            if isinstance(value, dict | list):
                stack.append((value, f"{pointer}/{key}", depth + 1))
            elif isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
                raise invalid(
                    f"{pointer}/{key}", "an integer beyond 64 bits (the largest is 9223372036854775807)"
                )
            elif isinstance(value, float) and not math.isfinite(value):
                raise invalid(f"{pointer}/{key}", "not a finite number")
    return exact


def heavy_arguments(
    arguments: Arguments,
    schema: Schema,
    limit: int,
    *,
    skip: frozenset[str] = frozenset(),
) -> bool:
    """Whether checking these arguments is work the size of the request: more than `limit` items all
    told (`argument_items`)."""
    return argument_items(arguments, schema, limit, skip=skip) > limit


def argument_items(
    arguments: Arguments,
    schema: Schema,
    limit: int,
    *,
    skip: frozenset[str] = frozenset(),
) -> int:
    """How many items the arguments hold all told (array entries, object members, characters of an
    argument sent as JSON text), counting only until past `limit`, so that asking costs a light call
    next to nothing. Properties in `skip` (block content: the kernel checks it, and moves a long one
    to a thread itself) count only as JSON text to decode."""
    properties = members(schema.get("properties"))
    count = 0
    stack: list[object] = []
    for name, value in arguments.items():
        if isinstance(value, str) and members(properties.get(name)).get("type") in ("object", "array"):
            count += len(value)  # decoded by `normalize_arguments`
        elif name not in skip:
            stack.append(value)
    while stack and count <= limit:
        value = stack.pop()
        if isinstance(value, dict | list):
            count += len(value)
            if count <= limit:  # else the answer is known: no more is looked at
                stack += [
                    item
                    for item in (value.values() if isinstance(value, dict) else value)
                    if isinstance(item, dict | list)
                ]
    return count


def check_arguments(validator: Validator, arguments: Arguments) -> None:
    """Refuse arguments that do not match the advertised schema, naming where and why."""
    if validator.is_valid(arguments):
        return
    described = [
        _describe(error)
        for _, error in zip(range(_MAX_ERRORS), validator.iter_errors(arguments), strict=False)
    ]
    raise invalid(described[0]["pointer"], described[0]["reason"], errors=described)


def _describe(error: ValidationError) -> dict[str, str]:
    path = [str(part) for part in error.instance_path]
    reason = error.message
    missing = getattr(error.kind, "property", None) if type(error.kind).__name__ == "Required" else None
    if isinstance(missing, str):
        path.append(missing)
        reason = "required property is missing"
    # An unknown member of a closed object: the member is the argument at fault (`/options/bogus`).
    unexpected = getattr(error.kind, "unexpected", None)
    if type(error.kind).__name__ == "AdditionalProperties" and isinstance(unexpected, list) and unexpected:
        path.append(str(unexpected[0]))
    if len(reason) > _MAX_REASON:  # a message quotes the value first and states the rule last
        reason = reason[: _MAX_REASON // 2] + "…" + reason[-(_MAX_REASON // 2 - 1) :]
    return {"pointer": "/" + "/".join(path), "reason": reason}


def effective_scopes(
    granted: frozenset[Scope], arguments: Arguments, meta: Arguments | None
) -> frozenset[Scope]:
    requested = arguments.get("capabilityScope")
    if requested is None and meta:
        requested = meta.get(META_PREFIX + "capabilityScope")
    if requested is None:
        return granted
    if not isinstance(requested, list) or not all(isinstance(item, str) for item in requested):
        raise invalid("/capabilityScope", "must be an array of scope names")
    known = {scope.value for scope in Scope}
    for index, name in enumerate(requested):
        if name not in known:  # the names are public (the schema lists them): this reveals nothing
            raise invalid(f"/capabilityScope/{index}", f"{name!r} is not one of {sorted(known)}")
    names = set(requested)
    return frozenset(scope for scope in granted if scope.value in names)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who asks what of which page, once the checkpoints that need no kernel have let the call in."""

    actor_id: str
    workspace_id: str
    document_id: str
    scopes: frozenset[Scope]
    workspaces: frozenset[str] | None = None  # the token's workspaces, None: any
    page_bound: bool = True  # False: a tool naming no page (search), ids "" when not given


def admit(spec: ToolSpec, arguments: Arguments, meta: Arguments | None, identity: Identity) -> Caller:
    """The checkpoints that need no kernel, in the contract's order and before any argument is judged:
    login (and an `actorId` that is not the caller's), the connection's scope, then the page: it must be
    named by two strings to be checked at all, and a token limited to some workspaces hears what a
    non-member hears about the others. The kernel's checkpoints (member, page read, write) follow."""
    if not identity.actor_id:
        raise MnoteError(ErrorCode.UNAUTHENTICATED, Reason.NO_ACTOR)
    claimed = arguments.get("actorId")
    if claimed is not None and claimed != identity.actor_id:
        raise MnoteError(ErrorCode.PERMISSION_DENIED, Reason.ACTOR_MISMATCH)
    scopes = effective_scopes(identity.scopes, arguments, meta)
    if spec.scope not in scopes:
        raise MnoteError(ErrorCode.PERMISSION_DENIED, Reason.SCOPE, {"scope": spec.scope.value})
    workspace_id, document_id = arguments.get("workspaceId"), arguments.get("documentId")
    if not spec.page_bound:
        if workspace_id is not None and not isinstance(workspace_id, str):
            raise invalid("/workspaceId", _not_a_string(workspace_id))
        if (
            identity.workspaces is not None
            and workspace_id is not None
            and workspace_id not in identity.workspaces
        ):
            raise MnoteError(ErrorCode.PERMISSION_DENIED, Reason.NOT_MEMBER, {"workspaceId": workspace_id})
        return Caller(
            identity.actor_id, workspace_id or "", "", scopes, identity.workspaces, page_bound=False
        )
    if not isinstance(workspace_id, str):
        raise invalid("/workspaceId", _not_a_string(workspace_id))
    if not isinstance(document_id, str):
        raise invalid("/documentId", _not_a_string(document_id))
    # "" is "any of mine": the page is then found by its name among the token's workspaces only
    if identity.workspaces is not None and workspace_id and workspace_id not in identity.workspaces:
        raise MnoteError(ErrorCode.PERMISSION_DENIED, Reason.NOT_MEMBER, {"workspaceId": workspace_id})
    return Caller(identity.actor_id, workspace_id, document_id, scopes)


def _not_a_string(value: object) -> str:
    return (
        "required property is missing"
        if value is None
        else f"{json.dumps(value)[:40]} is not of type 'string'"
    )


def build_request(
    spec: ToolSpec,
    validator: Validator,
    arguments: Arguments,
    caller: Caller,
    correlation: Correlation,
    locale: Locale,
) -> ToolRequest:
    """The contract's request envelope, once the arguments match the advertised schema (after
    `exact_numbers`)."""
    check_arguments(validator, arguments)
    if spec.writes and not str(arguments.get("idempotencyKey", "")).strip():
        raise invalid("/idempotencyKey", "must not be empty: one key per intended change")
    base_revision, key = arguments.get("baseRevision"), arguments.get("idempotencyKey")
    return ToolRequest(
        tool_name=spec.name,
        workspace_id=caller.workspace_id,
        document_id=caller.document_id,
        actor_id=caller.actor_id,
        correlation=correlation,
        idempotency_key=key if isinstance(key, str) else None,
        dry_run=bool(arguments.get("dryRun", False)),
        capability_scope=caller.scopes,
        args={name: value for name, value in arguments.items() if name not in ENVELOPE_FIELDS},
        base_revision=base_revision if isinstance(base_revision, int) else None,
        locale=locale,
        workspaces=caller.workspaces,
        run_named="runId" in arguments,
    )
