"""Opening the store file, and saying in one sentence why it cannot be opened.

SQLite reports most failures as "unable to open database file"; an operator needs to know which of the
usual causes it is (a directory given as the file, a read-only file system, a directory they may not
write, a file that is not a store), so the cause is worked out here from the file system.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from mnote_mcp.kernel.errors import StoreUnavailableError
from mnote_mcp.kernel.local.store import LocalStore


def open_store(path: str | Path) -> LocalStore:
    """The store at `path`, created if missing; raises `StoreUnavailableError` naming the cause."""
    path = Path(path)
    if path.is_dir():
        raise StoreUnavailableError(path, "it is a directory, not a store file")
    try:
        return LocalStore(path)
    except (sqlite3.Error, OSError) as exc:
        raise StoreUnavailableError(path, cause(path, exc)) from None


def cause(path: Path, exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, sqlite3.DatabaseError) and (
        "not a database" in text or "malformed" in text or "encrypted" in text
    ):
        return f"not an mnote store ({text})"
    existing = _nearest_existing(path)
    if _read_only_file_system(existing) or getattr(exc, "errno", None) == errno.EROFS:
        return "read-only file system"
    writable = path if path.exists() else existing
    if isinstance(exc, PermissionError) or not (
        os.access(writable, os.W_OK) and os.access(path.parent if path.parent.exists() else existing, os.W_OK)
    ):
        return f"permission denied (the file and its directory must be writable: {text})"
    return text


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path("/")


def _read_only_file_system(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False
