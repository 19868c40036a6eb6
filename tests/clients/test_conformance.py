"""The MCP conformance suite against the streamable HTTP endpoint (`bash .ci/run` installs it, and
Node 22, under .ci/node). Generic scenarios must pass outright; the full active suite must match the
committed baseline of fixture-dependent scenarios exactly (a newly passing entry fails as stale)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.helpers import ROOT
from tests.support.http_helpers import http_server
from tests.support.timing import patience

pytestmark = pytest.mark.e2e
NODE_MODULES = ROOT / ".ci" / "node" / "node_modules"
SUITE = NODE_MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
# The platform's Node 22 package (.ci/node/node-package), or the system's where there is none (it
# is then Node 22 or later: .ci/run checks).
NODE = NODE_MODULES / ".bin" / "node"
if not NODE.exists() and shutil.which("node"):
    NODE = Path(str(shutil.which("node")))
BASELINE = Path(__file__).parent / "conformance" / "baseline.yml"
GENERIC = [
    "server-initialize",
    "ping",
    "tools-list",
    "dns-rebinding-protection",
    "http-header-validation",
    "server-session-lifecycle",
    "server-sse-multiple-streams",
]


def _suite(url: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    if not (SUITE.exists() and NODE.exists()):
        if os.environ.get("MNOTE_REQUIRE_CONFORMANCE") == "1":
            pytest.fail(f"the conformance suite or Node 22 is missing under {NODE_MODULES}")
        pytest.skip("the MCP conformance suite is not installed (bash .ci/run installs it)")
    return subprocess.run(
        [str(NODE), str(SUITE), "server", "--url", f"{url}/mcp", *args],
        capture_output=True,
        text=True,
        timeout=patience(300),
        cwd=cwd,
        env={**os.environ, "PATH": f"{NODE.parent}{os.pathsep}{os.environ.get('PATH', '')}", "NO_COLOR": "1"},
    )


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # The suite sends no bearer token: this run is the loopback --unsafe-no-auth mode.
    db = tmp_path_factory.mktemp("conformance") / "mnote.db"
    with http_server(db, "--unsafe-no-auth", "--demo") as server:  # a new store: the demo, as before
        yield server.url


@pytest.mark.parametrize("scenario", GENERIC)
def test_generic_scenario_passes(server_url: str, scenario: str, tmp_path: Path) -> None:
    result = _suite(server_url, "--scenario", scenario, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " 0 failed" in result.stdout


def test_active_suite_matches_the_baseline(server_url: str, tmp_path: Path) -> None:
    result = _suite(server_url, "--expected-failures", str(BASELINE), cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
