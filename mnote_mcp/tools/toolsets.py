"""The toolsets: groups of tools a server exposes or leaves out together (`--toolsets`)."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class Toolset(StrEnum):
    PAGE = "page"
    BLOCK = "block"
    HISTORY = "history"
    ARTIFACT = "artifact"


def parse_toolsets(values: Iterable[str]) -> frozenset[Toolset]:
    """Toolset names (`all`: every toolset); raises ValueError naming an unknown one."""
    toolsets: set[Toolset] = set()
    for raw in values:
        if raw.strip() == "all":
            toolsets.update(Toolset)
            continue
        try:
            toolsets.add(Toolset(raw.strip()))
        except ValueError:
            raise ValueError(
                f"unknown toolset {raw.strip()!r}; toolsets: {', '.join(Toolset)}, all"
            ) from None
    return frozenset(toolsets)
