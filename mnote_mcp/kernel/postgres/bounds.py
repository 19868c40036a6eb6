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

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason

DEFAULT_SEARCH_TIMEOUT = 10.0


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
