"""Where each framework's environment is, and how the tests run code inside it.

`bash .ci/run` creates `.ci/frameworks/<name>` per framework with uv (each pins its own `mcp` SDK, so
none can share the project's environment), installs the TypeScript SDK into `.ci/node` beside the
Inspector (`.ci/node/package.json`), and sets MNOTE_REQUIRE_FRAMEWORKS=1; elsewhere a test whose
environment is absent is skipped, saying why.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import ROOT
from tests.support.timing import patience

ENVS = ROOT / ".ci" / "frameworks"
HERE = Path(__file__).resolve().parent
# name -> what .ci/run installs into .ci/frameworks/<name> (kept in step with .ci/run)
PYTHON_FRAMEWORKS = {
    "openai-agents": "openai-agents==0.24.0",
    "langchain": "langchain-mcp-adapters==0.3.2 langchain-openai",
    "fastmcp": "fastmcp==4.2.3",
    "pydantic-ai": "pydantic-ai-slim[mcp,openai]==2.68.0",
}
NODE_MODULES = ROOT / ".ci" / "node" / "node_modules"
TS_SDK = NODE_MODULES / "@modelcontextprotocol" / "sdk"
NODE = NODE_MODULES / ".bin" / "node"
# what each driver gives its client library to connect and answer (the drivers cannot import tests/)
CLIENT_TIMEOUT = {"MNOTE_TEST_CLIENT_TIMEOUT": str(patience(60))}


def framework_python(name: str) -> Path:
    python = ENVS / name / "bin" / "python"
    _require(python.exists(), f"{PYTHON_FRAMEWORKS[name]} is not installed in {ENVS / name}")
    return python


def require_ts_sdk() -> None:
    _require(
        TS_SDK.exists() and NODE.exists(), f"Node 22 and @modelcontextprotocol/sdk are not in {NODE_MODULES}"
    )


def _require(present: bool, why: str) -> None:
    if present:
        return
    if os.environ.get("MNOTE_REQUIRE_FRAMEWORKS") == "1":
        pytest.fail(f"{why} (bash .ci/run installs it)")
    pytest.skip(f"{why} (bash .ci/run installs it)")


# The framework's byte code goes to the run's cache where there is one (.ci/run's PYTHONPYCACHEPREFIX),
# else nowhere: never into the framework's environment (a worktree's may be another checkout's).
_BYTECODE = {} if os.environ.get("PYTHONPYCACHEPREFIX") else {"PYTHONDONTWRITEBYTECODE": "1"}


def run_in(name: str, script: str, *args: str, stdin: Any = None, timeout: float | None = None) -> Any:
    """Run `tests/clients/frameworks/<script>` with the framework's interpreter; its stdout is one JSON value."""
    completed = subprocess.run(
        [str(framework_python(name)), str(HERE / script), *args],
        input=json.dumps(stdin) if stdin is not None else None,
        capture_output=True,
        text=True,
        timeout=timeout or patience(180),
        cwd=ROOT,
        env={**os.environ, **CLIENT_TIMEOUT, "PYTHONPATH": "", **_BYTECODE},
    )
    assert completed.returncode == 0, f"{name} {script} failed:\n{completed.stderr[-4000:]}"
    return json.loads(completed.stdout)


def run_ts(script: str, *, stdin: Any, timeout: float | None = None) -> Any:
    """Run `tests/clients/frameworks/<script>` under Node 22 with the TypeScript SDK; stdout is one JSON value."""
    require_ts_sdk()
    completed = subprocess.run(
        [str(NODE), str(HERE / script), str(TS_SDK)],
        input=json.dumps(stdin),
        capture_output=True,
        text=True,
        timeout=timeout or patience(180),
        cwd=ROOT,
        env={**os.environ, **CLIENT_TIMEOUT},
    )
    assert completed.returncode == 0, f"{script} failed:\n{completed.stderr[-4000:]}"
    return json.loads(completed.stdout)
