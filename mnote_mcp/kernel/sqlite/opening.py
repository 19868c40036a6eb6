"""Opening the store file, and saying in one sentence why it cannot be opened.

`open_store(path)` is the store on that file (created or upgraded, or with `read_only` only read),
`open_kernel(path)` the kernel port over it.

SQLite reports most failures as "unable to open database file"; an operator needs to know which of the
usual causes it is (a directory given as the file, a read-only file system, a directory they may not
write, a file that is not a store), so the cause is worked out here from the file system.

`read_only=True` (`serve --read-only`, `audit`) opens an existing store through SQLite's URI `mode=ro`: nothing
is created, migrated, or set (not even the journal mode), so a store that can only be read (a
snapshot on a read-only mount, a backup nobody may write) is served. Reading a WAL store needs its
`-shm` file, which SQLite creates beside it; where it cannot, the store is opened `immutable=1` (no
`-shm`, no locks), but only when nobody can write it either (a read-only file system, or no write bit
on the file nor its directory) and no write-ahead log holds changes (an immutable open ignores the
log). Changes made to an immutable store while it is served are not seen, and could be read torn.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from mnote_mcp.kernel.errors import StoreUnavailableError
from mnote_mcp.kernel.limits import PageLimits
from mnote_mcp.kernel.sqlite.connection import Database
from mnote_mcp.kernel.sqlite.dialect import SqliteDialect
from mnote_mcp.kernel.sqlite.pool import POOL_SIZE
from mnote_mcp.kernel.store.changes import WriteHook
from mnote_mcp.kernel.store.dialect import DEFAULT_BUSY_TIMEOUT, SchemaNotCurrentError
from mnote_mcp.kernel.store.kernel import StoreKernel
from mnote_mcp.kernel.store.store import Store

logger = logging.getLogger(__name__)


def open_store(
    path: str | Path,
    *,
    read_only: bool = False,
    limits: PageLimits | None = None,
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    hooks: Iterable[WriteHook] = (),
    pool_size: int = POOL_SIZE,
) -> Store:
    """The store at `path`, created if missing (unless `read_only`: see the module's text); raises
    `StoreUnavailableError` naming the cause."""
    path = Path(path)
    if path.is_dir():
        raise StoreUnavailableError(path, "it is a directory, not a store file")
    try:
        uri = read_only_uri(path) if read_only else None
        dialect = SqliteDialect(Database(path, busy_timeout=busy_timeout, uri=uri, pool_size=pool_size))
        return Store(dialect, limits=limits, hooks=hooks)
    except SchemaNotCurrentError as exc:
        raise StoreUnavailableError(path, str(exc)) from None
    except (sqlite3.Error, OSError) as exc:
        raise StoreUnavailableError(path, cause(path, exc)) from None


def open_kernel(
    path: str | Path,
    *,
    read_only: bool = False,
    limits: PageLimits | None = None,
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    one_call: bool = False,
) -> StoreKernel:
    """The kernel port on the store at `path` (see `open_store`); `one_call`: its calls run at once,
    with no event loop (`kernel.store.kernel`)."""
    store = open_store(path, read_only=read_only, limits=limits, busy_timeout=busy_timeout)
    return StoreKernel(store, one_call=one_call)


def read_only_uri(path: Path) -> str:
    """The SQLite URI that reads the store at `path` without writing it: `mode=ro`, with `immutable=1`
    where SQLite cannot create the `-shm` and nobody can write the store; raises `StoreUnavailableError`
    when neither can be used."""
    try:
        path.stat()
    except FileNotFoundError:
        raise StoreUnavailableError(
            path, "no store there, and a read-only open (serve --read-only, audit) creates none"
        ) from None
    except OSError as exc:
        raise StoreUnavailableError(
            path, f"permission denied (this user may not read it: {exc.strerror})"
        ) from None
    if not os.access(path, os.R_OK):
        raise StoreUnavailableError(path, "permission denied (this user may not read it)")
    uri = f"{path.resolve().as_uri()}?mode=ro"
    failure = _probe(uri)
    if failure is None:
        return uri
    if not isinstance(failure, sqlite3.OperationalError):  # not a database, malformed, ...
        raise failure
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise StoreUnavailableError(
            path,
            f"its write-ahead log {wal} holds changes that SQLite reads only with {path}-shm, which"
            " cannot be created here: copy the store with its -wal and -shm files, or open it once"
            " where it can be written",
        )
    if not _nobody_writes(path):
        raise StoreUnavailableError(
            path,
            f"SQLite must create {path}-shm to read it, and this user may not write {path.parent} while"
            " others may (so it is not read as an immutable snapshot): make the directory writable for"
            " this user, or if nobody writes the store, remove every write bit from it and its"
            f" directory (chmod a-w) ({failure})",
        )
    immutable = f"{uri}&immutable=1"
    if _probe(immutable) is not None:
        raise failure
    logger.info("store %s opened immutable: nobody can write it, and changes to it are not seen", path)
    return immutable


def _probe(uri: str) -> sqlite3.Error | None:
    """What reading the schema through `uri` raises, if anything."""
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        return exc
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return None
    except sqlite3.Error as exc:
        return exc
    finally:
        conn.close()


def _nobody_writes(path: Path) -> bool:
    """A read-only file system, or no write bit on the file nor on its directory."""
    if _read_only_file_system(path):
        return True
    return not (path.stat().st_mode | path.parent.stat().st_mode) & 0o222


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
