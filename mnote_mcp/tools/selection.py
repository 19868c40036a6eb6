"""Which tools a server exposes: toolsets and name globs, decided once from the static configuration.

The selection is an upper bound: tools outside it are not in the registry at all, so no request can
reach them (a call is an unknown tool). Read-only mode and the granted scopes are applied after it,
by the dispatcher, and still hide every tool the connection could not use.

This module imports nothing heavy: the command line builds the selection with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from mnote_mcp.tools.toolsets import Toolset

if TYPE_CHECKING:
    from mnote_mcp.tools.registry import ToolSpec


@dataclass(frozen=True, slots=True)
class ToolSelection:
    """`toolsets` and `tools` (globs) each add tools; with neither, the default tools (those declared
    `by_default`: docs/decisions.md, "Definitions no larger than the filesystem server's"). `exclude`
    removes.

    Globs match either spelling of a name (`mnote.page.*` or `mnote_page_*`), case-sensitively.
    """

    toolsets: frozenset[Toolset] = frozenset()
    tools: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def select(self, specs: Sequence[ToolSpec]) -> tuple[ToolSpec, ...]:
        """The selected specs, in declaration order; raises ValueError for a glob that selects nothing."""
        for pattern in (*self.tools, *self.exclude):
            if not any(_matches(spec, pattern) for spec in specs):
                names = ", ".join(spec.name for spec in specs)
                raise ValueError(f"tool pattern {pattern!r} matches no tool; tools: {names}")
        default = not self.toolsets and not self.tools
        return tuple(
            spec
            for spec in specs
            if (spec.by_default if default else spec.toolset in self.toolsets or _any(spec, self.tools))
            and not _any(spec, self.exclude)
        )


def _matches(spec: ToolSpec, pattern: str) -> bool:
    return fnmatchcase(spec.name, pattern) or fnmatchcase(spec.underscore_name, pattern)


def _any(spec: ToolSpec, patterns: Iterable[str]) -> bool:
    return any(_matches(spec, pattern) for pattern in patterns)
