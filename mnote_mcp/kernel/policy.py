"""Who may do what: roles, the grants they carry, and the grant each command needs. Policy as data."""

from __future__ import annotations

from enum import StrEnum


class Grant(StrEnum):
    PAGE_READ = "page.read"
    PAGE_WRITE = "page.write"
    ARTIFACT_WRITE = "artifact.write"


ROLE_GRANTS: dict[str, frozenset[Grant]] = {
    "viewer": frozenset({Grant.PAGE_READ}),
    "commenter": frozenset({Grant.PAGE_READ, Grant.ARTIFACT_WRITE}),
    "editor": frozenset({Grant.PAGE_READ, Grant.PAGE_WRITE, Grant.ARTIFACT_WRITE}),
    "owner": frozenset({Grant.PAGE_READ, Grant.PAGE_WRITE, Grant.ARTIFACT_WRITE}),
}
ROLES: tuple[str, ...] = tuple(ROLE_GRANTS)
_RANK = {role: rank for rank, role in enumerate(ROLES)}

# The permission checkpoint that refuses an actor lacking a grant, named as the error's reason.
DENIAL_REASON: dict[Grant, str] = {
    Grant.PAGE_READ: "page_read",
    Grant.PAGE_WRITE: "page_write",
    Grant.ARTIFACT_WRITE: "artifact_write",
}


def effective_role(workspace_role: str, page_role: str | None, restricted: bool) -> str | None:
    """A restricted page admits only the actors listed on it, and never above their workspace role."""
    if not restricted:
        return workspace_role
    if page_role is None:
        return None
    return min(workspace_role, page_role, key=lambda role: _RANK.get(role, -1))


def grants_of(role: str | None) -> frozenset[Grant]:
    return ROLE_GRANTS.get(role or "", frozenset())
