"""Backups and restores of a PostgreSQL store as docs/deploy.md tells them (issue 23): `pg_dump -Fc`
(pgserver's own, the same major version as the server) while a writer commits, `pg_restore` into an
empty database, and the restored store is whole (every write with its ledger entry, history row and
audit record, or none), current (`mnote-mcp migrate` applies nothing), and takes new writes (its
sequences and the audit trail's guard restored too)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from mnote_mcp.kernel.databases.stores import open_store
from tests.support.helpers import FIXTURE, run_cli
from tests.support.postgres import PgServer, postgres_tool, seeded_database
from tests.support.timing import patience
from tests.support.writer import Writer, consistent_writes, insert


def test_pg_dump_while_writing_restores_a_whole_current_store(pg_server: PgServer, tmp_path: Path) -> None:
    live = seeded_database(pg_server, FIXTURE)
    dump = tmp_path / "mnote.dump"
    writer = Writer(live)
    writer.start()
    try:
        while writer.acknowledged < 20:
            writer.join(timeout=0.05)
        before = writer.acknowledged
        dumped = subprocess.run(
            [postgres_tool("pg_dump"), "-Fc", "--dbname", live, "--file", str(dump)],
            capture_output=True,
            text=True,
            timeout=patience(120),
        )
        after = writer.acknowledged
    finally:
        writer.stop.set()
        writer.join(timeout=patience(60))
    assert dumped.returncode == 0, dumped.stderr
    assert writer.acknowledged > after, "the writer went on committing past the dump"

    restored = pg_server.database("restored")
    loaded = subprocess.run(
        [postgres_tool("pg_restore"), "--no-owner", "--exit-on-error", "--dbname", restored, str(dump)],
        capture_output=True,
        text=True,
        timeout=patience(120),
    )
    assert loaded.returncode == 0, loaded.stderr
    assert before <= consistent_writes(restored) <= after

    migrated = run_cli("migrate", "--db", restored)
    assert migrated.returncode == 0, migrated.stderr
    original = json.loads(run_cli("migrate", "--db", live).stdout)
    assert json.loads(migrated.stdout)["migrations"] == original["migrations"], "nothing to apply"

    store = open_store(restored)
    try:
        outcome = store.execute(insert(100_000))
    finally:
        store.close()
    assert outcome.changed and outcome.revision > 0
    assert outcome.command_id is not None
    audit = run_cli("audit", "--db", restored, "--command-id", outcome.command_id)
    assert audit.returncode == 0 and json.loads(audit.stdout)["commandId"] == outcome.command_id
