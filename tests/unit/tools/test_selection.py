"""Tool selection: toolsets and name globs (either spelling) decide what exists; nothing a request
sends can reach a tool left out; read-only mode and the granted scopes hide every tool the connection
cannot use; flags have env twins."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from mcp import MCPError

from mnote_mcp.cli import main, parse
from mnote_mcp.tools.catalog import ALL_TOOLS
from mnote_mcp.tools.permissions import Caller
from mnote_mcp.tools.selection import ToolSelection
from mnote_mcp.tools.toolsets import Toolset
from mnote_mcp.vocabulary.scopes import Scope
from tests.support.contract_schemas import CONTRACT
from tests.support.helpers import MODES, ROOT, call, connect, page_args, write_args
from tests.support.http_helpers import http_server, mcp_http, write_tokens
from tests.support.tool_calls import allowed

pytestmark = pytest.mark.anyio


def _toolset(toolset: Toolset) -> set[str]:
    return {spec.name for spec in ALL_TOOLS if spec.toolset is toolset}


def _named(prefix: str) -> set[str]:
    return {spec.name for spec in ALL_TOOLS if spec.name.startswith(prefix)}


# The sets the cases below expect, from the declarations: a new tool is in them once declared.
PAGE = _toolset(Toolset.PAGE)
BLOCK = _toolset(Toolset.BLOCK)
ARTIFACT = _toolset(Toolset.ARTIFACT)
HISTORY = _toolset(Toolset.HISTORY)
EVERY = {spec.name for spec in ALL_TOOLS}
DEFAULT = {spec.name for spec in ALL_TOOLS if spec.by_default}  # with no --toolsets or --tools
READS = allowed(Caller.READ_ONLY_SERVER)  # what a read-only server lists, as the tools declare it


def test_every_toolset_has_tools() -> None:
    assert {spec.toolset for spec in ALL_TOOLS} == set(Toolset)


async def _listed(db: Path, mode: str = "legacy", **config: Any) -> set[str]:
    """The listing of a server with `config` over the server's own default selection (the tests'
    servers otherwise select every tool)."""
    async with connect(db, mode, **{"toolsets": frozenset(), **config}) as client:
        return {tool.name for tool in (await client.list_tools()).tools}


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, DEFAULT),
        ({"toolsets": frozenset(Toolset)}, EVERY),
        ({"toolsets": frozenset({"history"})}, HISTORY),
        ({"toolsets": frozenset({"block"})}, BLOCK),
        ({"toolsets": frozenset({"page", "artifact"})}, PAGE | ARTIFACT),
        ({"tools": ("mnote.page.*",)}, _named("mnote.page.")),
        ({"tools": ("mnote_block_*", "mnote.page.get")}, BLOCK | {"mnote.page.get"}),
        ({"toolsets": frozenset({"artifact"}), "tools": ("mnote.page.get",)}, ARTIFACT | {"mnote.page.get"}),
        (
            {"exclude_tools": ("mnote.block.move", "mnote_page_save")},
            DEFAULT - {"mnote.block.move", "mnote.page.save"},
        ),
        ({"toolsets": frozenset({"block"}), "exclude_tools": ("*.delete",)}, BLOCK - {"mnote.block.delete"}),
        ({"exclude_tools": ("*",)}, set()),
        ({"read_only": True}, READS & DEFAULT),
        ({"read_only": True, "toolsets": frozenset({"block"})}, BLOCK & READS),
        (
            {"read_only": True, "tools": ("mnote.block.*", "mnote.page.get")},
            BLOCK & READS | {"mnote.page.get"},
        ),
    ],
)
async def test_selection_decides_the_listing(db: Path, config: dict[str, Any], expected: set[str]) -> None:
    assert await _listed(db, **config) == expected


async def test_underscore_names_select_the_same_tools(db: Path) -> None:
    listed = await _listed(db, tools=("mnote.block.*",), tool_names="underscore")
    assert listed == {name.replace(".", "_") for name in BLOCK}


@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_left_out_is_unknown_under_either_name(db: Path, mode: str) -> None:
    async with connect(db, mode, toolsets=frozenset({"page"})) as client:
        for name in ("mnote.block.delete", "mnote_block_delete"):
            with pytest.raises(MCPError, match="Unknown tool"):
                await client.call_tool(name, write_args("k", blockIds=["p_1"]))
        kept = await call(client, "mnote.page.get", **page_args())
    assert kept["ok"]


@pytest.mark.parametrize("mode", MODES)
async def test_read_only_still_refuses_a_selected_write_tool_with_an_envelope(db: Path, mode: str) -> None:
    async with connect(db, mode, read_only=True, toolsets=frozenset({"block"})) as client:
        envelope = await call(client, "mnote.block.update", **write_args("k", blockId="p_1", text="x"))
    assert envelope["error"]["code"] == "mnote_tool_permission_denied"
    assert envelope["error"]["message"] == "the server is in read-only mode: write tools are disabled"


@pytest.mark.parametrize("toolsets", [frozenset(), frozenset(Toolset), frozenset({"page", "block"})])
async def test_a_read_only_refusal_names_the_read_tools_this_server_serves(
    db: Path, toolsets: frozenset[Toolset]
) -> None:
    """The hint is derived from the registry: every tool of the selection that does not write, and no
    other (it once named mnote.page.get and mnote.page.history by hand, and omitted mnote.page.search).
    `frozenset()`: the default selection."""
    served = ToolSelection(toolsets=toolsets).select(ALL_TOOLS)
    async with connect(db, "legacy", read_only=True, toolsets=toolsets) as client:
        envelope = await call(client, "mnote.page.save", **write_args("k", mode="append", blocks=[]))
    error = envelope["error"]
    assert error["details"]["readTools"] == [spec.name for spec in served if not spec.writes]
    named = set(re.findall(r"mnote\.[a-z_]+\.[a-z_]+", error["hint"]))
    assert named == {spec.name for spec in served if not spec.writes}, error["hint"]


def test_flags_and_their_environment_twins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNOTE_TOOLSETS", "page,artifact")
    monkeypatch.setenv("MNOTE_EXCLUDE_TOOLS", "mnote.page.save")
    monkeypatch.setenv("MNOTE_WATCH_INTERVAL", "0.25")
    from_env = parse(["serve"])[1]
    assert from_env.toolsets == {"page", "artifact"}
    assert from_env.exclude_tools == ("mnote.page.save",)
    assert from_env.watch_interval == 0.25
    flags = parse(["serve", "--toolsets", "block", "--tools", "mnote.page.get, mnote_artifact_*"])[1]
    assert flags.toolsets == {"block"}, "the flag wins over the environment"
    assert flags.tools == ("mnote.page.get", "mnote_artifact_*")
    selected = {spec.name for spec in flags.tool_selection.select(ALL_TOOLS)}
    assert selected == BLOCK | ARTIFACT | {"mnote.page.get"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--toolsets", "pages"], "unknown toolset 'pages'"),
        (["--tools", "mnote.pgae.*"], "tool pattern 'mnote.pgae.*' matches no tool"),
        (["--exclude-tools", "mnote.block.remove"], "tool pattern 'mnote.block.remove' matches no tool"),
        (["--watch-interval", "0"], "--watch-interval: must be a positive number"),
    ],
)
def test_a_selection_that_names_nothing_is_a_usage_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_the_default_keeps_the_contracts_tools_and_all_adds_the_rest() -> None:
    """Issue 35: every definition goes with every model request, so the default is the contract's six
    tools and what everyday tasks need; `--toolsets all` is every tool."""
    default = {spec.name for spec in ToolSelection().select(ALL_TOOLS)}
    assert set(CONTRACT) <= default == DEFAULT
    assert EVERY - default == {spec.name for spec in ALL_TOOLS if not spec.by_default}
    assert {"mnote.block.update", "mnote.block.delete", "mnote.page.history"} <= EVERY - default
    every = parse(["serve", "--toolsets", "all"])[1].tool_selection.select(ALL_TOOLS)
    assert [spec.name for spec in every] == [spec.name for spec in ALL_TOOLS]


def test_selection_keeps_declaration_order() -> None:
    selected = ToolSelection(tools=("mnote.artifact.*", "mnote.page.get")).select(ALL_TOOLS)
    expected = ARTIFACT | {"mnote.page.get"}
    assert [spec.name for spec in selected] == [spec.name for spec in ALL_TOOLS if spec.name in expected]
    assert selected[0].name == "mnote.page.get" and len(selected) == len(expected)


@pytest.mark.parametrize(
    ("scopes", "expected"),
    [
        # what a call narrowed to a scope may use, as the tools declare it
        ({Scope.PAGE_READ}, allowed(Caller.PAGE_READ_SCOPE) & DEFAULT),
        (
            {Scope.PAGE_READ, Scope.ARTIFACT_WRITE},
            (allowed(Caller.PAGE_READ_SCOPE) | allowed(Caller.ARTIFACT_SCOPE)) & DEFAULT,
        ),
        ({Scope.PAGE_READ, Scope.PAGE_WRITE}, DEFAULT - allowed(Caller.ARTIFACT_SCOPE)),
    ],
)
async def test_tools_outside_the_granted_scope_are_not_listed(
    db: Path, scopes: set[Scope], expected: set[str]
) -> None:
    """Issue 11 item 13: `--scope page.read` lists no write tool, as `--read-only` does."""
    assert await _listed(db, scopes=frozenset(scopes)) == expected


async def test_the_readme_names_what_the_read_scope_lists(db: Path) -> None:
    """Issue 35: the README said `--scope page.read` lists only `mnote.page.get`; it listed three. Its
    words are generated from the declarations (`tools/docs.py`), and held here to the listing."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    said = readme.split("<!-- generated: page.read tools", 1)[1].split("<!-- end of generated", 1)[0]
    named = set(re.findall(r"`(mnote\.[a-z_.]+)`", said))
    assert named == await _listed(db, scopes=frozenset({Scope.PAGE_READ}))


@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_outside_the_scope_is_still_refused_with_an_envelope(db: Path, mode: str) -> None:
    async with connect(db, mode, scopes=frozenset({Scope.PAGE_READ})) as client:
        envelope = await call(client, "mnote.page.update_title", **write_args("k", title="x"))
    assert envelope["error"]["code"] == "mnote_tool_permission_denied"
    assert envelope["error"]["details"] == {"scope": "page.write"}


@pytest.mark.slow
async def test_over_http_each_token_lists_the_tools_of_its_own_scopes(db: Path, tmp_path: Path) -> None:
    tokens = write_tokens(
        tmp_path / "tokens.json",
        {
            "tok-viewer": {"actorId": "user_viewer", "scopes": ["page.read"]},
            "tok-editor": {"actorId": "user_editor"},
        },
    )
    with http_server(db, "--auth-file", str(tokens), env={"MNOTE_TOOLSETS": ""}) as server:
        listed = {}
        for token in ("tok-viewer", "tok-editor"):
            async with mcp_http(server.url, token, "legacy") as client:
                listed[token] = {tool.name for tool in (await client.list_tools()).tools}
    assert listed == {"tok-viewer": allowed(Caller.PAGE_READ_SCOPE) & DEFAULT, "tok-editor": DEFAULT}


def test_the_default_selection_as_help_shows_it_names_the_tools_left_out() -> None:
    """`--toolsets`'s shown default is words, checked against the declarations: it names exactly the
    tools not selected by default."""
    from mnote_mcp.config import ServerConfig
    from mnote_mcp.settings import options

    (toolsets,) = [option for option in options(ServerConfig) if option.name == "toolsets"]
    named = set(re.findall(r"mnote\.[a-z_]+\.[a-z_]+", toolsets.shown_default))
    assert named == {spec.name for spec in ALL_TOOLS if not spec.by_default}


def test_every_tool_the_words_name_is_served_by_default() -> None:
    """A message or hint that names a tool sends the model to it: on the default selection it must be
    there (a revert's hints named mnote.page.history, which the default leaves out). Words that name
    what a particular server serves take them from the registry (`{readTools}`)."""
    from mnote_mcp.vocabulary.messages import HINTS, MESSAGES, WARNINGS

    texts = [text for table in (MESSAGES, HINTS) for words in table.values() for text in words.values()]
    texts += [text for words in WARNINGS.values() for text in words.values()]
    named = {name for text in texts for name in re.findall(r"mnote\.[a-z_]+\.[a-z_]+", text)}
    assert named, "the check finds the names it is about"
    assert named <= {spec.name for spec in ALL_TOOLS if spec.by_default}, named
