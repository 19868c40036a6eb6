"""How long one search statement may run on PostgreSQL (`--db-search-timeout`), and its refusal.

What searches may hold of a replica (its connections, threads and turns) is no longer the dialect's:
every store gets it from the one admission of expensive calls (`mnote_mcp/calls/admission.py`, issue 32),
which took over this module's gate. A statement still runs for at most `timeout` seconds (`SET LOCAL
statement_timeout`): one stopped is `search_timeout`, retryable (the database may have been busy),
with a hint to narrow the query.

No psycopg here: `config.py` builds `SearchBounds` without the PostgreSQL adapter installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.limits import PageLimits

DEFAULT_SEARCH_TIMEOUT = 10.0


class StoreOptions(TypedDict, total=False):
    """How a store is opened, whatever opens it (`databases.stores`, `postgres.opening`): declared once,
    so that a layer which only passes them down to the dialect takes and passes them whole, and a new
    one is one line here and one where it is used. The defaults are `postgres.opening.open_store`'s
    (SQLite's, for the three it reads); `pool_size`, `search` and `connect_timeout` are PostgreSQL's.
    Here, beside `SearchBounds`, because this module imports no psycopg."""

    read_only: bool
    limits: PageLimits | None
    busy_timeout: float
    pool_size: int | None
    search: SearchBounds | None
    connect_timeout: float


@dataclass(frozen=True, slots=True)
class SearchBounds:
    """`--db-search-timeout`."""

    timeout: float = DEFAULT_SEARCH_TIMEOUT

    def __post_init__(self) -> None:
        if not self.timeout > 0:
            raise ValueError("the search timeout must be positive")


def search_timeout(timeout: float) -> MnoteError:
    return MnoteError(
        ErrorCode.RUNTIME_UNAVAILABLE,
        Reason.SEARCH_TIMEOUT,
        {"adapter": "postgres", "cause": "search_timeout", "searchTimeoutSeconds": timeout},
    )
