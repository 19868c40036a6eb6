"""How much of a host's context a tool's definition may take: the budget each tool declares for its
`tools/list` entry (`ToolSpec.entry_bytes` measures it; tests/unit/tools/test_catalog.py holds every tool to
its own, and the README's size table is generated from both)."""

from __future__ import annotations

from dataclasses import dataclass

from mnote_mcp.tools.schemas import SchemaForm


@dataclass(frozen=True, slots=True)
class SizeBudget:
    """Bytes the tool's `tools/list` entry may take as compact JSON (dotted names, output schema
    included), in each schema form. A tripwire against bloat, set a little above the tool's size when
    it was declared; raising it is a decision, visible in the diff."""

    contract: int
    strict: int

    def of(self, form: SchemaForm) -> int:
        return self.contract if form == "contract" else self.strict
