"""`mnote-mcp backup --db PATH DEST`: a consistent copy of a SQLite store, taken while it is served.

SQLite's online backup API (`sqlite3.Connection.backup`) copies the store in one step inside one read
transaction: the copy is the store as of one commit, whatever writers do meanwhile (in WAL mode they
are not even held up; a writer only waits if the store is in rollback-journal mode). The source is
opened read-only (never created, migrated or changed); the copy is written beside DEST, checked
(`PRAGMA integrity_check`, its schema version read back) and only then renamed to DEST. It holds every
page and the audit trail, so it is mode 0600 from the moment it exists: the `.partial` file is created
private (whatever the umask) before SQLite writes into it, and SQLite gives its journal the same mode.
An existing DEST is never overwritten.

A PostgreSQL store is backed up by PostgreSQL's own tools (`pg_dump -Fc`, docs/deploy.md).
"""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mnote_mcp.base.secretfiles import create_private
from mnote_mcp.kernel.errors import StoreUnavailableError
from mnote_mcp.kernel.sqlite.opening import read_only_uri


@dataclass(frozen=True)
class BackupReport:
    store: Path
    backup: Path
    size: int
    schema_version: int
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "store": str(self.store),
            "backup": str(self.backup),
            "bytes": self.size,
            "schemaVersion": self.schema_version,
            "integrity": "ok",
            "seconds": round(self.seconds, 3),
        }


def backup_sqlite(source: Path, dest: Path, *, busy_timeout: float = 30.0) -> BackupReport:
    """Copy the store at `source` to `dest` (see the module's text). Raises `StoreUnavailableError`
    when the store cannot be read or the copy fails its check, `ValueError` for a DEST that cannot be
    used."""
    if dest.exists():
        raise ValueError(f"{dest} exists: a backup never overwrites a file (remove it or name another)")
    if not dest.parent.is_dir():
        raise ValueError(f"{dest.parent} is not a directory")
    started = time.monotonic()
    partial = dest.with_name(f".{dest.name}.partial")
    partial.unlink(missing_ok=True)  # a copy an earlier run left behind
    try:
        create_private(partial)
        version = _copy(source, partial, busy_timeout)
        with partial.open("rb") as written:
            os.fsync(written.fileno())
        os.replace(partial, dest)
    finally:
        partial.unlink(missing_ok=True)
    return BackupReport(source, dest, dest.stat().st_size, version, time.monotonic() - started)


def _copy(source: Path, partial: Path, busy_timeout: float) -> int:
    """The backup step and its check; the copy's schema version."""
    origin = sqlite3.connect(read_only_uri(source), uri=True, timeout=busy_timeout)
    try:
        copy = sqlite3.connect(partial)
        try:
            origin.backup(copy)  # every page in one step: one read transaction, one commit's state
            (verdict,) = copy.execute("PRAGMA integrity_check").fetchone()
            if verdict != "ok":
                raise StoreUnavailableError(source, f"the copy fails SQLite's integrity check: {verdict}")
            found = copy.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
            ).fetchone()
            if found is None:
                raise StoreUnavailableError(source, "not an mnote store (no schema_migrations table)")
            (version,) = copy.execute("SELECT max(version) FROM schema_migrations").fetchone()
        finally:
            copy.close()
    except sqlite3.DatabaseError as exc:
        raise StoreUnavailableError(source, f"cannot back it up: {exc}") from None
    finally:
        origin.close()
    return int(version)
