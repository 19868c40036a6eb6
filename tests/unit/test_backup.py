"""`mnote-mcp backup` (issue 23): a SQLite store copied while a writer commits to it, three times in a
row, each copy a consistent store (one commit's state: every write in it whole, with its ledger entry,
history row and audit record, and none half), passing `mnote-mcp audit` and SQLite's integrity check,
mode 0600. The kernel contract suite also runs on a restored copy (`tests/unit/kernel/test_port_contract.py`,
adapter `restored`). What the command refuses: an existing destination, a PostgreSQL URL, a missing store.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
