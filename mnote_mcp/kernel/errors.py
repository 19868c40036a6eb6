"""The error vocabulary shared by every kernel adapter and the envelope.

The kernel speaks in codes and reasons, never in sentences: the words a caller reads are chosen at the
envelope (mnote_mcp.vocabulary.messages), in the caller's locale. A reason names which rule refused
the call, so the same code can carry the contract's different messages (page read vs page write, for
instance). Both are enums: a reason raised in one layer and rendered in another cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal


class ErrorCode(StrEnum):
    UNAUTHENTICATED = "mnote_tool_unauthenticated"
    PERMISSION_DENIED = "mnote_tool_permission_denied"
    NOT_FOUND = "mnote_tool_not_found"
    INVALID_ARGUMENT = "mnote_tool_invalid_argument"
    CONFLICT = "mnote_tool_conflict"
    IDEMPOTENCY_CONFLICT = "mnote_tool_idempotency_conflict"
    OPTION_NOT_WIRED = "mnote_tool_option_not_wired"
    RUNTIME_UNAVAILABLE = "mnote_tool_runtime_unavailable"
    RATE_LIMITED = "mnote_tool_rate_limited"
    INTERNAL = "mnote_tool_internal"


class Reason(StrEnum):
    """Which rule refused a call. The wire carries the value; an unknown one reads as `GENERIC`."""

    GENERIC = "generic"
    # unauthenticated
    NO_ACTOR = "no_actor"
    SERVICE_TOKEN = "service_token"  # the service token was refused (runtime side and relay side)
    # permission denied, in checkpoint order
    NOT_MEMBER = "not_member"
    PAGE_READ = "page_read"
    PAGE_WRITE = "page_write"
    ARTIFACT_WRITE = "artifact_write"
    SCOPE = "scope"
    READ_ONLY = "read_only"
    ACTOR_MISMATCH = "actor_mismatch"
    # a write that needed the person's confirmation (--confirm) and did not get it: nothing written
    DECLINED = "declined"  # they said no
    CANCELLED = "cancelled"  # they dismissed the question
    CONFIRM_TIMEOUT = "confirm_timeout"  # no answer within --confirm-timeout
    CONFIRM_UNAVAILABLE = "confirm_unavailable"  # the client cannot ask and --confirm-fallback is refuse
    # ... or, where the client cannot be asked, confirmed with a handle (issue 31, `mnote_mcp.calls.handles`)
    CONFIRMATION_REQUIRED = "confirmation_required"  # held: ask the person, send the handle back
    CONFIRMATION_INVALID = "confirmation_invalid"  # not a handle this server issued for this call
    CONFIRMATION_EXPIRED = "confirmation_expired"  # past its lifetime (--confirm-handle-ttl)
    CONFIRMATION_USED = "confirmation_used"  # already written with it (handles are single-use)
    # not found
    PAGE = "page"
    BLOCK = "block"
    COMMAND = "command"  # a revert's commandId is no write of this page
    RUN = "run"  # a revert's runId names no write of the caller's to this page
    # invalid argument
    SCHEMA = "schema"
    BLOCK_TYPE = "block_type"
    UNKNOWN_COMMAND = "unknown_command"
    ENVELOPE = "envelope"
    PAGE_TOO_LARGE = "page_too_large"  # the write would take the page past --max-page-blocks/bytes
    TEXT_MISSING = "text_missing"  # a text edit's oldText is not on the page (or in the block)
    TEXT_AMBIGUOUS = "text_ambiguous"  # it is there more than once, and replaceAll is not set
    TITLE_AMBIGUOUS = "title_ambiguous"  # a page named by its title: several readable pages have it
    # conflict
    REVISION = "revision"
    CURSOR = "cursor"
    BLOCKS = "blocks"  # a block edit's blocks changed after its stale baseRevision
    REVERT = "revert"  # a later write changed what a revert would undo
    PLAN_CHANGED = "plan_changed"  # the page kept changing while the person was asked to confirm
    CONFIRMATION_STALE = "confirmation_stale"  # the page moved on since the handle's plan
    # idempotency conflict (GENERIC, or the contract's summary wording)
    SUMMARY = "summary"
    OTHER_COMMAND = "other_command"  # the key belongs to another operation (another tool)
    # option not wired
    OPTION = "option"
    # runtime unavailable: what went wrong between us and the runtime (also `details.cause`)
    CONNECT = "connect"
    TIMEOUT = "timeout"
    CONNECTION_LOST = "connection_lost"
    TRANSPORT = "transport"
    STATUS = "status"
    MALFORMED_REPLY = "malformed_reply"
    EXIT_STATUS = "exit_status"
    SPAWN = "spawn"
    REPLY_TOO_LARGE = "reply_too_large"
    STORE_BUSY = "store_busy"  # the embedded store stayed locked past its busy timeout
    STORE_UNREACHABLE = "store_unreachable"  # the database (PostgreSQL) cannot be reached
    STORE_UNAVAILABLE = "store_unavailable"  # the embedded store could not be opened (out of descriptors)
    SHUTTING_DOWN = "shutting_down"  # the server is stopping: the call was not (or not wholly) run
    SEARCH_TIMEOUT = "search_timeout"  # a search statement ran past --db-search-timeout
    # rate limited (issue 32): nothing was run; `details.retryAfterSeconds` says when to try again
    RATE = "rate"  # the actor's calls of this class came faster than --<class>-limit
    IN_FLIGHT = "in_flight"  # the actor has --expensive-calls-per-actor expensive calls in flight already
    BUSY = "busy"  # every place for expensive calls stayed taken for --expensive-wait
    SHARE = "share"  # the actor's expensive calls used their --expensive-share of the time; it rests
    # internal
    UNEXPECTED = "unexpected"
    UNKNOWN_ERROR_CODE = "unknown_error_code"
    # dry-run warnings
    REPLAY = "replay"


Locale = Literal["zh-CN", "en"]


@dataclass(frozen=True, slots=True)
class Words:
    """What a caller reads of one refusal: its message and its hint, each in both locales.

    Declared here, beside the reasons, so that a kernel command can declare the refusals only it
    raises with it (`CommandSpec.refusals`); `vocabulary/messages.py` gathers every declaration."""

    code: ErrorCode
    reason: Reason | None
    message: dict[Locale, str] | None = None
    hint: dict[Locale, str] | None = None


RETRYABLE_CODES = frozenset({ErrorCode.RUNTIME_UNAVAILABLE, ErrorCode.RATE_LIMITED})
# Runtime failures that waiting cannot fix: the operator must change the server's configuration.
NOT_RETRYABLE_REASONS = frozenset({Reason.SERVICE_TOKEN})


class MnoteError(Exception):
    """A refusal that becomes a failure envelope; raised by any layer, rendered once at the top.

    `details` must only hold what the caller may see: ids, revisions, field names, JSON pointers.
    Never titles, bodies or artifact text.
    """

    def __init__(self, code: ErrorCode, reason: Reason, details: Mapping[str, object] | None = None) -> None:
        super().__init__(f"{code.value}:{reason.value}")
        self.code = code
        self.reason = reason
        self.details: dict[str, Any] = dict(details or {})

    @property
    def retryable(self) -> bool:
        return self.code in RETRYABLE_CODES and self.reason not in NOT_RETRYABLE_REASONS

    def to_wire(self) -> dict[str, Any]:
        """The form kernel adapters exchange (the runtime protocol's error body)."""
        return {"code": self.code.value, "reason": self.reason.value, "details": self.details}

    @classmethod
    def from_wire(cls, body: Mapping[str, object]) -> MnoteError:
        try:
            code = ErrorCode(str(body["code"]))
        except (KeyError, ValueError):
            return cls(ErrorCode.INTERNAL, Reason.UNKNOWN_ERROR_CODE)
        details = body.get("details")
        return cls(code, reason_of(body.get("reason")), details if isinstance(details, dict) else None)


def reason_of(value: object) -> Reason:
    """A reason read from the wire; one this version does not know is the code's generic one."""
    try:
        return Reason(str(value))
    except ValueError:
        return Reason.GENERIC


def invalid(pointer: str, reason: str, **details: object) -> MnoteError:
    """An invalid-argument refusal that names where (a JSON pointer) and why (words for the log and the
    caller's `details.reason`, not a `Reason`: the rule is always "the schema")."""
    return MnoteError(
        ErrorCode.INVALID_ARGUMENT, Reason.SCHEMA, {"pointer": pointer, "reason": reason, **details}
    )


class StoreUnavailableError(Exception):
    """The embedded kernel's store file cannot be opened or is not a store: an operator's problem,
    reported as one line naming the file and the cause (`mnote-mcp` exits with status 3)."""

    def __init__(self, path: object, cause: str) -> None:
        super().__init__(f"cannot open the store {path}: {cause}")
        self.path = path
        self.cause = cause
