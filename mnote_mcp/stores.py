"""`--db`: a SQLite file or a PostgreSQL URL, to the kernel (or the store) on it.

Every command that takes `--db` (serve, seed, audit, migrate, runtime serve|cli) opens its store here,
so `--db postgresql://…` works wherever a path does. The PostgreSQL adapter (and psycopg) is imported
only when a URL is given; without the `[postgres]` extra that is one line saying how to install it
(exit status 3), never a traceback.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from mnote_mcp.kernel.errors import StoreUnavailableError
from mnote_mcp.kernel.limits import PageLimits
from mnote_mcp.kernel.local import LocalKernel, LocalStore
from mnote_mcp.kernel.local.connection import DEFAULT_BUSY_TIMEOUT
from mnote_mcp.kernel.postgres.gate import SearchBounds

StoreLocation = Path | str
# The package is not published: the extra is installed from the checkout.
POSTGRES_EXTRA = "pip install -e '.[postgres]' in the mnote_mcp checkout"


def is_postgres(db: StoreLocation) -> bool:
    return isinstance(db, str) and db.startswith(("postgresql://", "postgres://"))


def postgres_module(db: str, name: str) -> ModuleType:
    """`mnote_mcp.kernel.postgres.NAME`, or `StoreUnavailableError` naming the extra when psycopg (or
    its pool) is not installed."""
    try:
        return importlib.import_module(f"mnote_mcp.kernel.postgres.{name}")
    except ImportError as exc:
        if not (exc.name or "").startswith("psycopg"):
            raise
        parts = urlsplit(db)  # no password to hide: the user and password are left out
        host = f"{parts.hostname or ''}{'' if parts.port is None else f':{parts.port}'}"
        where = urlunsplit(parts._replace(netloc=host, query=""))
        raise StoreUnavailableError(where, f"PostgreSQL support is not installed: {POSTGRES_EXTRA}") from None


def describe(db: StoreLocation) -> str:
    """Where the data lives, for the start-up line: `sqlite:PATH` or the URL without its password."""
    if is_postgres(db):
        redacted: str = postgres_module(str(db), "database").redact(str(db))
        return redacted
    return f"sqlite:{db}"


def open_kernel(
    db: StoreLocation,
    *,
    seed: Path | None = None,
    demo: bool = True,
    limits: PageLimits | None = None,
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    pool_size: int | None = None,
    read_only: bool = False,
    search: SearchBounds | None = None,
) -> LocalKernel:
    """The kernel on that store, seeded (`LocalKernel.open_seeded`). `read_only` opens an existing
    store read-only and unseeded, never created nor migrated (`open_store`): a SQLite file through
    `kernel.local.opening`, a PostgreSQL database with its schema checked and every connection READ ONLY.
    `pool_size` and `search` (its bounds: `kernel.postgres.gate`) are PostgreSQL's alone."""
    if read_only and seed is not None:
        raise ValueError(
            "--seed writes the store, but --read-only only reads it: seed it first"
            " (mnote-mcp seed --db PATH FILE), then serve it read-only"
        )
    kernel: type[LocalKernel] = LocalKernel
    options: dict[str, Any] = {}
    if is_postgres(db):
        kernel = postgres_module(str(db), "kernel").PostgresKernel
        options = {"search": search} if pool_size is None else {"search": search, "pool_size": pool_size}
    if read_only:
        return kernel(open_store(db, read_only=True, limits=limits, busy_timeout=busy_timeout, **options))
    return kernel.open_seeded(db, seed=seed, demo=demo, limits=limits, busy_timeout=busy_timeout, **options)


def open_store(db: StoreLocation, *, read_only: bool = False, **options: Any) -> LocalStore:
    """The synchronous store (seed, audit, migrate); raises `StoreUnavailableError` naming the cause.
    `read_only` opens an existing store read-only, never created nor migrated: SQLite through
    `kernel.local.opening`, PostgreSQL with its schema checked and every transaction READ ONLY
    (`kernel.postgres.kernel.PostgresStore`)."""
    if is_postgres(db):
        store: LocalStore = postgres_module(str(db), "kernel").open_postgres_store(
            str(db), read_only=read_only, **options
        )
        return store
    from mnote_mcp.kernel.local.opening import open_store as open_sqlite

    return open_sqlite(db, read_only=read_only, **options)
