"""Who may call a tool, and what everyone else hears: the permission cases every tool declares.

A tool's `Permissions` names, for every kind of caller (`Caller`), whether the call goes through or the
refusal it gets (an `ErrorCode` and the `Reason` that picks its words). The declaration states the
intended policy on its own, apart from the code that enforces it (`kernel.policy`, `mapping.admit`,
the dispatcher's read-only check): tests/unit/kernel/store/test_access.py calls every tool as every caller and holds
the answers to the declaration, so a new tool is in the permission matrix the moment it is declared.

Most tools take one of the four standard policies below; a tool with another rule declares its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from mnote_mcp.kernel.errors import ErrorCode, Reason

__all__ = ["FIND_PAGES", "READ_PAGE", "WRITE_ARTIFACT", "WRITE_PAGE", "Caller", "Permissions", "Refusal"]


class Caller(StrEnum):
    """The rows of every tool's permission cases. Each names a caller by the part it plays, not by a
    fixture's ids: the tests map each to an actor, a page and server settings."""

    OWNER = "owner"
    EDITOR = "editor"
    COMMENTER = "commenter"
    VIEWER = "viewer"
    NON_MEMBER = "non-member"  # signed in, not a member of the page's workspace
    NOT_LISTED = "not listed on a restricted page"  # a workspace editor the restricted page leaves out
    ANONYMOUS = "no actor"  # no actor bound to the connection
    READ_ONLY_SERVER = "read-only server"  # the owner, on a server started with --read-only
    PAGE_READ_SCOPE = "narrowed to page.read"  # the owner, the call's capabilityScope ["page.read"]
    ARTIFACT_SCOPE = "narrowed to artifact.write"  # the owner, capabilityScope ["artifact.write"]


@dataclass(frozen=True, slots=True)
class Refusal:
    """What a refused caller hears (the envelope's code, and the reason that picks its message), and
    what it can do about it (docs/errors.md)."""

    code: ErrorCode
    reason: Reason
    recovery: str

    def __str__(self) -> str:
        return f"{self.code.value} ({self.reason.value})"


@dataclass(frozen=True)
class Permissions:
    """Every caller, allowed or refused with what it hears; a caller left out is refused at import."""

    allowed: frozenset[Caller]
    refused: Mapping[Caller, Refusal]

    def __post_init__(self) -> None:
        both = self.allowed & set(self.refused)
        missing = set(Caller) - self.allowed - set(self.refused)
        if both or missing:
            raise ValueError(
                f"permission cases: allowed and refused {sorted(both)}, no case for {sorted(missing)}"
            )
        object.__setattr__(self, "refused", MappingProxyType(dict(self.refused)))

    def refusal(self, caller: Caller) -> Refusal | None:
        """None when `caller` may make the call."""
        return self.refused.get(caller)

    def refusals(self) -> tuple[Refusal, ...]:
        """Every distinct refusal, in the order the cases list them."""
        return tuple(dict.fromkeys(self.refused.values()))


def _denied(reason: Reason, recovery: str) -> Refusal:
    return Refusal(ErrorCode.PERMISSION_DENIED, reason, recovery)


_NOBODY = Refusal(
    ErrorCode.UNAUTHENTICATED, Reason.NO_ACTOR, "connect as an actor: `--actor`, or a token over HTTP"
)
_SCOPE = _denied(Reason.SCOPE, "leave `capabilityScope` out, or use a token granted `details.scope`")
_READ_ONLY = _denied(Reason.READ_ONLY, "write through a server not started with `--read-only`")
_PAGE_WRITE = _denied(Reason.PAGE_WRITE, "needs the editor or owner role in the workspace")
# The checkpoints in front of any page: login, workspace member, page read.
_PAGE_CHECKPOINTS: dict[Caller, Refusal] = {
    Caller.ANONYMOUS: _NOBODY,
    Caller.NON_MEMBER: _denied(Reason.NOT_MEMBER, "name a page of a workspace the actor belongs to"),
    Caller.NOT_LISTED: _denied(Reason.PAGE_READ, "a restricted page admits only the members it lists"),
}

# Read one page: every member who may read it, in read-only mode too.
READ_PAGE = Permissions(
    allowed=frozenset(
        {
            Caller.OWNER,
            Caller.EDITOR,
            Caller.COMMENTER,
            Caller.VIEWER,
            Caller.READ_ONLY_SERVER,
            Caller.PAGE_READ_SCOPE,
        }
    ),
    refused={**_PAGE_CHECKPOINTS, Caller.ARTIFACT_SCOPE: _SCOPE},
)

# Change one page: editors and owners, not in read-only mode, not under a narrower scope.
WRITE_PAGE = Permissions(
    allowed=frozenset({Caller.OWNER, Caller.EDITOR}),
    refused={
        **_PAGE_CHECKPOINTS,
        Caller.COMMENTER: _PAGE_WRITE,
        Caller.VIEWER: _PAGE_WRITE,
        Caller.READ_ONLY_SERVER: _READ_ONLY,
        Caller.PAGE_READ_SCOPE: _SCOPE,
        Caller.ARTIFACT_SCOPE: _SCOPE,
    },
)

# Attach AI output to one page: commenters too, and a call narrowed to artifact.write.
WRITE_ARTIFACT = Permissions(
    allowed=frozenset({Caller.OWNER, Caller.EDITOR, Caller.COMMENTER, Caller.ARTIFACT_SCOPE}),
    refused={
        **_PAGE_CHECKPOINTS,
        Caller.VIEWER: _denied(Reason.ARTIFACT_WRITE, "needs the commenter role or above"),
        Caller.READ_ONLY_SERVER: _READ_ONLY,
        Caller.PAGE_READ_SCOPE: _SCOPE,
    },
)

# Find pages (no page named): anyone signed in with page.read; each finds only what it may read.
FIND_PAGES = Permissions(
    allowed=frozenset(set(Caller) - {Caller.ANONYMOUS, Caller.ARTIFACT_SCOPE}),
    refused={Caller.ANONYMOUS: _NOBODY, Caller.ARTIFACT_SCOPE: _SCOPE},
)
