"""What a store reports of itself for the metrics (`--metrics-listen`): its connection pool and, per
database, what only it has (PostgreSQL: whether the database answers; SQLite: the
write-ahead log's checkpoints). Read when scraped, from counts the dialect keeps anyway: nothing is
measured per call for them, and a store without metrics pays nothing.

A figure the database has no meaning for is None (and is not exported); a relay has no store and no
figures (`Measured` is what the serving layer looks for).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class StoreFigures:
    """One reading of a store's figures (see the module; docs/deploy.md names their metrics)."""

    database: str  # `sqlite` or `postgresql`
    pool_size: int  # connections the pool may open at most
    pool_idle: int  # open and waiting to be lent
    pool_in_use: int  # lent to a transaction
    pool_waiting: int  # transactions waiting for a connection
    pool_timeouts: int  # waits for a connection that ran out (since the store opened)
    # PostgreSQL
    connection_errors: int | None = None  # connections the pool failed to open
    connections_lost: int | None = None  # pooled connections found dead
    unreachable: bool | None = None  # the last connection attempt failed (calls answer store_unreachable)
    # SQLite
    checkpoints: int | None = None  # checkpoints by the checkpointer thread
    catch_ups: int | None = None  # small checkpoints by a write on the event loop after one of those
    checkpoint_frames: int | None = None  # log frames the last checkpoint found copied
    checkpoint_seconds: float | None = None  # how long the last checkpoint took
    wal_bytes: int | None = None  # the write-ahead log file's size


@runtime_checkable
class Measured(Protocol):
    """A kernel over a store of its own (`StoreKernel`): it has figures."""

    def store_figures(self) -> StoreFigures: ...
