"""What searches may hold of a PostgreSQL replica, so that one caller's broad searches cannot starve
everybody else (issue 26: sixteen `w*` searches in flight held every pooled connection and worker
thread, and another actor's page read waited 10 s behind them).

Every call of the kernel on PostgreSQL runs on a worker thread with one pooled connection, at most
`--db-pool-size` at once. A search (`mnote.page.search`, the listing too) also needs one of
`--db-search-connections` places (fewer than the pool: the other calls always keep the rest). One
actor's searches take their turns: one runs, the others wait (on the event loop, holding no thread
nor connection), so an actor never holds more than one place and another actor's search waits for
at most the searches already running. An actor may have `--db-searches-per-actor` searches in flight,
running or waiting: one more is refused at once, before any database work, as
`mnote_tool_runtime_unavailable` (`search_busy`, retryable). Waiting rather than refusing below that
bound matters: a client keeping many searches in flight and sending a refused one again at once
costs the replica a request each time, a waiting one nothing. A search statement runs for at most
`--db-search-timeout` seconds (`SET LOCAL statement_timeout`): one stopped is `search_timeout`,
retryable (the database may have been busy), with a hint to narrow the query.

No psycopg here: `config.py` builds `SearchBounds` without the PostgreSQL adapter installed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from anyio import CapacityLimiter, Lock

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason

DEFAULT_SEARCH_CONNECTIONS = 2
DEFAULT_SEARCHES_PER_ACTOR = 16
DEFAULT_SEARCH_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class SearchBounds:
    """The three bounds above (flags `--db-search-connections`, `--db-searches-per-actor`,
    `--db-search-timeout`)."""

    connections: int = DEFAULT_SEARCH_CONNECTIONS
    per_actor: int = DEFAULT_SEARCHES_PER_ACTOR
    timeout: float = DEFAULT_SEARCH_TIMEOUT

    def __post_init__(self) -> None:
        if self.connections < 1 or self.per_actor < 1 or not self.timeout > 0:
            raise ValueError("search bounds must be positive")

    def places(self, pool_size: int) -> int:
        """Searches at once on a pool of `pool_size`: at most one less than the pool, so the other
        calls keep a connection (a pool of one is shared: there is nothing to keep back)."""
        return max(1, min(self.connections, pool_size - 1))


def search_busy(per_actor: int) -> MnoteError:
    return MnoteError(
        ErrorCode.RUNTIME_UNAVAILABLE,
        Reason.SEARCH_BUSY,
        {"adapter": "postgres", "cause": "search_busy", "searchesPerActor": per_actor},
    )


def search_timeout(timeout: float) -> MnoteError:
    return MnoteError(
        ErrorCode.RUNTIME_UNAVAILABLE,
        Reason.SEARCH_TIMEOUT,
        {"adapter": "postgres", "cause": "search_timeout", "searchTimeoutSeconds": timeout},
    )


class SearchGate:
    """The places searches take, each actor's turn, and each actor's searches in flight. Used on the
    event loop only (no lock: admitting and leaving never yield between reading and writing a count)."""

    def __init__(self, bounds: SearchBounds, pool_size: int) -> None:
        self.bounds = bounds
        self.places = bounds.places(pool_size)
        self._limiter: CapacityLimiter | None = None  # made on the event loop (anyio needs one)
        self._in_flight: dict[str, int] = {}
        self._turns: dict[str, Lock] = {}  # an actor's, while it has a search in flight
        self._admitted = 0  # searches in flight, running or waiting (every actor's)

    def in_flight(self, actor_id: str) -> int:
        return self._in_flight.get(actor_id, 0)

    def counts(self) -> tuple[int, int]:
        """(running, waiting): searches holding a place, and those waiting for their turn or one."""
        running = 0 if self._limiter is None else int(self._limiter.borrowed_tokens)
        return running, self._admitted - running

    @asynccontextmanager
    async def admit(self, actor_id: str) -> AsyncIterator[None]:
        """Hold the actor's turn and a search place for the body, or refuse at once an actor with
        too many searches in flight."""
        held = self._in_flight.get(actor_id, 0)
        if held >= self.bounds.per_actor:
            raise search_busy(self.bounds.per_actor)
        self._in_flight[actor_id] = held + 1
        self._admitted += 1
        turn = self._turns.setdefault(actor_id, Lock())
        try:
            if self._limiter is None:
                self._limiter = CapacityLimiter(self.places)
            async with turn, self._limiter:
                yield
        finally:
            self._admitted -= 1
            left = self._in_flight[actor_id] - 1
            if left:
                self._in_flight[actor_id] = left
            else:  # nobody holds or waits for its turn
                del self._in_flight[actor_id], self._turns[actor_id]
