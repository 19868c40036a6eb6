from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import seeded_store
from tests.postgres import PgServer, start_server


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A fresh store seeded with tests/fixtures/workspace.json."""
    return seeded_store(tmp_path / "mnote.db")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A PostgreSQL 16 server for the session (skipped where it cannot start, unless required)."""
    yield from start_server()


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """A fresh, empty database on it."""
    return pg_server.database()
