"""The error vocabulary shared by every kernel adapter and the envelope.

The kernel speaks in codes and reasons, never in sentences: the words a caller reads are chosen at the
envelope (mnote_mcp.messages), in the caller's locale. A reason names which rule refused the call, so
the same code can carry the contract's different messages (page read vs page write, for instance).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    UNAUTHENTICATED = "mnote_tool_unauthenticated"
    PERMISSION_DENIED = "mnote_tool_permission_denied"
    NOT_FOUND = "mnote_tool_not_found"
    INVALID_ARGUMENT = "mnote_tool_invalid_argument"
    CONFLICT = "mnote_tool_conflict"
    IDEMPOTENCY_CONFLICT = "mnote_tool_idempotency_conflict"
    OPTION_NOT_WIRED = "mnote_tool_option_not_wired"
    RUNTIME_UNAVAILABLE = "mnote_tool_runtime_unavailable"
    INTERNAL = "mnote_tool_internal"


RETRYABLE_CODES = frozenset({ErrorCode.RUNTIME_UNAVAILABLE})


class MnoteError(Exception):
    """A refusal that becomes a failure envelope; raised by any layer, rendered once at the top.

    `details` must only hold what the caller may see: ids, revisions, field names, JSON pointers.
    Never titles, bodies or artifact text.
    """

    def __init__(self, code: ErrorCode, reason: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(f"{code.value}:{reason}")
        self.code = code
        self.reason = reason
        self.details: dict[str, Any] = dict(details or {})

    @property
    def retryable(self) -> bool:
        return self.code in RETRYABLE_CODES

    def to_wire(self) -> dict[str, Any]:
        """The form kernel adapters exchange (the runtime protocol's error body)."""
        return {"code": self.code.value, "reason": self.reason, "details": self.details}

    @classmethod
    def from_wire(cls, body: Mapping[str, Any]) -> MnoteError:
        try:
            code = ErrorCode(str(body["code"]))
        except (KeyError, ValueError):
            return cls(ErrorCode.INTERNAL, "unknown_error_code")
        details = body.get("details")
        return cls(code, str(body.get("reason") or "generic"), details if isinstance(details, dict) else None)


def invalid(pointer: str, reason: str, **details: Any) -> MnoteError:
    """An invalid-argument refusal that names where (a JSON pointer) and why."""
    return MnoteError(ErrorCode.INVALID_ARGUMENT, "schema", {"pointer": pointer, "reason": reason, **details})
