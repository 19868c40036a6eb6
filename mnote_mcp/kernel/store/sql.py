"""What the portable kernel needs of a database connection: the DB-API's few calls, `?` placeholders.

Everything in `kernel/store` that reads or writes rows does it through a `Connection`: `execute` with
`?` (or `:name`) placeholders and a cursor back, and `executemany`. `sqlite3.Connection` is one as it
is; the PostgreSQL adapter wraps a psycopg connection into one (`kernel/postgres/database.py`). The
SQL the kernel runs is portable (standard SQL that both dialects read the same way: `WITH
RECURSIVE`, row values, `ON CONFLICT`, `LIMIT`), so the same command, history, revert, ledger and
search listing code runs on both. What the databases do differently is the `Dialect` (`dialect.py`).

A row is whatever the driver gives (a tuple of SQL values), so cursors answer `Any`: the modules that
read them unpack each row into typed values at once (`rows.BlockRow`, `access.PageHead`, ...).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...

    def close(self) -> None: ...


class Connection(Protocol):
    def execute(self, sql: str, parameters: Sequence[Any] | Mapping[str, Any] = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> object: ...
