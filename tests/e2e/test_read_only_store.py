"""`serve --read-only` serves a store it can only read: a snapshot on a read-only mount, a backup whose
file and directory nobody may write, a live store another process writes.

The store is opened with SQLite's `mode=ro` (never created, never migrated, its journal mode never set);
a WAL store whose `-shm` cannot be created beside it is opened `immutable=1`, but only where nobody can
write it (a read-only file system, or no write bit on the file nor its directory) and no write-ahead
log holds changes (SQLite's immutable open ignores the log). Anything else is one line naming the cause.

Tests run as root, where `chmod` does not stop a write: a read-only file system is a read-only bind
mount in a user and mount namespace (`unshare -rm`, as in test_operator_errors.py), an unwritable
directory is seen as `nobody` (`setpriv`), and in process the store is checked to be opened read-only
by SQLite itself (a write through it fails whoever runs it).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from mnote_mcp.kernel.errors import StoreUnavailableError
from mnote_mcp.kernel.port import Correlation, PageQuery
from mnote_mcp.kernel.search import index_tokens
from mnote_mcp.kernel.sqlite.opening import open_store
from mnote_mcp.kernel.sqlite.schema import SCHEMA_VERSION
from tests.support.helpers import FIXTURE, ROOT, call, page_args, seeded_store, stdio_params, write_args
from tests.support.runtimes import note_command
from tests.support.timing import patience
from tests.unit.kernel.sqlite.test_migrate import v1_store

pytestmark = pytest.mark.anyio
TIMEOUT = patience(60)
SEARCH_IDS: dict[str, Any] = {"sessionId": "s", "runId": "r", "toolCallId": "c", "traceId": "t"}
STORE_UNAVAILABLE = 3
USAGE = 2
_RO_MOUNT = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && shift && exec "$@"'


def _userns_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0


def wrapped(argv: list[str], *, read_only: Path | None = None, as_nobody: bool = False) -> list[str]:
    """`argv` run on a read-only bind mount of `read_only`, and/or as `nobody` when we are root."""
    if read_only is not None:
        if not _userns_works():
            pytest.skip("user namespaces are not available here: cannot make a read-only file system")
        argv = ["unshare", "-rm", "sh", "-c", _RO_MOUNT, "sh", str(read_only), *argv]
    if as_nobody and os.geteuid() == 0:
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
    return argv


def fingerprint(directory: Path) -> dict[str, str]:
    """Every file in the store's directory and a hash of its bytes: what "nothing was written" means."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A temporary folder `nobody` can reach (pytest's own is private to root)."""
    base = Path(tempfile.mkdtemp(prefix="mnote-ro-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        for path in (base, *base.rglob("*")):
            if path.is_dir():
                path.chmod(0o755)
        shutil.rmtree(base)


def audited_store(path: Path) -> Path:
    """A seeded store with one real write (an AI note, key `k_audited`) in its audit trail, closed."""
    seeded_store(path)
    store = open_store(path)
    try:
        store.execute(note_command("k_audited"))
    finally:
        store.close()
    return path


def sealed_store(base: Path, *, audited: bool = False) -> Path:
    """A seeded store, closed (no -wal, no -shm), with no write bit on the file nor its directory."""
    directory = base / "snapshot"
    directory.mkdir()
    db = (audited_store if audited else seeded_store)(directory / "mnote.db")
    assert sorted(p.name for p in directory.iterdir()) == ["mnote.db"]
    db.chmod(0o444)
    directory.chmod(0o555)
    return db


async def read_and_refuse_a_write(params: StdioServerParameters) -> None:
    """Over stdio with the SDK client: a page, its history and a search are served; a write is refused
    with the read-only envelope."""
    async with Client(params, read_timeout_seconds=TIMEOUT) as client:
        page = await call(client, "mnote.page.get", **page_args())
        assert page["ok"], page
        assert page["result"]["title"] and page["result"]["revision"] >= 1
        history = await call(client, "mnote.page.history", **page_args())
        assert history["ok"], history
        found = await call(client, "mnote.page.search", **SEARCH_IDS, query="plan")
        assert found["ok"], found
        assert "doc_1" in {hit["documentId"] for hit in found["result"]["hits"]}
        save = await call(
            client,
            "mnote.page.save",
            **write_args("ro", content=[{"type": "paragraph", "text": "x"}], mode="append"),
        )
        assert not save["ok"]
        assert save["error"]["code"] == "mnote_tool_permission_denied"
        assert "read-only" in save["error"]["message"]


def serve_params(
    db: Path, *, read_only: Path | None = None, as_nobody: bool = False
) -> StdioServerParameters:
    base = stdio_params(db, "--read-only", "--actor", "user_editor", env={"MNOTE_LOG_LEVEL": "warning"})
    argv = wrapped([base.command, *base.args], read_only=read_only, as_nobody=as_nobody)
    return base.model_copy(update={"command": argv[0], "args": argv[1:]})


async def test_serve_read_only_reads_a_store_on_a_read_only_file_system(tmp_path: Path) -> None:
    directory = tmp_path / "mount"
    directory.mkdir()
    db = seeded_store(directory / "mnote.db")
    before = fingerprint(directory)
    await read_and_refuse_a_write(serve_params(db, read_only=directory))
    assert fingerprint(directory) == before


async def test_serve_read_only_reads_a_store_nobody_may_write(shared_tmp: Path) -> None:
    db = sealed_store(shared_tmp)
    before = fingerprint(db.parent)
    await read_and_refuse_a_write(serve_params(db, as_nobody=True))
    assert fingerprint(db.parent) == before, "no -wal or -shm was left beside the snapshot"


async def test_serve_read_only_reads_a_store_it_may_not_write_as_root_too(shared_tmp: Path) -> None:
    """As root `chmod a-w` stops nothing; the server still only reads (the file's bytes are unchanged)."""
    db = sealed_store(shared_tmp)
    before = fingerprint(db.parent)["mnote.db"]
    await read_and_refuse_a_write(serve_params(db))
    assert fingerprint(db.parent)["mnote.db"] == before


def test_the_store_is_opened_read_only_by_sqlite(tmp_path: Path) -> None:
    """Whoever runs it (root included), a write through the read-only store fails in SQLite itself
    (at a path that a URI must escape)."""
    db = seeded_store(tmp_path / "a b?c#d%20e.db")
    store = open_store(db, read_only=True)
    try:
        with pytest.raises(sqlite3.OperationalError, match="readonly"), store.transaction(write=True) as conn:
            conn.execute("UPDATE pages SET title = 'changed'")
    finally:
        store.close()


def test_a_read_only_store_on_a_writable_directory_sees_another_process_writes(db: Path) -> None:
    """Not immutable where the store can be written: a write made elsewhere is seen by the next read."""
    query = PageQuery("ws_1", "doc_1", "user_editor", Correlation("s", "r", "c", "t"))
    reader = open_store(db, read_only=True)
    try:
        before = reader.get_page(query)["revision"]
        writer = sqlite3.connect(db)
        writer.create_function("mnote_search_tokens", 1, index_tokens)  # the search index's triggers
        with writer:
            writer.execute("UPDATE pages SET title = 'seen', revision = revision + 1 WHERE id = 'doc_1'")
        writer.close()
        after = reader.get_page(query)
        assert (after["title"], after["revision"]) == ("seen", before + 1)
    finally:
        reader.close()


def run(
    *args: str, read_only: Path | None = None, as_nobody: bool = False
) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("MNOTE_")}
    return subprocess.run(
        wrapped([sys.executable, "-m", "mnote_mcp", *args], read_only=read_only, as_nobody=as_nobody),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=ROOT,
        env={**env, "MNOTE_LOG_LEVEL": "warning"},
        stdin=subprocess.DEVNULL,
    )


def one_line(result: subprocess.CompletedProcess[str], status: int, *words: str) -> str:
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr[-2000:]
    assert result.returncode == status, (result.returncode, result.stderr)
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def test_an_older_schema_is_not_migrated_read_only(tmp_path: Path) -> None:
    db = v1_store(tmp_path / "old.db")
    before = fingerprint(tmp_path)["old.db"]
    result = run("serve", "--read-only", "--db", str(db))
    one_line(result, STORE_UNAVAILABLE, str(db), "schema version 1", str(SCHEMA_VERSION), "mnote-mcp migrate")
    assert fingerprint(tmp_path)["old.db"] == before, "not migrated"
    with pytest.raises(StoreUnavailableError, match="schema version 1"):
        open_store(db, read_only=True)


def test_an_older_schema_on_a_read_only_file_system(tmp_path: Path) -> None:
    directory = tmp_path / "mount"
    directory.mkdir()
    db = v1_store(directory / "old.db")
    result = run("serve", "--read-only", "--db", str(db), read_only=directory)
    one_line(result, STORE_UNAVAILABLE, str(db), "schema version 1", "writable copy")


def test_a_missing_store_is_not_created_read_only(tmp_path: Path) -> None:
    db = tmp_path / "missing.db"
    result = run("serve", "--read-only", "--db", str(db))
    one_line(result, STORE_UNAVAILABLE, str(db), "no store", "--read-only")
    assert list(tmp_path.iterdir()) == []


def test_seed_with_read_only_is_a_usage_error(db: Path) -> None:
    result = run("serve", "--read-only", "--db", str(db), "--seed", str(FIXTURE))
    one_line(result, USAGE, "--seed", "--read-only")


def test_a_write_ahead_log_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    """A copy of a live store's file and log without its -shm, on a read-only mount: SQLite cannot
    read the log, and an immutable open would silently drop the changes in it, so: one line."""
    source = seeded_store(tmp_path / "live.db")
    directory = tmp_path / "mount"
    directory.mkdir()
    conn = sqlite3.connect(source)
    conn.create_function("mnote_search_tokens", 1, index_tokens)
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("UPDATE pages SET title = 'in the log only' WHERE id = 'doc_1'")
    conn.commit()
    shutil.copy(source, directory / "mnote.db")
    shutil.copy(f"{source}-wal", directory / "mnote.db-wal")
    conn.close()
    db = directory / "mnote.db"
    result = run("serve", "--read-only", "--db", str(db), read_only=directory)
    one_line(result, STORE_UNAVAILABLE, str(db), "mnote.db-wal")


def test_an_unwritable_directory_others_may_write_is_not_opened_immutable(shared_tmp: Path) -> None:
    """As `nobody`, a store in root's 0755 directory: SQLite cannot create the -shm, and its owner may
    still write the store, so an immutable open could serve torn reads: one line saying what to do."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the directory's owner must be another user than the server's")
    directory = shared_tmp / "owned"
    directory.mkdir()
    db = seeded_store(directory / "mnote.db")
    db.chmod(0o644)
    result = run("serve", "--read-only", "--db", str(db), as_nobody=True)
    one_line(result, STORE_UNAVAILABLE, str(db), "-shm")


def test_a_store_this_user_may_not_read(shared_tmp: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: the store's owner must be another user than the server's")
    db = sealed_store(shared_tmp)
    db.chmod(0o400)
    result = run("serve", "--read-only", "--db", str(db), as_nobody=True)
    one_line(result, STORE_UNAVAILABLE, str(db), "may not read")


# -- `audit` reads a store it can only read, and never creates, migrates or changes one ----------------


def audit_keys(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0 and "Traceback" not in result.stderr, (result.returncode, result.stderr)
    return [json.loads(line)["idempotencyKey"] for line in result.stdout.splitlines()]


def test_audit_reads_a_store_on_a_read_only_file_system(tmp_path: Path) -> None:
    directory = tmp_path / "mount"
    directory.mkdir()
    db = audited_store(directory / "mnote.db")
    before = fingerprint(directory)
    assert "k_audited" in audit_keys(run("audit", "--db", str(db), read_only=directory))
    assert fingerprint(directory) == before


def test_audit_reads_a_store_nobody_may_write(shared_tmp: Path) -> None:
    """A backup with no write bit on the file nor its directory, read as `nobody`: the operator reading
    the trail needs no write access, and no -wal or -shm is left beside it."""
    db = sealed_store(shared_tmp, audited=True)
    before = fingerprint(db.parent)
    assert "k_audited" in audit_keys(run("audit", "--db", str(db), as_nobody=True))
    assert fingerprint(db.parent) == before


def test_audit_leaves_a_writable_store_as_it_was(tmp_path: Path) -> None:
    """As root (or the owner), too: the file's bytes are unchanged."""
    db = audited_store(tmp_path / "mnote.db")
    before = fingerprint(tmp_path)["mnote.db"]
    assert "k_audited" in audit_keys(run("audit", "--db", str(db), "--trace", "t"))
    assert fingerprint(tmp_path)["mnote.db"] == before


def test_audit_creates_no_store(tmp_path: Path) -> None:
    db = tmp_path / "missing.db"
    one_line(run("audit", "--db", str(db)), STORE_UNAVAILABLE, str(db), "no store", "audit")
    assert list(tmp_path.iterdir()) == []


def test_audit_does_not_migrate_an_older_schema(tmp_path: Path) -> None:
    db = v1_store(tmp_path / "old.db")
    before = fingerprint(tmp_path)["old.db"]
    result = run("audit", "--db", str(db))
    one_line(result, STORE_UNAVAILABLE, str(db), "schema version 1", "mnote-mcp migrate")
    assert fingerprint(tmp_path)["old.db"] == before, "not migrated"
