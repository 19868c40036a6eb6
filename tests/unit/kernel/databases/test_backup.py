"""`mnote-mcp backup` (issue 23): a SQLite store copied while a writer commits to it, three times in a
row, each copy a consistent store (one commit's state: every write in it whole, with its ledger entry,
history row and audit record, and none half), passing `mnote-mcp audit` and SQLite's integrity check,
mode 0600 (and private while it is written, whatever the umask: issue 30). The kernel contract suite also runs on a restored copy (`tests/unit/kernel/test_port_contract.py`,
adapter `restored`). What the command refuses: an existing destination, a PostgreSQL URL, a missing store.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from mnote_mcp.kernel.databases import backup
from tests.support.helpers import run_cli, seeded_store
from tests.support.timing import patience
from tests.support.writer import Writer, consistent_writes


@pytest.mark.slow
def test_backups_taken_while_a_writer_commits_are_consistent_stores(tmp_path: Path) -> None:
    db = seeded_store(tmp_path / "live.db")
    writer = Writer(db)
    writer.start()
    copies: list[tuple[int, int, Path]] = []  # (acknowledged before, after, the copy)
    try:
        while writer.acknowledged < 20:
            writer.join(timeout=0.05)
        for n in range(3):
            before = writer.acknowledged
            copy = tmp_path / f"copy-{n}.db"
            done = run_cli("backup", "--db", str(db), str(copy))
            assert done.returncode == 0, done.stderr
            report = json.loads(done.stdout)
            assert (
                report["backup"] == str(copy) and report["integrity"] == "ok" and report["schemaVersion"] >= 4
            )
            copies.append((before, writer.acknowledged, copy))
    finally:
        writer.stop.set()
        writer.join(timeout=patience(60))
    assert writer.acknowledged > copies[-1][1], "the writer was still committing after the last copy"
    for before, after, copy in copies:
        assert copy.stat().st_mode & 0o777 == 0o600
        assert before <= consistent_writes(copy) <= after


@pytest.mark.slow
def test_what_backup_refuses(tmp_path: Path) -> None:
    db = seeded_store(tmp_path / "live.db")
    taken = tmp_path / "taken.db"
    taken.write_text("something else")
    exists = run_cli("backup", "--db", str(db), str(taken))
    assert exists.returncode == 2 and "never overwrites" in exists.stderr
    assert taken.read_text() == "something else"
    postgres = run_cli("backup", "--db", "postgresql://mnote@db.internal/mnote", str(tmp_path / "pg.db"))
    assert postgres.returncode == 2 and "pg_dump -Fc" in postgres.stderr
    missing = run_cli("backup", "--db", str(tmp_path / "nothing.db"), str(tmp_path / "copy.db"))
    assert missing.returncode == 3 and "nothing.db" in missing.stderr
    assert not (tmp_path / "nothing.db").exists() and not (tmp_path / "copy.db").exists()


@pytest.mark.parametrize("umask", [0o022, 0o000], ids=["umask-022", "umask-000"])
def test_the_copy_is_private_while_it_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask: int
) -> None:
    """The `.partial` file holds every page as the copy is written: it is 0600 from the moment it
    exists (issue 30: it was SQLite's default 0644 until the copy was checked, so another local user
    could read it meanwhile), under a permissive umask too. Its mode is looked at when SQLite opens
    it and once every page is copied, before anything renames it."""
    db = seeded_store(tmp_path / "live.db")
    seen: list[int | None] = []
    copy = backup._copy

    def watched(source: Path, partial: Path, busy_timeout: float) -> int:
        seen.append(stat.S_IMODE(partial.stat().st_mode) if partial.exists() else None)
        version = copy(source, partial, busy_timeout)
        seen.append(stat.S_IMODE(partial.stat().st_mode))
        return version

    monkeypatch.setattr(backup, "_copy", watched)
    previous = os.umask(umask)
    try:
        report = backup.backup_sqlite(db, tmp_path / "copy.db")
    finally:
        os.umask(previous)
    assert seen == [0o600, 0o600], [None if mode is None else oct(mode) for mode in seen]
    assert stat.S_IMODE(report.backup.stat().st_mode) == 0o600
    assert not list(tmp_path.glob(".copy.db.partial*"))
