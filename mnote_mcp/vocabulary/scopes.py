"""Scopes as a connection sees them: the upper bound a transport grants and a call can only narrow.

The enum itself is the kernel's (`kernel.scopes.Scope`): one vocabulary for what a connection is
granted and what an actor's role allows.
"""

from __future__ import annotations

from collections.abc import Iterable

from mnote_mcp.kernel.scopes import Scope

ALL_SCOPES: frozenset[Scope] = frozenset(Scope)
READ_ONLY_SCOPES: frozenset[Scope] = frozenset({Scope.PAGE_READ})

__all__ = ["ALL_SCOPES", "READ_ONLY_SCOPES", "Scope", "parse_scopes"]


def parse_scopes(values: Iterable[str]) -> frozenset[Scope]:
    """Parse scope names; raises ValueError naming the unknown one."""
    scopes: set[Scope] = set()
    for raw in values:
        name = raw.strip()
        if not name:
            continue
        try:
            scopes.add(Scope(name))
        except ValueError:
            known = ", ".join(sorted(s.value for s in Scope))
            raise ValueError(f"unknown scope {name!r}; known scopes: {known}") from None
    return frozenset(scopes)
