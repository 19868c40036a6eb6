"""Example calls: every tool declares at least one, written against no page in particular.

An example gives a tool's own arguments; what depends on the page it is aimed at is a `Ref` (the first
blocks of the page, the revision the page was seeded at), filled in by `Example.arguments` for a
`Target`. So one example serves every test that calls every tool (the permission matrix on a
restricted page, Hermes on the demo workspace, the strict-host recipes), and a new tool is in all of
them once it is declared.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

__all__ = ["Arg", "Example", "Ref", "Target", "Value", "overridden", "resolve"]

# An argument as an example writes it (a `Ref` where the page decides) and as a call sends it.
Arg = None | bool | int | float | str | Sequence["Arg"] | Mapping[str, "Arg"]
Value = None | bool | int | float | str | list["Value"] | dict[str, "Value"]


class Ref(StrEnum):
    """A value left to the page an example is aimed at."""

    BLOCK_1 = "<block 1>"  # the page's first top-level block
    BLOCK_2 = "<block 2>"  # its second
    BLOCK_3 = "<block 3>"  # its third
    SEEDED_REVISION = "<seeded revision>"  # the page's revision before the test wrote to it


@dataclass(frozen=True, slots=True)
class Target:
    """The page an example is aimed at: its ids, its first top-level block ids (at least three; a
    fixture page with fewer is padded with ids that name no block) and its seeded revision."""

    workspace_id: str
    document_id: str
    blocks: tuple[str, ...]
    revision: int = 1

    def __post_init__(self) -> None:
        if len(self.blocks) < 3:
            missing = tuple(f"{self.document_id}_no_block_{n}" for n in range(len(self.blocks), 3))
            object.__setattr__(self, "blocks", (*self.blocks, *missing))

    def value(self, ref: Ref) -> Value:
        if ref is Ref.SEEDED_REVISION:
            return self.revision
        return self.blocks[(Ref.BLOCK_1, Ref.BLOCK_2, Ref.BLOCK_3).index(ref)]


@dataclass(frozen=True)
class Example:
    """One call of the tool: its own arguments (the page ids, correlation ids, `idempotencyKey` and
    `dryRun` are the caller's), and optionally the tool whose first example must run for real first
    (`prior`), so that this one has something to act on (a revert, a write to undo)."""

    arguments: Mapping[str, Arg]
    prior: str | None = None
    note: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "arguments", MappingProxyType(dict(self.arguments)))

    def resolved(self, target: Target) -> dict[str, Value]:
        resolved = resolve(dict(self.arguments), target)
        assert isinstance(resolved, dict)
        return resolved


def resolve(value: Arg, target: Target) -> Value:
    """`value` with every `Ref` in it replaced by what it is on `target`."""
    if isinstance(value, Ref):
        return target.value(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {key: resolve(item, target) for key, item in value.items()}
    return [resolve(item, target) for item in value]


def overridden(base: Mapping[str, Arg], changes: Mapping[str, Arg]) -> dict[str, Arg]:
    """`base` with `changes` applied; a change to None leaves the argument out."""
    merged = {**base, **changes}
    return {name: value for name, value in merged.items() if not (value is None and name in changes)}
