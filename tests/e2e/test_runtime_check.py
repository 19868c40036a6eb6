"""`mnote-mcp runtime check` as a runtime's authors run it, every part a real process: the kit writes
its seed, the runtime's own tool loads it (`runtime serve --seed` through `MNOTE_SEED`, `mnote-mcp
seed` for `runtime cli`), the check runs and reports (text, JSON, JUnit) with its exit status.

Green against the reference runtime: `runtime serve` on SQLite and on PostgreSQL (its case marked
`postgres`) and `runtime cli` (a process per request: marked `slow`). The page limits reach the runtime
and the kit through the same variables (`MNOTE_MAX_PAGE_BLOCKS`, `MNOTE_MAX_PAGE_BYTES`), small so a
run writes its pages at the limit at once. A kit told another limit than the runtime's fails exactly
that check, exit status 1, in every form. The command loads neither the MCP SDK nor pydantic.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from mnote_mcp.kernel import protocol
from tests.support.helpers import ROOT
from tests.support.postgres import STORES
from tests.support.runtimes import mnote_command, reference_runtime

pytestmark = pytest.mark.e2e
TIMEOUT = 900
LIMITS = {"MNOTE_MAX_PAGE_BLOCKS": "60", "MNOTE_MAX_PAGE_BYTES": "6000"}


def _env(**extra: str) -> dict[str, str]:
    environment = {**os.environ, "PYTHONUNBUFFERED": "1", **LIMITS, **extra}
    environment.pop("MNOTE_RUNTIME_TOKEN", None)
    environment.update(extra)
    return environment


def write_seed(directory: Path, tag: str) -> Path:
    seed = directory / f"seed-{tag}.json"
    done = subprocess.run(
        mnote_command("runtime", "check", "--write-seed", str(seed), "--tag", tag),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=_env(),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and f"runtime check RUNTIME --tag {tag}" in done.stderr
    assert {ws["id"] for ws in json.loads(seed.read_text())["workspaces"]} == {
        f"kit_{tag}",
        f"kit_{tag}_other",
    }
    return seed


def check(
    target: str, workdir: Path, *args: str, token: str | None = None
) -> tuple[int, dict[str, Any], ElementTree.Element]:
    junit = workdir / "junit.xml"
    done = subprocess.run(
        mnote_command("runtime", "check", target, "--format", "json", "--junit", str(junit), *args),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=ROOT,
        env=_env(**({"MNOTE_RUNTIME_TOKEN": token} if token else {})),
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout), ElementTree.parse(junit).getroot()


def statuses(document: dict[str, Any]) -> dict[str, str]:
    return {entry["name"]: entry["status"] for entry in document["checks"]}


@pytest.mark.parametrize("store", STORES)
def test_runtime_serve_passes_every_check(tmp_path: Path, store: str, request: pytest.FixtureRequest) -> None:
    seed = write_seed(tmp_path, store)
    db: Path | str = tmp_path / "runtime.db"
    if store == "postgres":
        db = request.getfixturevalue("pg_server").database("kit")
    with reference_runtime(db, tmp_path, env={"MNOTE_SEED": str(seed), **LIMITS}) as runtime:
        status, document, junit = check(runtime.url, tmp_path, "--tag", store, token=runtime.token)
    found = statuses(document)
    assert status == 0 and document["passed"], json.dumps(document, indent=1)[:6000]
    assert set(found.values()) == {"pass"}, "with the service token, every check applies over HTTP"
    for op in protocol.OPERATIONS:
        assert found[f"schema.{op}"] == found[f"differential.{op}"] == "pass"
    (suite,) = junit.findall("testsuite")
    assert (suite.get("failures"), suite.get("tests")) == ("0", str(len(found)))


@pytest.mark.slow
def test_runtime_cli_passes_every_check(tmp_path: Path) -> None:
    seed = write_seed(tmp_path, "cli")
    db = tmp_path / "cli.db"
    loaded = subprocess.run(
        mnote_command("seed", "--db", str(db), str(seed)),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=_env(),
    )
    assert loaded.returncode == 0, loaded.stderr
    target = "cli:" + shlex.join(mnote_command("runtime", "cli", "--db", str(db), "--no-demo"))
    status, document, _ = check(target, tmp_path, "--tag", "cli")
    found = statuses(document)
    assert status == 0 and document["passed"], json.dumps(document, indent=1)[:6000]
    assert {name for name, value in found.items() if value != "pass"} == {
        "handshake.service_token",
        "envelope.idempotency_header",
    }, "the HTTP-only checks"
    assert document["transport"] == "cli"


def test_a_failed_check_exits_1_and_shows_what_was_asked_expected_and_answered(tmp_path: Path) -> None:
    seed = write_seed(tmp_path, "fails")
    with reference_runtime(
        tmp_path / "runtime.db", tmp_path, env={"MNOTE_SEED": str(seed), **LIMITS}
    ) as runtime:
        status, document, junit = check(
            runtime.url,
            tmp_path,
            "--tag",
            "fails",
            "--max-page-blocks",
            "50",
            "--max-shown-chars",
            "200",
            token=runtime.token,
        )
        text = subprocess.run(
            mnote_command("runtime", "check", runtime.url, "--tag", "fails", "--skip", "schema.*,coverage.*"),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            cwd=ROOT,
            env=_env(MNOTE_RUNTIME_TOKEN=runtime.token or ""),
        )
    assert status == 1 and not document["passed"]
    failed = [entry for entry in document["checks"] if entry["status"] == "fail"]
    assert [entry["name"] for entry in failed] == ["limits.page_blocks"], (
        "the runtime holds 60, the kit was told 50"
    )
    failure = failed[0]["failure"]
    assert failure["request"] and failure["actual"]
    assert all(len(value) <= 200 + len("… (999999 more characters)") for value in failure.values())
    (suite,) = junit.findall("testsuite")
    assert suite.get("failures") == "1"
    (case,) = [case for case in suite.iter("testcase") if case.find("failure") is not None]
    assert case.get("name") == "limits.page_blocks"
    # the same runtime again: its seed is used, so the gate stops the run (text form, one line per check)
    assert text.returncode == 1
    lines = text.stdout.splitlines()
    assert lines[3].startswith("FAIL seed.loaded: ") and "a seed serves one run" in lines[3]
    assert sum(line.startswith(("PASS ", "FAIL ", "SKIP ")) for line in lines) == len(document["checks"])
    assert "SKIP schema.execute: --skip" in lines


def test_runtime_check_loads_neither_the_mcp_sdk_nor_pydantic() -> None:
    code = (
        "import sys, mnote_mcp.cli, mnote_mcp.conformance.kit;"
        "print([name for name in ('mcp', 'pydantic') if name in sys.modules])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_seed_goes_to_stdout_and_a_missing_runtime_is_a_usage_error() -> None:
    seed = subprocess.run(
        mnote_command("runtime", "check", "--write-seed", "-", "--tag", "x1"),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=_env(),
    )
    assert seed.returncode == 0 and json.loads(seed.stdout)["workspaces"][0]["id"] == "kit_x1"
    for args, words in (
        ([], "name the runtime"),
        (["--tag", "bad tag"], "not a kit tag"),
        (["http://127.0.0.1:1", "--write-seed", "-"], "--write-seed writes the seed and exits"),
        (["ftp://somewhere"], "http://HOST:PORT"),
    ):
        refused = subprocess.run(
            mnote_command("runtime", "check", *args),
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            env=_env(),
        )
        assert refused.returncode == 2 and words in refused.stderr, (args, refused.stderr)
