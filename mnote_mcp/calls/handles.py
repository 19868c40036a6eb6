"""Confirmation handles: how a write the person must confirm is confirmed where the server cannot ask.

A client that cannot be asked (no form elicitation, a transport with no room for the question, a host
that cannot answer 2026-07-28's `input_required`) gets the confirmation result instead of the write
(issue 31): what would change, and a handle. The agent asks its person in the conversation and, if
they agree, sends the same call again with the handle as its `idempotencyKey`. The handle is

    c1.<expiry>.<revision>.<tag>

`expiry` (seconds since the epoch) and `revision` (the page's, when the plan was made) in base 36, and
`tag` an HMAC-SHA256 (96 bits, URL-safe base64) over them and what the handle is bound to (`Binding`):
the caller (actor and credential, as a sealed `requestState` is), the tool, the page and the
arguments (a canonical hash, the idempotency key and the correlation ids left out). Nothing in it is
secret; it cannot be forged, moved to other arguments, another actor or another tool, nor outlive its
expiry. Its key is derived from `--confirm-key-file`'s keys (the first signs, every one verifies:
rotation, and replicas sharing the file accept each other's handles), or from a key of this process.

Single use needs no table of its own: the handle is the write's idempotency key, and the kernel's
ledger records a key in the same transaction as its write, on every replica's shared store. A handle
sent again finds its key used (a dry run says so) and is refused (`confirmation_used`); two replicas
redeeming one handle at once write once, as any two calls with one key do. A page that moved on since
the plan (another revision) refuses it too (`confirmation_stale`): the person agreed to what they
were shown. docs/decisions.md, "Consent on every host", argues the design.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason

PREFIX = "c1."
DEFAULT_HANDLE_TTL = 600.0
MIN_HANDLE_TTL, MAX_HANDLE_TTL = 10.0, 86_400.0
_TAG_BYTES = 12
_CONTEXT = b"mnote confirmation handle v1"
# The longest handle: expiry and revision at their largest base-36 widths, and the tag.
MAX_HANDLE_CHARS = len(PREFIX) + 8 + 1 + 13 + 1 + 16


@dataclass(frozen=True, slots=True)
class Binding:
    """What a handle confirms: this caller's call of this tool on this page with these arguments."""

    principal: str
    tool: str
    workspace_id: str
    document_id: str
    base_revision: int | None
    args: Mapping[str, Any]

    def material(self) -> bytes:
        return orjson.dumps(
            [self.principal, self.tool, self.workspace_id, self.document_id, self.base_revision, self.args],
            option=orjson.OPT_SORT_KEYS,
        )


@dataclass(frozen=True, slots=True)
class Handle:
    """A handle that verified: its text, when it expires, the revision it was planned at."""

    text: str
    expires: int
    revision: int


def is_handle(key: str | None) -> bool:
    """Whether an idempotency key is a confirmation handle (it is then checked as one)."""
    return key is not None and key.startswith(PREFIX)


class Handles:
    """Issues and verifies handles under `keys` (`--confirm-key-file`'s, else one of this process)."""

    def __init__(self, keys: Sequence[str] = (), ttl: float = DEFAULT_HANDLE_TTL) -> None:
        material = [key.encode() for key in keys] or [secrets.token_bytes(32)]
        self._keys = [hmac.new(key, _CONTEXT, hashlib.sha256).digest() for key in material]
        self.ttl = ttl

    def issue(self, binding: Binding, revision: int, now: float | None = None) -> str:
        expires = int((time.time() if now is None else now) + self.ttl)
        body = f"{PREFIX}{_base36(expires)}.{_base36(revision)}"
        return f"{body}.{_tag(self._keys[0], body, binding)}"

    def verify(self, text: str, binding: Binding, *, check_expiry: bool = True) -> Handle:
        """The handle, if `text` is one this server issued for `binding` (`confirmation_invalid`
        otherwise), in date unless `check_expiry` is off (`check_expiry`)."""
        parts = text[len(PREFIX) :].split(".")
        if not text.startswith(PREFIX) or len(parts) != 3:
            raise _refusal(Reason.CONFIRMATION_INVALID)
        expiry, revision, tag = parts
        body = f"{PREFIX}{expiry}.{revision}"
        if not any(
            hmac.compare_digest(_tag(key, body, binding).encode(), tag.encode()) for key in self._keys
        ):
            raise _refusal(Reason.CONFIRMATION_INVALID)
        handle = Handle(text, int(expiry, 36), int(revision, 36))
        if check_expiry:
            self.check_expiry(handle)
        return handle

    @staticmethod
    def check_expiry(handle: Handle, now: float | None = None) -> None:
        """`confirmation_expired` past the handle's expiry (meaningful only for a handle that verified)."""
        if (time.time() if now is None else now) > handle.expires:
            raise _refusal(Reason.CONFIRMATION_EXPIRED)


def _tag(key: bytes, body: str, binding: Binding) -> str:
    digest = hmac.new(key, body.encode() + b"\n" + binding.material(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest[:_TAG_BYTES]).decode()


def _refusal(reason: Reason) -> MnoteError:
    return MnoteError(ErrorCode.PERMISSION_DENIED, reason, {"confirmation": reason.value.split("_", 1)[1]})


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    if number <= 0:
        return "0"
    out = ""
    while number:
        number, rest = divmod(number, 36)
        out = digits[rest] + out
    return out
