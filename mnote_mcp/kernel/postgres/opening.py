"""Opening the store on a PostgreSQL database, and saying in one line why it cannot be opened.

`open_store(url)` is the store on that database (migrated, or with `read_only` only checked),
`open_kernel(url)` the kernel port over it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Unpack

from mnote_mcp.kernel.errors import StoreUnavailableError
from mnote_mcp.kernel.limits import PageLimits
from mnote_mcp.kernel.postgres.bounds import SearchBounds, StoreOptions
from mnote_mcp.kernel.postgres.database import DEFAULT_POOL_SIZE, redact
from mnote_mcp.kernel.postgres.dialect import PostgresDialect
from mnote_mcp.kernel.store.changes import WriteHook
from mnote_mcp.kernel.store.dialect import (
    DEFAULT_BUSY_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    SchemaNotCurrentError,
    SchemaTooNewError,
)
from mnote_mcp.kernel.store.kernel import StoreKernel
from mnote_mcp.kernel.store.store import Store


def open_store(
    url: str,
    *,
    read_only: bool = False,
    limits: PageLimits | None = None,
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    hooks: Iterable[WriteHook] = (),
    pool_size: int | None = None,
    search: SearchBounds | None = None,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
) -> Store:
    """The store in that database (see `dialect.PostgresDialect`; `pool_size` None: the default);
    raises `StoreUnavailableError` naming the cause (without the password)."""
    size = DEFAULT_POOL_SIZE if pool_size is None else pool_size
    try:
        dialect = PostgresDialect(
            url,
            busy_timeout=busy_timeout,
            pool_size=size,
            read_only=read_only,
            search=search,
            connect_timeout=connect_timeout,
        )
    except (SchemaTooNewError, SchemaNotCurrentError) as exc:
        raise StoreUnavailableError(redact(url), str(exc)) from None
    except Exception as exc:  # psycopg's connection failures, a pool that cannot open
        cause = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StoreUnavailableError(redact(url), cause) from None
    return Store(dialect, limits=limits, hooks=hooks)


def open_kernel(url: str, **options: Unpack[StoreOptions]) -> StoreKernel:
    """The kernel port on that database (see `open_store`)."""
    return StoreKernel(open_store(url, **options))
