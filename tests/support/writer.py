"""A writer that commits block inserts to a store (SQLite or PostgreSQL) on a thread until stopped (backups taken
while a store is written: tests/unit/kernel/databases/test_backup.py, the contract suite's `restored` adapter)."""

from __future__ import annotations

import threading
from pathlib import Path

from mnote_mcp.kernel.databases.stores import open_store
from mnote_mcp.kernel.port import Command, CommandName, Correlation
from tests.support.helpers import run_cli

CORRELATION = Correlation("sess_backup", "run_backup", "call_backup", "trace_backup")


def insert(n: int) -> Command:
    return Command(
        name=CommandName.PAGE_BLOCK_INSERT,
        workspace_id="ws_1",
        document_id="doc_1",
        actor_id="user_editor",
        correlation=CORRELATION,
        idempotency_key=f"k_backup_{n}",
        dry_run=False,
        payload={"blocks": [{"type": "paragraph", "text": f"backup {n}"}], "position": "end"},
    )


class Writer(threading.Thread):
    """Commits one block insert after another (`k_backup_N`, text `backup N`, trace `trace_backup`) to
    ws_1/doc_1 as user_editor until stopped; counts what was acknowledged."""

    def __init__(self, db: Path | str) -> None:
        super().__init__(daemon=True)
        self.db = db
        self.acknowledged = 0
        self.stop = threading.Event()

    def run(self) -> None:
        store = open_store(self.db)
        try:
            while not self.stop.is_set():
                store.execute(insert(self.acknowledged))
                self.acknowledged += 1
        finally:
            store.close()


def consistent_writes(db: Path | str) -> int:
    """The writer's commits in a copy of a store (SQLite or PostgreSQL), after checking each is whole:
    its block, ledger entry, history row and audit record all there, or none of them."""
    store = open_store(db, read_only=True)
    try:
        with store.transaction(write=False) as conn:
            blocks = {text for (text,) in conn.execute("SELECT text FROM blocks WHERE text LIKE 'backup %'")}
            ledger = {
                key
                for (key,) in conn.execute(
                    "SELECT idem_key FROM idempotency WHERE idem_key LIKE 'k_backup_%'"
                )
            }
            (history,) = conn.execute(
                "SELECT count(*) FROM page_history WHERE page_id = 'doc_1' AND command_id IN"
                " (SELECT command_id FROM idempotency WHERE idem_key LIKE 'k_backup_%')"
            ).fetchone()
    finally:
        store.close()
    audit = run_cli("audit", "--db", str(db), "--trace", "trace_backup", "--limit", "100000")
    assert audit.returncode in (0, 1), audit.stderr
    records = audit.stdout.splitlines()
    written = len(blocks)
    assert ledger == {f"k_backup_{n}" for n in range(written)}, "the ledger has exactly the copy's writes"
    assert blocks == {f"backup {n}" for n in range(written)}, "the first N writes, none missing"
    assert history == written and len(records) == written, (history, len(records), written)
    return written
