"""The toolsets: groups of tools a server exposes or leaves out together (`--toolsets`)."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class Toolset(StrEnum):
    PAGE = "page"
    BLOCK = "block"
    ARTIFACT = "artifact"


def parse_toolsets(values: Iterable[str]) -> frozenset[Toolset]:
    """Toolset names; raises ValueError naming an unknown one."""
    toolsets: set[Toolset] = set()
    for raw in values:
        try:
            toolsets.add(Toolset(raw.strip()))
        except ValueError:
            raise ValueError(f"unknown toolset {raw.strip()!r}; toolsets: {', '.join(Toolset)}") from None
    return frozenset(toolsets)
