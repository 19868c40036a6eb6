"""The command line: serve flags and their environment twins, seed, audit, demo."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from mnote_mcp.cli import COMMANDS, TOKEN_COMMANDS, main, parse
from mnote_mcp.config import ServerConfig
from mnote_mcp.demo import STEPS, derived_steps
from mnote_mcp.tools.catalog import ALL_TOOLS
from mnote_mcp.vocabulary.scopes import Scope
from tests.support.helpers import FIXTURE, dump, envelope_of, page_args, run_cli, stdio_params, write_args
from tests.support.timing import patience

pytestmark = pytest.mark.anyio


def serve_config(argv: list[str]) -> ServerConfig:
    command, config = parse(argv)
    assert command == "serve" and isinstance(config, ServerConfig)
    return config


def test_serve_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNOTE_ACTOR", "env_actor")
    monkeypatch.setenv("MNOTE_READ_ONLY", "true")
    monkeypatch.setenv("MNOTE_LOCALE", "en")
    config = serve_config(
        [
            "serve",
            "--scope",
            "page.read,artifact.write",
            "--tool-names",
            "underscore",
            "--session-id",
            "s1",
            "--strict-contract",
        ]
    )
    assert config.actor == "env_actor" and config.read_only and config.locale == "en"
    assert config.scopes == {Scope.PAGE_READ, Scope.ARTIFACT_WRITE}
    assert config.granted_scopes == {Scope.PAGE_READ}, "read-only wins over --scope"
    assert config.tool_names == "underscore" and config.strict_contract
    assert config.bindings == {"sessionId": "s1"}
    flag_wins = serve_config(["serve", "--actor", "flag_actor"])
    assert flag_wins.actor == "flag_actor"


def test_unknown_scope_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--scope", "page.admin"]) == 2
    assert "unknown scope 'page.admin'" in capsys.readouterr().err


@pytest.mark.slow
def test_seed_is_idempotent(tmp_path: Path) -> None:
    db = tmp_path / "seeded.db"
    first = run_cli("seed", "--db", str(db), str(FIXTURE))
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == {
        "store": str(db),
        "created": {"workspaces": 2, "members": 5, "pages": 3},
        "kept": {"unchanged": [], "changed": [], "members": []},
        "replaced": [],
    }
    before = dump(db)
    again = run_cli("seed", "--db", str(db), str(FIXTURE))
    assert again.returncode == 0 and dump(db) == before
    assert json.loads(again.stdout)["kept"]["unchanged"] == [
        "ws_1/doc_1",
        "ws_1/doc_secret",
        "ws_other/doc_other",
    ]


@pytest.mark.slow
def test_seed_refuses_a_bad_fixture(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"workspaces": [{"id": "w", "members": [{"actorId": "a", "role": "god"}]}]}))
    result = run_cli("seed", "--db", str(tmp_path / "x.db"), str(bad))
    assert result.returncode == 2
    assert "/workspaces/0/members/0/role" in result.stderr
    blocks = tmp_path / "blocks.json"
    blocks.write_text(
        json.dumps(
            {"workspaces": [{"id": "w", "pages": [{"id": "p", "title": "t", "blocks": [{"type": "video"}]}]}]}
        )
    )
    result = run_cli("seed", "--db", str(tmp_path / "y.db"), str(blocks))
    assert result.returncode == 2 and "/workspaces/0/pages/0/blocks/0/type" in result.stderr


@pytest.mark.slow
async def test_serve_seed_and_audit_lookup(tmp_path: Path) -> None:
    db = tmp_path / "served.db"
    params = stdio_params(db, "--seed", str(FIXTURE), "--actor", "user_editor")
    async with Client(params, read_timeout_seconds=patience(30)) as client:
        envelope = envelope_of(
            await client.call_tool("mnote.page.update_title", write_args("k", title="CLI"))
        )
        read = envelope_of(await client.call_tool("mnote.page.get", page_args()))
    assert read["result"]["title"] == "CLI"
    command_id = envelope["audit"]["commandId"]
    by_trace = run_cli("audit", "--db", str(db), "--trace", "trace_t")
    records = [json.loads(line) for line in by_trace.stdout.splitlines()]
    assert [r["commandId"] for r in records] == [command_id]
    by_id = run_cli("audit", "--db", str(db), "--command-id", command_id)
    assert json.loads(by_id.stdout)["traceId"] == "trace_t"
    missing = run_cli("audit", "--db", str(db), "--trace", "no_such_trace")
    assert missing.returncode == 1 and missing.stdout == ""


@pytest.mark.slow
async def test_environment_twin_sets_the_actor(tmp_path: Path) -> None:
    db = tmp_path / "env.db"
    params = stdio_params(db, "--seed", str(FIXTURE), env={"MNOTE_ACTOR": "user_viewer"})
    async with Client(params, read_timeout_seconds=patience(30)) as client:
        envelope = envelope_of(await client.call_tool("mnote.page.update_title", write_args("k", title="x")))
    assert envelope["error"]["message"] == "no page write permission"


def test_the_demo_tour_calls_every_registered_tool() -> None:
    """Issue 35: "a tour of every tool" called 10 of 14. The tour is the narrated steps plus one step
    from its first example for any registered tool they leave out, so a new tool is in it."""
    narrated = {step.tool for step in STEPS}
    derived = {step.tool for step in derived_steps(ALL_TOOLS, narrated)}
    assert narrated | derived == {spec.name for spec in ALL_TOOLS}
    assert {
        "mnote.page.edit_text",
        "mnote.page.search",
        "mnote.page.history",
        "mnote.page.revert",
    } <= narrated


def test_a_tool_the_narration_leaves_out_gets_a_step_of_its_own() -> None:
    spec = next(spec for spec in ALL_TOOLS if spec.name == "mnote.block.delete")
    (step,) = derived_steps([spec], set())
    assert step.tool == "mnote.block.delete" and step.example == spec.example


def test_a_derived_step_makes_its_examples_setup_first() -> None:
    """For real (the demo's store is thrown away), then the example's dry run on what it set up."""
    specs = [spec for spec in ALL_TOOLS if spec.name in ("mnote.page.edit_text", "mnote.block.update")]
    edit = next(spec for spec in specs if spec.name == "mnote.page.edit_text")
    steps = derived_steps(specs, {"mnote.block.update"})
    assert [(step.tool, step.example) for step in steps] == [
        ("mnote.block.update", edit.example.setup[0]),
        ("mnote.page.edit_text", edit.example),
    ]
    assert [step.args["dryRun"] for step in steps] == [False, True]


@pytest.mark.slow
def test_demo_runs_every_tool() -> None:
    result = run_cli("demo")
    assert result.returncode == 0, result.stderr
    for spec in ALL_TOOLS:
        assert f"[{spec.name}]" in result.stdout, spec.name
    assert "idempotentReplay" in result.stdout and "mnote_tool_conflict" in result.stdout
    assert f"{len(STEPS) + 1}. the audit trail" in result.stdout
    assert "Traceback" not in result.stdout


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag: str) -> None:
    result = run_cli(flag)
    assert result.returncode == 0 and result.stdout.startswith("mnote-mcp 0.1.0"), result.stderr


@pytest.mark.parametrize("asked", [["--help"], ["-h"], ["help"]])
def test_help_is_short_and_headed_by_the_commands(asked: list[str]) -> None:
    """Issue 35: `mnote-mcp --help` printed serve's 420 lines, headed `usage: mnote-mcp serve`, the
    other commands named only on the last line; `mnote-mcp help` exited 2."""
    result = run_cli(*asked, env={"COLUMNS": "100"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("usage: mnote-mcp ") and "serve" not in lines[0], lines[0]
    assert len(lines) <= 40, len(lines)
    commands = [*COMMANDS, "runtime serve", "runtime cli", *(f"token {word}" for word in TOKEN_COMMANDS)]
    listed = "\n".join(lines[:30])
    for command in commands:
        assert f"  {command} " in listed, f"{command} is not in the list at the top"
    assert "mnote-mcp help COMMAND" in result.stdout and "--version" in result.stdout


def test_help_on_a_command_is_that_commands_help() -> None:
    by_word = run_cli("help", "seed", env={"COLUMNS": "100"})
    by_flag = run_cli("seed", "--help", env={"COLUMNS": "100"})
    assert by_word.returncode == by_flag.returncode == 0
    assert by_word.stdout == by_flag.stdout and by_word.stdout.startswith("usage: mnote-mcp seed")
    unknown = run_cli("help", "nonsense")
    assert unknown.returncode == 2 and "nonsense" in unknown.stderr


@pytest.mark.slow
def test_audit_says_on_stderr_when_nothing_matches(tmp_path: Path) -> None:
    """Issue 11 item 5: exit 1 with a word on stderr, not silently."""
    db = tmp_path / "audited.db"
    assert run_cli("seed", "--db", str(db), str(FIXTURE)).returncode == 0
    by_id = run_cli("audit", "--db", str(db), "--command-id", "page_body_save_nope")
    assert by_id.returncode == 1 and by_id.stdout == ""
    assert "no audit record with commandId page_body_save_nope" in by_id.stderr
    by_trace = run_cli("audit", "--db", str(db), "--trace", "no_such_trace")
    assert by_trace.returncode == 1 and "no audit record with traceId no_such_trace" in by_trace.stderr


@pytest.mark.slow
def test_demo_and_serve_share_one_default_locale() -> None:
    """Issue 11 item 10: one default, the contract's language (docs/decisions.md)."""
    assert parse(["demo"], {})[1].locale == parse(["serve"], {})[1].locale == "zh-CN"
    result = run_cli("demo")
    assert result.returncode == 0, result.stderr
    assert "页面版本冲突" in result.stdout, "the demo speaks the default locale"


@pytest.mark.slow
def test_the_demo_shows_what_it_sends() -> None:
    """Issue 11 item 14: every call's arguments, before its envelope, so a reader learns the calls."""
    result = run_cli("demo", "--locale", "en")
    assert result.returncode == 0, result.stderr
    sections = result.stdout.split("\n== ")[1:]  # after tools/list
    calls = [s for s in sections if s.split("\n", 1)[0].rstrip().endswith("]")]
    assert len(calls) >= 14
    for section in calls:
        assert "-> tools/call" in section and "<- " in section, section[:200]
        sent = section.split("-> tools/call", 1)[1].split("<- ", 1)[0]
        arguments = json.loads(sent[sent.index("{") :])
        assert {"name", "arguments"} <= set(arguments), sent
    assert '"idempotencyKey": "demo_save"' in result.stdout
