"""`--db`: a SQLite file or a PostgreSQL URL, to the kernel (or the store) on it.

Every command that takes `--db` (serve, seed, audit, migrate, runtime serve|cli) opens its store here,
so `--db postgresql://…` works wherever a path does: the dialect is picked from `--db`, everything
above it is the one portable kernel (`kernel/store`). The PostgreSQL dialect (and psycopg) is imported
only when a URL is given; without the `[postgres]` extra that is one line saying how to install it
(exit status 3), never a traceback. The fixture loader is imported only when a store is seeded.
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from types import ModuleType
from typing import Unpack
from urllib.parse import urlsplit, urlunsplit

from mnote_mcp.kernel.errors import StoreUnavailableError
from mnote_mcp.kernel.postgres.bounds import StoreOptions
from mnote_mcp.kernel.store.dialect import DEFAULT_BUSY_TIMEOUT
from mnote_mcp.kernel.store.kernel import StoreKernel
from mnote_mcp.kernel.store.store import Store

StoreLocation = Path | str
logger = logging.getLogger(__name__)
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
    one_call: bool = False,
    **options: Unpack[StoreOptions],
) -> StoreKernel:
    """The kernel on that store, with `seed` loaded into it, or the demo workspace if the store is new
    (and `demo`): what `serve` and `runtime serve` both do, so a first run of either has something to
    show. `read_only` opens an existing store read-only and unseeded, never created nor migrated
    (`open_store`). `pool_size` and `search` (its statement timeout: `kernel.postgres.bounds`) and
    `connect_timeout` are PostgreSQL's. `one_call`: for a process answering one call (`runtime cli`),
    a kernel whose calls run at once, with no event loop (`kernel.store.kernel`)."""
    read_only = options.get("read_only", False)
    if read_only and seed is not None:
        raise ValueError(
            "--seed writes the store, but --read-only only reads it: seed it first"
            " (mnote-mcp seed --db PATH FILE), then serve it read-only"
        )
    store = open_store(db, **options)
    try:
        if seed is not None or (store.created and demo and not read_only):
            # only then: the fixture loader and its schema validator are no part of serving
            from mnote_mcp.kernel.store.fixtures import demo_fixture, load_fixture, read_fixture

            if seed is not None:
                load_fixture(store, read_fixture(seed))
            else:
                load_fixture(store, demo_fixture())
                logger.info("new store %s seeded with the demo workspace", store.location)
    except BaseException:
        store.close()
        raise
    return StoreKernel(store, one_call=one_call)


def open_store(db: StoreLocation, **options: Unpack[StoreOptions]) -> Store:
    """The synchronous store (seed, audit, migrate); raises `StoreUnavailableError` naming the cause.
    `read_only` opens an existing store read-only, never created nor migrated: SQLite through a
    read-only URI (`kernel.sqlite.opening`), PostgreSQL with its schema checked and every transaction
    READ ONLY (`kernel.postgres.dialect`)."""
    if is_postgres(db):
        opening = postgres_module(str(db), "opening")
        store: Store = opening.open_store(str(db), **options)
        return store
    from mnote_mcp.kernel.sqlite.opening import open_store as open_sqlite

    return open_sqlite(
        db,
        read_only=options.get("read_only", False),
        limits=options.get("limits"),
        busy_timeout=options.get("busy_timeout", DEFAULT_BUSY_TIMEOUT),
    )
