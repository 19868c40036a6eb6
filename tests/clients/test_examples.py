"""Issue 11 item 11: the Inspector commands of the README and examples/ name the Inspector version the
tests use, and run as written.

`npx` would fetch that version from the registry on every run; the tests run the same command line with
the CLI `bash .ci/run` installed at that same version (the equivalent), and the example scripts as they
are. A README command that stops working, or a pin that drifts from .ci/node/package.json, fails here.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.helpers import INSPECTOR, INSPECTOR_CONNECT, ROOT
from tests.support.http_helpers import http_server
from tests.support.timing import patience, patience_ms

pytestmark = pytest.mark.inspector
PACKAGE = "@modelcontextprotocol/inspector"
PINNED = json.loads((ROOT / ".ci" / "node" / "package.json").read_text(encoding="utf-8"))["dependencies"][
    PACKAGE
]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "examples").iterdir())]
NPX = re.compile(r"npx (?:-y )?" + re.escape(PACKAGE) + r"@([\w.-]+)")


def _environment(home: Path, **extra: str) -> dict[str, str]:
    """No `MNOTE_*` variable but those given; the example scripts' Inspector connection timeout from
    tests/support/timing.py."""
    clean = {key: value for key, value in os.environ.items() if not key.startswith("MNOTE_")}
    connect = patience_ms(INSPECTOR_CONNECT)
    return {
        **clean,
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "INSPECTOR_CONNECT_TIMEOUT_MS": connect,
        **extra,
    }


def _require_inspector() -> None:
    if not INSPECTOR.exists():
        if os.environ.get("MNOTE_REQUIRE_INSPECTOR") == "1":
            pytest.fail(f"the MCP Inspector CLI is not installed at {INSPECTOR}")
        pytest.skip("the MCP Inspector CLI is not installed (bash .ci/run installs it)")


def test_every_inspector_command_names_the_tested_version() -> None:
    mentions = 0
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        for match in re.finditer(re.escape(PACKAGE) + r"(@[\w.-]+)?", text):
            mentions += 1
            version = (match.group(1) or "")[1:]
            assert version == PINNED, f"{document.name}: {match.group(0)!r} is not {PACKAGE}@{PINNED}"
    assert mentions >= 3


def readme_cli_commands() -> list[str]:
    """The README's inline Inspector CLI commands, as written."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return [code for code in re.findall(r"`(npx [^`]+)`", readme) if NPX.match(code) and " --cli " in code]


def test_the_readme_has_inspector_cli_commands() -> None:
    assert readme_cli_commands(), "the README shows how to run the Inspector"


@pytest.mark.parametrize("command", readme_cli_commands())
def test_a_readme_inspector_command_runs(command: str, tmp_path: Path) -> None:
    _require_inspector()
    argv = shlex.split(NPX.sub(str(INSPECTOR), command))
    argv[argv.index("--cli") + 1 : argv.index("--cli") + 1] = [
        "--connect-timeout",
        patience_ms(INSPECTOR_CONNECT),
    ]
    assert (ROOT / ".venv" / "bin" / "mnote-mcp").exists(), "the README's first command creates it"
    result = subprocess.run(
        argv, capture_output=True, text=True, timeout=patience(120), cwd=ROOT, env=_environment(tmp_path)
    )
    assert result.returncode == 0, result.stderr[-2000:]
    if "tools/list" in command:
        assert "mnote.page.get" in [tool["name"] for tool in json.loads(result.stdout)["tools"]]


def test_the_stdio_example_script_runs_as_written(tmp_path: Path) -> None:
    _require_inspector()
    result = subprocess.run(
        ["bash", "examples/inspector-stdio.sh"],
        capture_output=True,
        text=True,
        timeout=patience(240),
        cwd=ROOT,
        env=_environment(tmp_path, MNOTE_DB=str(tmp_path / "inspector.db")),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert '"mnote.page.get"' in result.stdout and re.search(
        r'\\?"ok\\?":\s*true', result.stdout
    )  # the envelope, in its text block
    assert '"name": "summarise_page"' in result.stdout and '"title": "总结页面"' in result.stdout, (
        "prompts/list"
    )
    assert "Summarise the mnote page “Project plan”" in result.stdout, "prompts/get, in English"
    assert '"uri": "mnote://workspaces/ws_1/pages/doc_1"' in result.stdout, "the page attached"


FAKE_INSPECTOR = """import json, os, stat, sys
argv = sys.argv[1:]
db = argv[argv.index("--db") + 1]
folder = os.path.dirname(db)
with open(os.environ["SEEN"], "a") as seen:
    seen.write(json.dumps({"db": db, "mode": stat.S_IMODE(os.stat(folder).st_mode)}) + "\\n")
"""


def test_the_stdio_example_script_keeps_a_store_of_its_own(tmp_path: Path) -> None:
    """Issue 35: examples/inspector-stdio.sh defaulted to /tmp/mnote-inspector.db, one store for every
    user of the machine (readable, and writable by whoever made it first). Now each run, unless
    MNOTE_DB names one, has a store in a private directory of its own, removed at the end; every call
    of a run uses the same one. Run with a stand-in Inspector that records where the store is."""
    fake = tmp_path / "fake_inspector.py"
    fake.write_text(FAKE_INSPECTOR, encoding="utf-8")
    seen = tmp_path / "seen.jsonl"
    runs = []
    for _ in range(2):
        seen.write_text("", encoding="utf-8")
        result = subprocess.run(
            ["bash", "examples/inspector-stdio.sh"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            env=_environment(tmp_path, INSPECTOR=f"{sys.executable} {fake}", SEEN=str(seen)),
        )
        assert result.returncode == 0, result.stderr[-2000:]
        calls = [json.loads(line) for line in seen.read_text(encoding="utf-8").splitlines()]
        assert len(calls) >= 4 and len({call["db"] for call in calls}) == 1, calls
        assert all(call["mode"] == 0o700 for call in calls), calls
        assert not Path(calls[0]["db"]).parent.exists(), "the run's store is removed at its end"
        runs.append(calls[0]["db"])
    assert runs[0] != runs[1] and "/tmp/mnote-inspector.db" not in runs


def test_the_session_example_script_runs_as_written(tmp_path: Path) -> None:
    """examples/inspector-session.sh: mcpdo keeps one stdio connection; a delete of a list with its child
    stops at the question (elicitationPending, in English), declined writes nothing, accepted deletes."""
    _require_inspector()
    result = subprocess.run(
        ["bash", "examples/inspector-session.sh"],
        capture_output=True,
        text=True,
        timeout=patience(240),
        cwd=ROOT,
        env=_environment(tmp_path, MNOTE_DB=str(tmp_path / "session.db")),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    assert re.search(r'"values": \[\s*"doc_1"\s*\]', out) and re.search(r'"values": \[\s*"ws_1"\s*\]', out), (
        "completions"
    )
    assert out.count('"elicitationPending"') == 1, "the script prints the first question"
    assert "Confirm this write to “Project plan” (mnote.block.delete)?\\nDeletes 2 block(s)." in out
    flat = out.replace('\\"', '"')  # the envelope as JSON, whether structured or in its text block
    declined = re.search(r'"confirmation":\s*"declined"', flat)
    assert declined, "declined: the refusal envelope"
    assert re.search(r'"blockIds":\s*\[\s*"list_1",\s*"list_1_1"\s*\]', flat), (
        "accepted: the list and its child"
    )
    writes = [match.start() for match in re.finditer(r'"effect":\s*"write"', flat)]
    assert len(writes) == 1, "written once"
    assert declined.start() < writes[0]


def test_the_http_example_script_runs_as_written(tmp_path: Path) -> None:
    """README's HTTP steps (a token, then the server), then examples/inspector-http.sh against it."""
    _require_inspector()
    tokens = tmp_path / "tokens.json"
    minted = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "mnote-mcp"), "token", "--auth-file", str(tokens), "--actor", "user_1"],
        capture_output=True,
        text=True,
        timeout=patience(60),
        cwd=ROOT,
        env=_environment(tmp_path),
    )
    assert minted.returncode == 0, minted.stderr
    db = tmp_path / "http.db"
    with http_server(db, "--auth-file", str(tokens), "--demo") as server:
        result = subprocess.run(
            ["bash", "examples/inspector-http.sh"],
            capture_output=True,
            text=True,
            timeout=patience(240),
            cwd=ROOT,
            env=_environment(tmp_path, MNOTE_URL=server.url, MNOTE_TOKEN=minted.stdout.strip()),
        )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count('"mnote.page.get"') >= 2, "both endpoints list the tools"
    assert "Project plan" in result.stdout, "the demo workspace the new store was seeded with"
