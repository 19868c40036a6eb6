"""Issue 11 item 8: a store that cannot be opened, and a port that cannot be one, end the program with
one line naming the path (or value) and the cause, and a documented exit status; never a traceback.

A read-only file system is made with a user and mount namespace (`unshare -rm`, a read-only bind mount
of one directory); an unwritable directory needs a user other than root, so as root that case runs as
`nobody` (`setpriv`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.helpers import FIXTURE, ROOT, seeded_store
from tests.support.timing import patience

STORE_UNAVAILABLE = 3  # README, "Exit status"
USAGE = 2


def _userns_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0


def run(
    *args: str, read_only: Path | None = None, as_nobody: bool = False, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`mnote-mcp ARGS`; `runtime cli` gets a request on stdin (it opens its store only to answer one)."""
    command = [sys.executable, "-m", "mnote_mcp", *args]
    if read_only is not None:
        if not _userns_works():
            pytest.skip("user namespaces are not available here: cannot make a read-only file system")
        script = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && shift && exec "$@"'
        command = ["unshare", "-rm", "sh", "-c", script, "sh", str(read_only), *command]
    if as_nobody and os.geteuid() == 0:
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
    env = {key: value for key, value in os.environ.items() if not key.startswith("MNOTE_")}
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**env, "MNOTE_LOG_LEVEL": "warning"},
        input=json.dumps({"version": 1, "op": "list_pages", "actorId": "user_editor"}),
    )


def one_line(result: subprocess.CompletedProcess[str], status: int, *words: str) -> str:
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr[-2000:]
    assert result.returncode == status, (result.returncode, result.stderr)
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def seeded(directory: Path) -> Path:
    """A seeded store (in this process: what is tested is the command that then opens it)."""
    directory.mkdir(parents=True, exist_ok=True)
    return seeded_store(directory / "mnote.db")


COMMANDS = {
    "serve": ("serve",),
    "serve --read-only": ("serve", "--read-only"),
    "audit": ("audit",),
    "seed": ("seed", str(FIXTURE)),
    "runtime serve": ("runtime", "serve", "--port", "0"),
    "runtime cli": ("runtime", "cli"),
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_directory_as_the_store(tmp_path: Path, command: str) -> None:
    result = run(*COMMANDS[command], "--db", str(tmp_path))
    one_line(result, STORE_UNAVAILABLE, str(tmp_path), "is a directory")


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_file_that_is_not_a_store(tmp_path: Path, command: str) -> None:
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"this is not SQLite\n" * 200)
    before = corrupt.read_bytes()
    result = run(*COMMANDS[command], "--db", str(corrupt))
    one_line(result, STORE_UNAVAILABLE, str(corrupt), "not an mnote store")
    assert corrupt.read_bytes() == before, "nothing was written to it"


# `serve --read-only` and `audit` read such a store: tests/e2e/test_read_only_store.py
@pytest.mark.parametrize("command", ["serve", "seed", "runtime serve"])
def test_a_store_on_a_read_only_file_system(tmp_path: Path, command: str) -> None:
    db = seeded(tmp_path / "ro")
    result = run(*COMMANDS[command], "--db", str(db), read_only=db.parent)
    one_line(result, STORE_UNAVAILABLE, str(db), "read-only file system")


def test_a_new_store_in_a_read_only_directory(tmp_path: Path) -> None:
    (tmp_path / "ro").mkdir()
    db = tmp_path / "ro" / "new.db"
    result = run("serve", "--db", str(db), read_only=db.parent)
    one_line(result, STORE_UNAVAILABLE, str(db), "read-only file system")


@pytest.mark.parametrize("command", ["serve", "seed", "runtime serve"])
def test_a_new_store_in_an_unwritable_directory(command: str) -> None:
    base = Path(tempfile.mkdtemp(prefix="mnote-locked-"))  # reachable by `nobody`, unlike pytest's tmp
    base.chmod(0o755)
    locked = base / "locked"
    locked.mkdir(mode=0o555)
    db = locked / "new.db"
    try:
        result = run(*COMMANDS[command], "--db", str(db), as_nobody=True)
    finally:
        shutil.rmtree(base)
    one_line(result, STORE_UNAVAILABLE, str(db), "permission denied")


def test_a_port_out_of_range_is_a_usage_error() -> None:
    result = run("serve", "--transport", "http", "--port", "99999")
    one_line(result, USAGE, "--port", "99999", "not a TCP port")
    runtime = run("runtime", "serve", "--port", "70000")
    one_line(runtime, USAGE, "--port", "70000")


@pytest.mark.parametrize(
    "command", [["serve"], ["migrate"], ["audit"], ["seed", str(FIXTURE)], ["runtime", "serve"]]
)
def test_a_postgresql_url_without_the_postgres_extra_is_one_line_naming_it(
    tmp_path: Path, command: list[str]
) -> None:
    """Issue 23: without psycopg (a stand-in package that fails to import, as a missing one does) a
    `postgresql://` URL was a 25-47 line traceback and exit 1."""
    (tmp_path / "psycopg").mkdir()
    (tmp_path / "psycopg" / "__init__.py").write_text(
        'raise ModuleNotFoundError("No module named \'psycopg\'", name="psycopg")\n'
    )
    url = "postgresql://mnote:s3cret@db.internal:5432/mnote"
    result = subprocess.run(
        [sys.executable, "-m", "mnote_mcp", *command, "--db", url],
        capture_output=True,
        text=True,
        timeout=patience(60),
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == STORE_UNAVAILABLE, result.stderr
    assert result.stderr == (
        "mnote-mcp: cannot open the store postgresql://db.internal:5432/mnote: PostgreSQL support is not"
        " installed: pip install -e '.[postgres]' in the mnote_mcp checkout\n"
    )
