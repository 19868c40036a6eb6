"""`--db`: a SQLite file or a PostgreSQL URL, to the kernel (or the store) on it.

Every command that takes `--db` (serve, seed, audit, migrate, runtime serve|cli) opens its store here,
so `--db postgresql://…` works wherever a path does. The PostgreSQL adapter (and psycopg) is imported
only when a URL is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mnote_mcp.kernel.limits import PageLimits
from mnote_mcp.kernel.local import LocalKernel, LocalStore
from mnote_mcp.kernel.local.connection import DEFAULT_BUSY_TIMEOUT
from mnote_mcp.kernel.postgres.gate import SearchBounds

StoreLocation = Path | str


def is_postgres(db: StoreLocation) -> bool:
    return isinstance(db, str) and db.startswith(("postgresql://", "postgres://"))


def describe(db: StoreLocation) -> str:
    """Where the data lives, for the start-up line: `sqlite:PATH` or the URL without its password."""
    if is_postgres(db):
        from mnote_mcp.kernel.postgres.database import redact

        return redact(str(db))
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
        from mnote_mcp.kernel.postgres.kernel import PostgresKernel

        kernel = PostgresKernel
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
        from mnote_mcp.kernel.postgres.kernel import open_postgres_store

        return open_postgres_store(str(db), read_only=read_only, **options)
    from mnote_mcp.kernel.local.opening import open_store as open_sqlite

    return open_sqlite(db, read_only=read_only, **options)
