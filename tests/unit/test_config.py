"""Issue 11 item 9: every flag's variable is checked exactly like the flag, and `--help` says it all.

The cases the issue names run the real program (`python -m mnote_mcp`) with only the environment set;
the property test holds every declared setting of every command to "the variable gives what the flag
gives, or the same refusal".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client

from mnote_mcp.cli import COMMANDS, RUNTIME_COMMANDS, TOKEN_COMMANDS, parse
from mnote_mcp.config import ServerConfig
from mnote_mcp.settings import Option, SettingError, from_sources, options
from tests.support.helpers import FIXTURE, ROOT, envelope_of, run_cli, stdio_params, write_args
from tests.support.timing import patience

pytestmark = pytest.mark.anyio
CONFIGS = [load() for load, _ in (*COMMANDS.values(), *RUNTIME_COMMANDS.values(), *TOKEN_COMMANDS.values())]


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("MNOTE_TRANSPORT", "tcp", "MNOTE_TRANSPORT='tcp': 'tcp' is not one of stdio, sse, http"),
        ("MNOTE_READ_ONLY", "maybe", "MNOTE_READ_ONLY='maybe': 'maybe' is not a boolean"),
        ("MNOTE_PORT", "abc", "MNOTE_PORT='abc': 'abc' is not a whole number"),
        ("MNOTE_PORT", "99999", "MNOTE_PORT='99999': 99999 is not a TCP port"),
        ("MNOTE_LOCALE", "fr_FR", "MNOTE_LOCALE='fr_FR': unknown locale 'fr_FR'"),
        ("MNOTE_WATCH_INTERVAL", "-1", "MNOTE_WATCH_INTERVAL='-1': must be a positive number"),
        ("MNOTE_SCOPE", "page.admin", "MNOTE_SCOPE='page.admin': unknown scope 'page.admin'"),
    ],
)
def test_a_bad_variable_is_a_usage_error_naming_it(variable: str, value: str, says: str) -> None:
    result = run_cli("serve", env={variable: value})
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == f"mnote-mcp: {says}" or says in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_the_same_value_as_a_flag_is_refused_the_same_way() -> None:
    result = run_cli("serve", "--transport", "tcp", env={})
    assert result.returncode == 2 and "--transport: 'tcp' is not one of stdio, sse, http" in result.stderr


@pytest.mark.parametrize("asked", [["--help"], ["serve", "--help"]])
def test_help_works_whatever_the_environment_says(asked: list[str]) -> None:
    result = run_cli(*asked, env={"MNOTE_PORT": "abc", "MNOTE_TRANSPORT": "tcp"})
    assert result.returncode == 0 and "Traceback" not in result.stderr
    assert ("--port PORT" in result.stdout) == (asked[0] == "serve")


@pytest.mark.parametrize(
    "command",
    ["serve", "seed", "audit", "token", "token list", "token revoke", "demo", "runtime serve", "runtime cli"],
)
def test_help_shows_every_flag_with_its_default_and_variable(command: str) -> None:
    result = run_cli(*command.split(), "--help", env={"COLUMNS": "300"})
    assert result.returncode == 0, result.stderr
    config = (
        COMMANDS.get(command)
        or TOKEN_COMMANDS.get(command.removeprefix("token "))
        or RUNTIME_COMMANDS[command.removeprefix("runtime ")]
    )[0]()
    text = " ".join(result.stdout.split())
    for option in options(config):
        if option.setting.positional:
            continue
        if option.flag is None:
            assert f"{option.env} {option.setting.help}" in text, f"{option.env} not documented"
            continue
        assert option.flag in text
        if not option.setting.switch:
            assert f"default: {option.shown_default}" in text, option.flag
        if option.env:
            assert option.env in text, f"{option.flag} does not name {option.env}"


@pytest.mark.parametrize(
    ("value", "locale"),
    [("zh_CN", "zh-CN"), ("zh-CN", "zh-CN"), ("zh_CN.UTF-8", "zh-CN"), ("en", "en"), ("en_US.UTF-8", "en")],
)
def test_common_locale_spellings_are_accepted(value: str, locale: str) -> None:
    assert parse(["serve"], {"MNOTE_LOCALE": value})[1].locale == locale
    assert parse(["serve", "--locale", value], {})[1].locale == locale


def test_a_yes_variable_makes_the_server_read_only() -> None:
    for value in ("y", "yes", "1", "true", "ON"):
        assert parse(["serve"], {"MNOTE_READ_ONLY": value})[1].read_only
    for value in ("n", "0", "false", ""):
        assert not parse(["serve"], {"MNOTE_READ_ONLY": value})[1].read_only


@pytest.mark.slow
async def test_a_server_started_with_zh_cn_speaks_chinese(tmp_path: Any) -> None:
    """Today's main: every failure of such a server was `{"code": 0, "message": "'zh_CN'"}`."""
    params = stdio_params(
        tmp_path / "zh.db", "--seed", str(FIXTURE), "--actor", "user_editor", env={"MNOTE_LOCALE": "zh_CN"}
    )
    params.args.remove("--locale")
    params.args.remove("en")
    async with Client(params, read_timeout_seconds=patience(30)) as client:
        refused = envelope_of(
            await client.call_tool("mnote.page.update_title", write_args("k", title="x", document_id="nope"))
        )
    assert refused["error"]["code"] == "mnote_tool_not_found"
    assert refused["error"]["message"] == "页面不存在"


def _outcome(option: Option, config: type[Any], given: dict[str, str], environ: dict[str, str]) -> Any:
    """The value `option` gets, or the reason it is refused (without the name of flag or variable)."""
    others = {o.name: "x" for o in options(config) if o.setting.required and o.name != option.name}
    try:
        return getattr(from_sources(config, {**others, **given}, environ), option.name)
    except SettingError as error:
        return ("refused", error.reason)


VALUES = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        ["0", "1", "-1", "65536", "8765", "1e3", "inf", "nan", "y", "true", "zh_CN", "en", "http"]
    ),
    st.sampled_from(["page.read", "page.write,artifact.write", "block", "page,block", "debug", "json"]),
)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), value=VALUES)
def test_a_variable_is_read_exactly_like_its_flag(data: st.DataObject, value: str) -> None:
    config = data.draw(st.sampled_from(CONFIGS))
    candidates = [o for o in options(config) if o.env and o.flag and not o.setting.positional]
    option = data.draw(st.sampled_from(candidates))
    from_flag = _outcome(option, config, {option.name: value}, {})
    from_variable = _outcome(option, config, {}, {option.env: value} if option.env else {})
    assert from_flag == from_variable


def test_the_flag_wins_over_the_variable() -> None:
    config = parse(["serve", "--port", "9000"], {"MNOTE_PORT": "abc"})[1]
    assert isinstance(config, ServerConfig) and config.port == 9000


MISMATCHED = """
from dataclasses import dataclass
from typing import Literal

from mnote_mcp.settings import choice, positive_number, setting


@dataclass(frozen=True)
class Mismatched:
    port: int = setting(8765, positive_number, "a float parser for an int field")
    form: Literal["a"] = setting("a", choice("a", "b"), "words the field's type does not hold")
    fine: float = setting(1.0, positive_number, "a float parser for a float field")
"""


@pytest.mark.slow  # mypy itself: 1 s (it was 27 to 54 s over everything config.py imports)
def test_a_setting_whose_parser_gives_another_type_fails_mypy(tmp_path: Path) -> None:
    """Issue 21: a field's type, its default and its parser are checked against each other, so the
    settings declared in config.py and settings.py are what the parsers give (the whole package is
    held to that by the CI's mypy --strict); here, that a mismatch is caught at all. mypy reads
    settings.py and the module, not what settings.py imports (`--follow-imports=skip`: those are `Any`
    here, and their errors are not this test's): `setting`, `choice` and the parsers are declared in
    settings.py itself."""
    from mypy import api

    module = tmp_path / "mismatched.py"
    module.write_text(MISMATCHED, encoding="utf-8")
    argv = ["--strict", "--no-error-summary", "--follow-imports=skip", "--cache-dir", str(tmp_path / "cache")]
    out, _, status = api.run([*argv, str(module), str(ROOT / "mnote_mcp" / "settings.py")])
    errors = [line for line in out.splitlines() if ": error:" in line and line.startswith(str(module))]
    assert status == 1 and len(errors) == 2, out
    assert ':10: error: Argument 2 to "setting"' in errors[0] and "float" in errors[0], out
    assert ":11: error:" in errors[1], out
