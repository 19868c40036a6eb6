"""The kernel's commands, one declaration each (`spec.CommandSpec`), by domain: the page's own
(`page.py`), block edits (`block.py`), text edits (`text.py`), artifacts (`artifact.py`) and reverts (`revert.py`).

`COMMANDS` finds a declaration by the name a `Command` carries (`command_spec`: or refuses it); `COMMAND_SCOPES` is the scope each
needs (the permission checkpoint's and the write tools' one table, derived from the declarations);
`command_table` is docs/kernel.md's list of them.
"""

from __future__ import annotations

from typing import Any

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.scopes import Scope
from mnote_mcp.kernel.store.commands import artifact, block, page, revert, text
from mnote_mcp.kernel.store.commands.spec import CommandSpec

ALL: tuple[CommandSpec[Any], ...] = (
    *page.COMMANDS,
    *artifact.COMMANDS,
    *block.COMMANDS,
    *text.COMMANDS,
    *revert.COMMANDS,
)
COMMANDS: dict[str, CommandSpec[Any]] = {spec.name: spec for spec in ALL}
COMMAND_SCOPES: dict[str, Scope] = {spec.name: spec.scope for spec in ALL}

__all__ = ["ALL", "COMMANDS", "COMMAND_SCOPES", "CommandSpec", "command_spec", "command_table"]


def command_spec(name: str) -> CommandSpec[Any]:
    """The declaration of the command `name`, or `invalid_argument` (`unknown_command`)."""
    spec = COMMANDS.get(name)
    if spec is None:
        raise MnoteError(ErrorCode.INVALID_ARGUMENT, Reason.UNKNOWN_COMMAND, {"command": name})
    return spec


def command_table() -> str:
    """docs/kernel.md's table of the commands (`python -m mnote_mcp.tools.docs` writes it there)."""
    lines = [
        "| command | scope | payload | does | a stale `baseRevision` |",
        "|---|---|---|---|---|",
    ]
    for spec in ALL:
        payload = spec.payload if "`" in spec.payload else f"`{spec.payload}`"
        base = f"block-level: relies on {spec.relies_on}" if spec.relies_on else "page-level: a conflict"
        lines.append(f"| `{spec.name}` | {spec.scope.value} | {payload} | {spec.does} | {base} |")
    return "\n".join(lines)
