"""Example calls: every tool declares at least one, written against no page in particular.

An example gives a tool's own arguments; what depends on the page it is aimed at is a `Ref` (the first
blocks of the page, the revision the page was seeded at), filled in by `Example.arguments` for a
`Target`. So one example serves every test that calls every tool (the permission matrix on a
restricted page, Hermes on the demo workspace, the strict-host recipes), and a new tool is in all of
them once it is declared.

What an example needs of the page beyond what any page has (a text to edit, a write to undo) is its
own `setup`, calls declared with it and made first by whatever runs it, so no example leans on another
tool's example (issue 33: rewriting one tool's example once broke another's). A call made to be large,
for the result budget (`ToolSpec.oversized`), names the `Stage` it needs: a page of data made large,
which the tests build once (tests/support/stages.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

__all__ = [
    "Arg",
    "Call",
    "Example",
    "Ref",
    "Stage",
    "Target",
    "Value",
    "edited_everywhere",
    "overridden",
    "resolve",
]

# An argument as an example writes it (a `Ref` where the page decides) and as a call sends it.
Arg = None | bool | int | float | str | Sequence["Arg"] | Mapping[str, "Arg"]
Value = None | bool | int | float | str | list["Value"] | dict[str, "Value"]


class Ref(StrEnum):
    """A value left to the page an example is aimed at."""

    BLOCK_1 = "<block 1>"  # the page's first top-level block
    BLOCK_2 = "<block 2>"  # its second
    BLOCK_3 = "<block 3>"  # its third
    SEEDED_REVISION = "<seeded revision>"  # the page's revision before the test wrote to it
    EVERY_BLOCK = "<every block>"  # the ids of all its top-level blocks, as a list


class Stage(StrEnum):
    """A page of data made large, which a budget scenario runs on (the value says what it holds)."""

    BIG = "a 2,000-block page"
    HISTORY = "a page written 60 times, 30 blocks each"
    HUGE_BLOCK = "a page with one 65,000-character block between two small ones"
    MANY_PAGES = "60 more pages, each matching the word 'plan' in its title and text"


# Data the budget scenarios share (what no answer can hold whole at a small budget): 2,000 new
# blocks, and a 50,000-character key the schema lets through to the kernel or refuses.
MANY_NEW_BLOCKS: tuple[Mapping[str, Arg], ...] = tuple(
    MappingProxyType({"type": "paragraph", "text": f"New block {n}."}) for n in range(2_000)
)
HUGE_KEY = "k" * 50_000


@dataclass(frozen=True, slots=True)
class Target:
    """The page an example is aimed at: its ids, its first top-level block ids (at least three; a
    fixture page with fewer is padded with ids that name no block) and its seeded revision."""

    workspace_id: str
    document_id: str
    blocks: tuple[str, ...]
    revision: int = 1
    every_block: tuple[str, ...] = ()  # all its top-level block ids, where a call names them all

    def __post_init__(self) -> None:
        if len(self.blocks) < 3:
            missing = tuple(f"{self.document_id}_no_block_{n}" for n in range(len(self.blocks), 3))
            object.__setattr__(self, "blocks", (*self.blocks, *missing))

    def value(self, ref: Ref) -> Value:
        if ref is Ref.SEEDED_REVISION:
            return self.revision
        if ref is Ref.EVERY_BLOCK:
            return list(self.every_block or self.blocks)
        return self.blocks[(Ref.BLOCK_1, Ref.BLOCK_2, Ref.BLOCK_3).index(ref)]


class _Arguments:
    """Arguments as a declaration writes them, `Ref`s and all, kept read-only."""

    arguments: Mapping[str, Arg]

    def __post_init__(self) -> None:
        object.__setattr__(self, "arguments", MappingProxyType(dict(self.arguments)))

    def resolved(self, target: Target) -> dict[str, Value]:
        resolved = resolve(dict(self.arguments), target)
        assert isinstance(resolved, dict)
        return resolved


@dataclass(frozen=True)
class Call(_Arguments):
    """A real call an example's `setup` makes first, on the same page: `tool`'s own arguments, `Ref`s
    resolved as the example's are (a write's key and `dryRun: false` are the runner's)."""

    tool: str
    arguments: Mapping[str, Arg]


def edited_everywhere(old: str, new: str) -> Call:
    """A setup that changes every block holding `old` (a text edit's replace-all): what makes a later
    write on an older revision, or an undo of an earlier one, conflict over all of them."""
    return Call("mnote.page.edit_text", {"edits": [{"oldText": old, "newText": new, "replaceAll": True}]})


@dataclass(frozen=True)
class Example(_Arguments):
    """One call of the tool: its own arguments (the page ids, correlation ids, `idempotencyKey` and
    `dryRun` are the caller's, unless the example sets them), the calls that make the page what it
    needs, made for real first (`setup`: a text to edit, a write to undo), and for a budget scenario
    the page of large data it runs on (`stage`) and whether its answer is small whatever the budget
    (`fits`: an error, whose lists and strings are shown briefly; a write that answers ids)."""

    arguments: Mapping[str, Arg]
    setup: tuple[Call, ...] = ()
    note: str = field(default="", compare=False)
    stage: Stage | None = None
    fits: bool = False


def long_text(field: str, **arguments: Arg) -> Example:
    """A write of 90,000 characters into `field` on the big page: its report names what changed, never
    the text, so the answer fits any budget (a write tool's worst case for the answer is elsewhere)."""
    return Example(
        {**arguments, field: field[0] * 90_000}, stage=Stage.BIG, fits=True, note="90,000 characters"
    )


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
