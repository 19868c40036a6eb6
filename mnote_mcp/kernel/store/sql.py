"""The seam between the kernel's commands and the database they run on.

Everything in `kernel/local` that reads or writes rows does it through a `Connection`: `execute` with
`?` (or `:name`) placeholders and a cursor back, and `executemany`. `sqlite3.Connection` is one as it is; the
PostgreSQL adapter (`kernel/postgres`) wraps a psycopg connection into one. The SQL the commands
run is kept portable, so the same command, history, revert and concurrency code runs on both.

A `Database` gives transactions and the few things the dialects do differently: how a write keeps
other writers of the same page out (`lock_page`: SQLite's `BEGIN IMMEDIATE` already holds the whole
file; PostgreSQL locks the page's row), how seeders keep out of each other (`serialize`), which
failures mean "run the whole transaction again" (`retryable`: never on SQLite; a unique key taken
by another replica's concurrent commit, a serialisation failure or a deadlock on PostgreSQL), and a
text dump of every row (what tests compare to prove that nothing was written).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    def execute(self, sql: str, parameters: Sequence[Any] | Mapping[str, Any] = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Any: ...


class Database(Protocol):
    dialect: str

    def transaction(self, *, write: bool, inline: bool = False) -> AbstractContextManager[Connection]: ...

    def lock_page(self, conn: Connection, workspace_id: str, page_id: str) -> None: ...

    def serialize(self, conn: Connection, name: str) -> None: ...

    def retryable(self, exc: BaseException) -> bool: ...

    def dump(self) -> str: ...

    def close(self) -> None: ...


# How often a write whose transaction hit a retryable failure is run again before the failure stands.
WRITE_ATTEMPTS = 8
