"""A real PostgreSQL 16 for the tests, started from the `pgserver` wheel (no system install).

One server per test session (a session fixture, `pg_server`), in a short temporary directory (its
Unix socket path must stay short); each test or module asks it for a fresh database
(`PgServer.database()`), so tests never see each other's rows. Where the server cannot start the
tests that need it are skipped with the reason, unless `MNOTE_REQUIRE_POSTGRES=1` (CI: `.ci/run`
exports it), where that is a failure.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import pytest

if TYPE_CHECKING:  # (psycopg is optional: the PostgreSQL dialect is imported by the tests that need it)
    from mnote_mcp.kernel.postgres.dialect import PostgresDialect
    from mnote_mcp.kernel.store.store import Store

REQUIRED = os.environ.get("MNOTE_REQUIRE_POSTGRES") == "1"
_NAMES = itertools.count()


class PgServer:
    def __init__(self, server: Any) -> None:
        self.server = server
        self.url: str = server.get_uri()

    def database(self, prefix: str = "mnote") -> str:
        """A new, empty database on the server: its URL."""
        import psycopg

        name = f"{prefix}_{os.getpid()}_{next(_NAMES)}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        parts = urlsplit(self.url)
        return urlunsplit(parts._replace(path=f"/{name}"))


def start_server() -> Iterator[PgServer]:
    directory = tempfile.mkdtemp(prefix="mnote-pg-")
    try:
        with warnings.catch_warnings():  # platformdirs: no XDG_RUNTIME_DIR on CI machines (harmless)
            warnings.simplefilter("ignore")
            from pgserver.postgres_server import get_server

        server = get_server(directory, cleanup_mode="stop")
    except Exception as exc:
        shutil.rmtree(directory, ignore_errors=True)
        reason = f"PostgreSQL (the pgserver wheel) cannot start here: {type(exc).__name__}: {exc}"
        if REQUIRED:
            pytest.fail(f"{reason} (MNOTE_REQUIRE_POSTGRES=1)")
        pytest.skip(reason)
    try:
        yield PgServer(server)
    finally:
        server.cleanup()
        shutil.rmtree(directory, ignore_errors=True)


def postgres_tool(name: str) -> str:
    """A PostgreSQL program (pg_dump, pg_restore, psql) from the pgserver wheel: the server's own version."""
    import pgserver

    tool = Path(pgserver.__file__).parent / "pginstall" / "bin" / name
    assert tool.exists(), f"pgserver ships no {name} at {tool}"
    return str(tool)


def seeded_database(server: PgServer, fixture: Path) -> str:
    """A fresh database seeded with a fixture file: its URL."""
    from mnote_mcp.kernel.databases.stores import open_store
    from mnote_mcp.kernel.store.fixtures import load_fixture, read_fixture

    url = server.database()
    store = open_store(url)
    try:
        load_fixture(store, read_fixture(fixture))
    finally:
        store.close()
    return url


def store_fixture(request: pytest.FixtureRequest, tmp_path: Path, fixture: Path) -> Path | str:
    """For a `db` fixture parametrized over `STORES`: a seeded SQLite file or PostgreSQL database."""
    if request.param == "postgres":
        return seeded_database(request.getfixturevalue("pg_server"), fixture)
    from tests.support.helpers import store_with_pages

    return store_with_pages(tmp_path / "mnote.db", fixture)


STORES = ("sqlite", "postgres")


def pg_dialect(store: Store) -> PostgresDialect:
    """The PostgreSQL dialect under a store (its pool, its migration), for tests that look inside."""
    from mnote_mcp.kernel.postgres.dialect import PostgresDialect

    dialect = store.dialect
    assert isinstance(dialect, PostgresDialect)
    return dialect


def stop(server: PgServer) -> None:
    """Stop the server's postgres (a fast shutdown: sessions are ended), as an outage would."""
    import importlib

    pg_ctl = importlib.import_module("pgserver._commands").pg_ctl  # (made at import: no static name)
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.server.pgdata, user=server.server.system_user)


def start(server: PgServer) -> None:
    """Start it again, on the same socket: the URLs handed out before work again."""
    server.server.ensure_postgres_running()
    assert server.server.get_uri() == server.url
