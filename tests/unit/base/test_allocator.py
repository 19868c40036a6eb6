"""`base/allocator.py` (`--malloc-arenas`, issue 30): the server limits glibc's malloc arenas at start, says
so on its start-up line, and leaves the environment's `MALLOC_ARENA_MAX` in charge when it is set.
(What it is for, resident memory flat over a soak, is measured by `python -m bench.soak`.)"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.helpers import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc only")]


def _banner(tmp_path: Path, *flags: str, env: dict[str, str] | None = None) -> str:
    argv = [sys.executable, "-m", "mnote_mcp", "serve", "--db", str(tmp_path / "m.db"), *flags]
    environment = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | (env or {})
    with subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=environment
    ) as proc:
        assert proc.stderr is not None
        line = b""
        while b" arenas=" not in line:
            line = proc.stderr.readline()
            assert line, "the server stopped before its start-up line"
        proc.terminate()
        proc.communicate(timeout=60)
    return line.decode().rstrip()


@pytest.mark.parametrize(
    ("flags", "env", "said"),
    [
        ((), None, "arenas=2"),
        (("--malloc-arenas", "4"), None, "arenas=4"),
        (("--malloc-arenas", "0"), None, "arenas=default"),
        ((), {"MALLOC_ARENA_MAX": "3"}, "arenas=MALLOC_ARENA_MAX=3"),
    ],
)
def test_the_start_up_line_says_what_was_set(
    tmp_path: Path, flags: tuple[str, ...], env: dict[str, str] | None, said: str
) -> None:
    assert _banner(tmp_path, *flags, env=env).endswith(said)


def test_limit_arenas_asks_glibc() -> None:
    code = "from mnote_mcp.base.allocator import limit_arenas; print(limit_arenas(2))"
    environment = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environment, cwd=ROOT
    )
    assert done.stdout.strip() == "2", done.stderr
