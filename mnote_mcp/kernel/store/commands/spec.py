"""What a kernel command is: one declaration, whole.

A `CommandSpec` is everything the kernel, the tools and the docs know of a command: its name (what a
`Command` carries on the wire), the scope it needs (the permission checkpoint asks for it; a write
tool's scope is its command's), its payload and what it does (docs/kernel.md's command table is made
from these), how a payload is checked (`validate`: pure, payload in, typed payload out, every refusal
with a JSON pointer), how it is planned (`plan`: reads what it needs of the page in the transaction and
returns the `Plan` a dry run shows and a real call writes), what an idempotency conflict is called
(`conflict_reason`) and, for a block edit, the blocks it relies on (`depends`, and `relies_on` in
words: a stale `baseRevision` is fine if none of them changed since). A domain module (`page.py`, `block.py`, `artifact.py`,
`revert.py`) declares its commands and lists them in its `COMMANDS`; `commands/__init__.py` gathers
them. Adding a command is one declaration in one of them (docs/architecture.md, "Adding a tool").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from mnote_mcp.kernel.errors import Reason, Words, invalid
from mnote_mcp.kernel.scopes import Scope
from mnote_mcp.kernel.store.plan import Plan, Tx

P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class CommandSpec(Generic[P]):
    """One command (see the module); `P` is its validated payload's type."""

    name: str
    scope: Scope
    payload: str  # the payload's shape, as the docs show it: `{blockId, type?, text?, props?}`
    does: str  # what it does, in one line
    validate: Callable[[Mapping[str, object]], P]
    plan: Callable[[Tx, P], Plan]
    conflict_reason: Reason = Reason.GENERIC
    # Block edits: the blocks they rely on (`relies_on` says which, for the docs). A stale
    # baseRevision is fine if none of them changed since; without `depends`, any other is a conflict.
    depends: Callable[[Tx, P], list[str]] | None = None
    relies_on: str = ""
    # Always run off the event loop: its cost grows with more than the page and the request (a revert:
    # the history since the run it undoes). Every other command is moved there when its page or its
    # request is heavy (`bounds.inline_ok`), and no command can stay on the loop past that.
    threaded: bool = False
    # The blocks the payload names, asked for with the page lock (`PageBlocks.ask`): on PostgreSQL one
    # round trip with the lock, the checkpoints and the ledger instead of one query each later.
    named: Callable[[P], list[str]] | None = None
    # The refusals only this command raises, with what the caller reads of each (both locales):
    # declared where they are raised, so a new command's new refusal is one place besides its reason's
    # name (`kernel/errors.py`); `vocabulary/messages.py`'s `REFUSALS` gathers them.
    refusals: tuple[Words, ...] = ()

    def __post_init__(self) -> None:
        if (self.depends is None) != (not self.relies_on):
            raise ValueError(f"{self.name}: a block-level command says what it relies on, and only it")


def text_field(payload: Mapping[str, object], name: str, limit: int) -> str:
    """A required string argument that must say something: not blank, at most `limit` characters."""
    value = payload.get(name)
    if not isinstance(value, str):
        raise invalid(f"/{name}", "must be a string")
    if not value.strip():
        raise invalid(f"/{name}", "must not be empty or blank")
    if len(value) > limit:
        raise invalid(f"/{name}", f"longer than {limit} characters")
    return value
