"""Who may do what: the roles and the scopes they grant, as data. (The scope each command needs is its
declaration's: `kernel/store/commands`.)"""

from __future__ import annotations

from mnote_mcp.kernel.errors import Reason
from mnote_mcp.kernel.scopes import Scope

__all__ = ["DENIAL_REASON", "ROLES", "ROLE_GRANTS", "Scope", "effective_role", "grants_of"]

ROLE_GRANTS: dict[str, frozenset[Scope]] = {
    "viewer": frozenset({Scope.PAGE_READ}),
    "commenter": frozenset({Scope.PAGE_READ, Scope.ARTIFACT_WRITE}),
    "editor": frozenset({Scope.PAGE_READ, Scope.PAGE_WRITE, Scope.ARTIFACT_WRITE}),
    "owner": frozenset({Scope.PAGE_READ, Scope.PAGE_WRITE, Scope.ARTIFACT_WRITE}),
}
ROLES: tuple[str, ...] = tuple(ROLE_GRANTS)
_RANK = {role: rank for rank, role in enumerate(ROLES)}


# The permission checkpoint that refuses an actor lacking a scope, named as the error's reason.
DENIAL_REASON: dict[Scope, Reason] = {
    Scope.PAGE_READ: Reason.PAGE_READ,
    Scope.PAGE_WRITE: Reason.PAGE_WRITE,
    Scope.ARTIFACT_WRITE: Reason.ARTIFACT_WRITE,
}


def effective_role(workspace_role: str, page_role: str | None, restricted: bool) -> str | None:
    """A restricted page admits only the actors listed on it, and never above their workspace role."""
    if not restricted:
        return workspace_role
    if page_role is None:
        return None
    return min(workspace_role, page_role, key=lambda role: _RANK.get(role, -1))


def grants_of(role: str | None) -> frozenset[Scope]:
    """What a role grants; no role (not a member, not listed on a restricted page) grants nothing."""
    return ROLE_GRANTS.get(role or "", frozenset())
