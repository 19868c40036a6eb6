"""The kernel's commands are one declaration each (`kernel/store/commands`): found by name, their scope
the one table the checkpoints and the write tools read, the docs' list of them generated, and no page
naming a command that is not declared."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from mnote_mcp.kernel.port import CommandName
from mnote_mcp.kernel.scopes import Scope
from mnote_mcp.kernel.store.commands import ALL, COMMAND_SCOPES, COMMANDS, command_table
from mnote_mcp.kernel.store.commands.page import SAVE
from mnote_mcp.kernel.store.commands.spec import CommandSpec
from mnote_mcp.tools.catalog import ALL_TOOLS
from tests.support.helpers import ROOT


def test_every_command_is_declared_once_and_found_by_its_name() -> None:
    names = Counter(spec.name for spec in ALL)
    assert [name for name, count in names.items() if count > 1] == []
    assert {name: spec.name for name, spec in COMMANDS.items()} == {name: name for name in names}
    assert set(CommandName) <= set(COMMANDS), "the port's names are declared commands"


def test_the_scope_table_is_the_declarations() -> None:
    assert {spec.name: spec.scope for spec in ALL} == COMMAND_SCOPES
    assert set(COMMAND_SCOPES.values()) <= {Scope.PAGE_WRITE, Scope.ARTIFACT_WRITE}, "commands write"


def test_a_write_tool_issues_a_declared_command_and_takes_its_scope() -> None:
    for tool in ALL_TOOLS:
        if tool.command is not None:
            assert COMMANDS[tool.command.name] is tool.command, tool.name
            assert tool.scope is tool.command.scope, tool.name


def test_a_block_level_command_says_what_it_relies_on() -> None:
    assert all(bool(spec.relies_on) == (spec.depends is not None) for spec in ALL)
    with pytest.raises(ValueError, match="relies on"):
        CommandSpec("x.y", Scope.PAGE_WRITE, "{}", "x", SAVE.validate, SAVE.plan, relies_on="the block")


def test_the_docs_list_the_declared_commands_and_name_no_other() -> None:
    kernel = (ROOT / "docs" / "kernel.md").read_text(encoding="utf-8")
    assert command_table() in kernel, "run: python -m mnote_mcp.tools.docs"
    undeclared = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        # a command's spelling (`page.block.insert`), not a scope's (`page.read`) nor a tool's (`page.get`)
        named = re.findall(
            r"(?<![\w.])((?:page|artifact)\.\w+\.\w+)(?![\w.])", page.read_text(encoding="utf-8")
        )
        undeclared += [f"{page.name}: {name}" for name in named if name not in COMMANDS]
    assert undeclared == []
