"""Files that hold secrets (tokens files, service tokens): private to their owner, written whole.

A secret file must not be readable by group or others (mode 0600, as for SSH keys). It is created
0600 from the start and replaced atomically (a new file beside it, then `os.replace`), so a reader
never sees half a file; writers that read, change and write it back hold an exclusive lock on a
`.lock` file beside it, so two concurrent writers never lose each other's change.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class SecretFileError(ValueError):
    """A secret file that cannot be used; the message names it and says how to fix it."""


def check_private(path: Path) -> None:
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError as exc:
        raise SecretFileError(f"{path}: {exc}") from exc
    if mode & 0o077:
        raise SecretFileError(f"{path} is readable by others (mode {mode:o}); run: chmod 600 {path}")


def read_secret(path: Path) -> str:
    """The one secret in `path` (surrounding whitespace removed), after checking the file is private."""
    check_private(path)
    try:
        secret = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise SecretFileError(f"{path}: {exc}") from exc
    if not secret:
        raise SecretFileError(f"{path} is empty")
    return secret


def write_private(path: Path, text: str) -> None:
    """Write `path` whole, mode 0600 from the start (never briefly world-readable), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def create_private(path: Path) -> None:
    """Create `path` empty, mode 0600 whatever the umask, for another program to fill (SQLite's backup
    API writes into a file it finds there, keeping its mode, where it would create one 0644). Never
    follows a symlink or reuses a file someone else put there: `FileExistsError` then."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # a umask can only take bits away from 0600; this sets them back
    finally:
        os.close(fd)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock for a read-change-write of `path` (on `path.lock`, created 0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def load_or_generate(path: Path, nbytes: int = 32) -> tuple[str, bool]:
    """The secret kept in `path`, or a new one (`nbytes` random bytes, URL-safe) written there under
    its lock; True when it was generated now."""
    with locked(path):
        if path.exists():
            check_private(path)
            secret = path.read_text(encoding="utf-8").strip()
            if secret:
                return secret, False
        secret = secrets.token_urlsafe(nbytes)
        write_private(path, secret + "\n")
        return secret, True
