"""The real Hermes (hermes-agent 0.19.0 in `.ci/hermes`, its own virtual environment) against mnote.

Hermes's configuration is the shipped example, verbatim except for the placeholders that name paths,
ports and tokens; its MCP client is driven through Hermes's own entry points (`driver.py`, in Hermes's
interpreter) or its whole agent loop (`hermes chat -q`) against the scripted model of `fake_model.py`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

from tests.support.helpers import ROOT, store_with_pages
from tests.support.timing import patience

HERMES_ENV = ROOT / ".ci" / "hermes"
HERMES_PYTHON = HERMES_ENV / "bin" / "python"
HERMES_CLI = HERMES_ENV / "bin" / "hermes"
DRIVER = Path(__file__).resolve().parent / "driver.py"
EXAMPLES = ROOT / "examples"
DEMO_FIXTURE = ROOT / "mnote_mcp" / "data" / "demo_workspace.json"
MNOTE_COMMAND = Path(sys.executable).parent / "mnote-mcp"
# What the examples say where a user writes their own values: only these are substituted.
COMMAND_PLACEHOLDER = "/abs/path/to/mnote_mcp/.venv/bin/mnote-mcp"
DB_PLACEHOLDER = "/abs/path/mnote.db"
ADDRESS_PLACEHOLDER = "127.0.0.1:8765"
BIG_PAGE = "doc_big"
BIG_PAGE_BLOCKS = 400
HERMES_RESULT_LIMIT = 100_000  # tools/budget_config.py DEFAULT_RESULT_SIZE_CHARS in 0.19.0


def require_hermes() -> None:
    if HERMES_PYTHON.exists() and HERMES_CLI.exists():
        return
    if os.environ.get("MNOTE_REQUIRE_HERMES") == "1":
        pytest.fail(f"hermes-agent is not installed in {HERMES_ENV} (bash .ci/run installs it)")
    pytest.skip(f"hermes-agent is not installed in {HERMES_ENV} (bash .ci/run installs it)")


def example_config(name: str, substitutions: Mapping[str, str]) -> str:
    """A shipped example, with each placeholder replaced (every placeholder named must be there) and
    its timeouts given this run's patience (tests/support/timing.py)."""
    text = (EXAMPLES / name).read_text(encoding="utf-8")
    for placeholder, value in substitutions.items():
        assert placeholder in text, f"{name} no longer contains {placeholder!r}"
        text = text.replace(placeholder, value)
    return _TIMEOUT_LINE.sub(lambda line: f"{line.group(1)}{round(patience(int(line.group(2))))}", text)


# Hermes's waits for a server: to connect, for a call's answer, for discovery before a chat's first turn.
_TIMEOUT_LINE = re.compile(
    r"^(\s*(?:connect_timeout|timeout|mcp_discovery_timeout):\s*)(\d+)\b", re.MULTILINE
)


def example_serve_command(name: str) -> list[str]:
    """The `mnote-mcp serve ...` command an example's comment tells the user to start."""
    text = (EXAMPLES / name).read_text(encoding="utf-8")
    match = re.search(r"^#\s+(mnote-mcp serve .*)$", text, re.MULTILINE)
    assert match is not None, f"{name} names no `mnote-mcp serve` command"
    return shlex.split(match.group(1))[2:]


def big_page(blocks: int = BIG_PAGE_BLOCKS) -> dict[str, Any]:
    """A long page of ordinary prose blocks (about 170 characters of envelope JSON each)."""
    return {
        "id": BIG_PAGE,
        "title": "A long page",
        "blocks": [
            {
                "id": f"b_{index:04d}",
                "type": "paragraph",
                "text": f"Paragraph {index} of a long page: notes, decisions and the reasons behind them, "
                "written the way people write meeting minutes.",
            }
            for index in range(blocks)
        ],
    }


def demo_store(path: Path, *pages: dict[str, Any]) -> Path:
    """The demo workspace (the examples act as `user_1`, its editor) plus a 400-block page in ws_1."""
    return store_with_pages(path, DEMO_FIXTURE, big_page(), *pages)


def hermes_env(home: Path, **extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("HERMES_", "OPENAI_", "ANTHROPIC_", "OPENROUTER_", "MNOTE_"))
    }
    return {**env, "HERMES_HOME": str(home), "HOME": str(home.parent), "PYTHONUNBUFFERED": "1", **extra}


# Test-only, never in the shipped examples: Hermes 0.19.0's environment probe (tools/env_probe.py, on
# unless `agent.environment_probe` is false; agent/agent_init.py) starts `python3 -m pip --version` and
# the like on every agent start to describe the Python toolchain in the system prompt. Nothing here
# depends on it (mnote is no Python toolchain), and it cost about half a CPU second per Hermes run.
NO_ENVIRONMENT_PROBE = "\nagent:\n  environment_probe: false\n"
ENVIRONMENT_PROBE_READ = '_agent_section.get("environment_probe", True)'


def environment_probe_off(home: Path) -> bool:
    """Whether the home's config.yaml turns the probe off (`agent.environment_probe: false`), read as
    Hermes reads it (YAML), and Hermes still reads that key (a renamed key would be ignored quietly)."""
    import yaml

    read = (HERMES_ENV / "lib" / "python3.11" / "site-packages" / "agent" / "agent_init.py").read_text()
    config = yaml.safe_load((home / "config.yaml").read_text(encoding="utf-8"))
    return ENVIRONMENT_PROBE_READ in read and (config.get("agent") or {}).get("environment_probe") is False


def write_home(home: Path, config: str) -> Path:
    """A Hermes home with `config` as its config.yaml, plus the test-only part: no environment probe."""
    assert not re.search(r"^agent:", config, re.MULTILINE), "the config has its own `agent:` section"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(config.rstrip("\n") + "\n" + NO_ENVIRONMENT_PROBE, encoding="utf-8")
    return home


def model_section(base_url: str, context_length: int = 200_000) -> str:
    """The scripted model: a custom OpenAI-compatible provider with a 200k-token window by default, so
    that Hermes's per-result limit is its default 100,000 characters (tools/budget_config.py: 0.6
    characters per token of the window, at most 100,000, at least 8,000)."""
    return (
        "\nmodel:\n"
        "  provider: custom\n"
        f"  base_url: {base_url}\n"
        "  default: scripted-model\n"
        f"  context_length: {context_length}\n"
    )


def hermes_result_limit(context_length: int) -> int:
    """Hermes 0.19.0's cut for one tool result on a model with this window (`budget_for_context_window`)."""
    return max(8_000, min(int(context_length * 4 * 0.15), HERMES_RESULT_LIMIT))


@dataclass
class HermesDriver:
    """One Hermes process (driver.py) holding its MCP connections open between commands."""

    process: subprocess.Popen[str]

    def send(self, command: dict[str, Any]) -> dict[str, Any]:
        stdin: IO[str] | None = self.process.stdin
        stdout: IO[str] | None = self.process.stdout
        assert stdin is not None and stdout is not None
        stdin.write(json.dumps(command) + "\n")
        stdin.flush()
        line = stdout.readline()
        if not line:
            raise RuntimeError(f"the Hermes driver exited (code {self.process.poll()})")
        answer: dict[str, Any] = json.loads(line)
        if "failure" in answer:
            raise RuntimeError(answer["failure"])
        return answer

    def discover(self, *toolsets: str) -> list[dict[str, Any]]:
        definitions: list[dict[str, Any]] = self.send({"op": "discover", "toolsets": list(toolsets)})[
            "definitions"
        ]
        return definitions

    def call(self, name: str, **arguments: Any) -> str:
        """What Hermes hands the model for this tool call (before the agent loop's size limit); a
        question mnote asks meanwhile finds no answer (a denial)."""
        return self.answered(name, "", **arguments)[0]

    def answered(self, name: str, approve: str, **arguments: Any) -> tuple[str, str]:
        """The tool call, with `approve` typed at Hermes's approval prompt if mnote asks ("o": once,
        "d": deny): what the model is handed, and what Hermes printed (the prompt, when it asked)."""
        answer = self.send({"op": "call", "name": name, "args": arguments, "approve": approve})
        return str(answer["text"]), str(answer["printed"])

    def present(self, name: str, text: str, context_length: int = 200_000) -> str:
        """What Hermes's agent loop shows the model of a call's `text` (driver.py, "present")."""
        shown: str = self.send(
            {"op": "present", "name": name, "text": text, "context_length": context_length}
        )["text"]
        return shown

    def status(self) -> list[dict[str, Any]]:
        status: list[dict[str, Any]] = self.send({"op": "status"})["status"]
        return status


@contextmanager
def hermes_driver(home: Path, log: Path, **env: str) -> Iterator[HermesDriver]:
    with log.open("w", encoding="utf-8") as stderr:
        process = subprocess.Popen(
            [str(HERMES_PYTHON), str(DRIVER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            cwd=home,
            env=hermes_env(home, **env),
        )
        driver = HermesDriver(process)
        try:
            yield driver
        finally:
            with suppress(RuntimeError, OSError, ValueError):
                driver.send({"op": "quit"})
            try:
                process.wait(timeout=patience(60))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def run_agent_loop(
    home: Path, prompt: str, toolset: str, *, typed: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """Hermes's whole agent loop, once: `hermes chat -q PROMPT -Q -t TOOLSET`; `typed` is what the
    person types at its prompts (Hermes's approval prompt reads stdin), or nothing at all.

    Not `hermes -z`: in 0.19.0 it builds its agent while MCP discovery still runs in a background
    thread and never waits for it, so its one turn may go to the model with no MCP tools at all.
    `chat -q` waits for discovery up to the config's `mcp_discovery_timeout` (docs/hermes.md).
    """
    assert environment_probe_off(home), f"{home / 'config.yaml'} leaves Hermes's environment probe on"
    return subprocess.run(
        [str(HERMES_CLI), "chat", "-q", prompt, "-Q", "-t", toolset],
        capture_output=True,
        text=True,
        timeout=patience(600),
        cwd=home,
        input=typed,
        stdin=subprocess.DEVNULL if typed is None else None,
        env=hermes_env(home, OPENAI_API_KEY="scripted", **env),
    )


LOGIN_URL = re.compile(rb"(https?://\S+/auth\?\S+)")


def hermes_login(home: Path, server_key: str, login: str, *, timeout: float = 180) -> str:
    """`hermes mcp login KEY` as a person runs it, with no person: Hermes starts its browser flow only
    on a terminal, so it gets a pseudo-terminal; the URL it prints is followed through the provider's
    sign-in and consent (`tests/support/oidc.py`, `sign_in`) and the redirect it ends at is opened, which
    delivers the code to Hermes's own callback listener. Returns what Hermes printed."""
    import pty
    import select
    from urllib.parse import parse_qs, urlsplit

    import httpx2

    from tests.support.oidc import sign_in

    environment = hermes_env(home)
    for display in ("DISPLAY", "WAYLAND_DISPLAY"):  # no browser to open: Hermes prints the URL
        environment.pop(display, None)
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [str(HERMES_CLI), "mcp", "login", server_key],
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        cwd=home,
        env=environment,
    )
    os.close(terminal)
    printed, signed_in, deadline = b"", False, time.monotonic() + patience(timeout)
    try:
        while process.poll() is None and time.monotonic() < deadline:
            if not select.select([controller], [], [], 0.5)[0]:
                continue
            try:
                printed += os.read(controller, 65536)
            except OSError:  # the terminal closed: Hermes is done
                break
            found = LOGIN_URL.search(printed)
            if found and not signed_in:
                url = found.group(1).decode()
                redirect = parse_qs(urlsplit(url).query)["redirect_uri"][0]
                httpx2.get(sign_in(url, redirect, login), timeout=patience(30), trust_env=False)
                signed_in = True
        process.wait(timeout=patience(30))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(controller)
    return printed.decode(errors="replace")


def model_name(server_key: str, tool: str) -> str:
    """The name Hermes gives the model for a server's tool (tools/mcp_tool.py mcp_prefixed_tool_name)."""
    return "mcp__" + re.sub(r"[^A-Za-z0-9_]", "_", server_key) + "__" + re.sub(r"[^A-Za-z0-9_]", "_", tool)


def unwrap(text: str) -> dict[str, Any]:
    """The envelope inside what Hermes handed the model, checking it is there exactly once.

    Hermes wraps a result as `{"result": "<text>"}` when only a text block came (the default form),
    `{"result": structuredContent}` when only structured content did, `{"result": "<text>",
    "structuredContent": {...}}` when both did, `{"error": "<text>"}` when `isError` was set. The first
    two are the envelope once.
    """
    outer = json.loads(payload(text))
    assert set(outer) == {"result"}, f"the model saw {sorted(outer)}, not the envelope once: {text[:300]}"
    envelope = outer["result"]
    if isinstance(envelope, str):
        envelope = json.loads(envelope)
    assert isinstance(envelope, dict), f"the model saw the envelope as {type(envelope).__name__}"
    return envelope


def failure_seen(text: str) -> dict[str, Any]:
    """The envelope of a real failure (`isError`) as Hermes handed it to the model: `{"error": "<the
    text blocks>"}`; the text must be the envelope, with its code, `retryable` and hint."""
    outer = json.loads(payload(text))
    assert set(outer) == {"error"}, f"the model saw {sorted(outer)}: {text[:300]}"
    envelope = json.loads(outer["error"])
    assert isinstance(envelope, dict) and envelope["ok"] is False, envelope
    return envelope


def payload(text: str) -> str:
    """The tool's own output in what the model was shown. The agent loop puts tool output inside an `<untrusted_tool_result>` block, and may append a
    `[Tool loop warning: ...]` of its guardrails (agent/tool_guardrails.py); the JSON is what is left."""
    if text.startswith("<untrusted_tool_result"):
        text = text.split("\n\n", 1)[1].rsplit("\n</untrusted_tool_result>", 1)[0]
    return GUARDRAIL_NOTE.sub("", text)


GUARDRAIL_NOTE = re.compile(r"\n\n\[Tool loop (?:warning|hard stop): [^\n]*\]$")


def compact(envelope: Mapping[str, Any]) -> str:
    return json.dumps(envelope, ensure_ascii=False, separators=(",", ":"))
