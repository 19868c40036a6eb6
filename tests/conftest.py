"""Fixtures every test may use, and the markers a test gets from where it lives.

The folders say what a test needs (docs/testing.md): `tests/e2e/` real transports and processes,
`tests/clients/` real clients installed under `.ci/`, `tests/postgres/` a PostgreSQL server,
`tests/deploy/` the shipped deployment files (nginx, compose, the image, systemd). Their tests are
marked `e2e`, `clients`, `postgres` and `deploy` here, so `-m` selects them without each file
saying so. A PostgreSQL case elsewhere is marked `postgres` too: a test that asks for the `pg_server`
or `pg_url` fixture, or one of whose parameters is `"postgres"` (the PostgreSQL case of
`tests.support.postgres.STORES` and of every other store or adapter parameter). A test that reaches
PostgreSQL without the marker fails in a run that deselected the marker (`pg_server` below), so the
fast subset cannot start a PostgreSQL server behind its marker's back. Tests that share a module-scoped
fixture share an xdist worker (`tests/support/grouping.py`), so under `-n` it is made once.

Every result the run's servers answer is held to its tool's `outputSchema` (`MNOTE_CHECK_RESULTS`,
`mnote_mcp/tools/resultcheck.py`): set here for the whole run, inherited by xdist workers and the
servers tests start as processes, and the run fails at its end on any violation, naming the tool
and the JSON pointer.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from mnote_mcp.tools.resultcheck import CHECK_RESULTS_ENV
from tests.support.grouping import assign_groups
from tests.support.helpers import seeded_store
from tests.support.postgres import PgServer, start_server
from tests.support.schemacheck import remember_valid_schemas

TESTS = Path(__file__).resolve().parent
FOLDER_MARKERS = {"e2e": "e2e", "clients": "clients", "postgres": "postgres", "deploy": "deploy"}
POSTGRES_FIXTURES = frozenset({"pg_server", "pg_url"})
_POSTGRES_SELECTED = pytest.StashKey[bool]()
remember_valid_schemas()  # each valid JSON Schema checked once per worker (tests/support/schemacheck.py)


def is_postgres_case(item: pytest.Item) -> bool:
    if POSTGRES_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and "postgres" in callspec.params.values()


def _controller(config: pytest.Config) -> bool:
    """Not an xdist worker: the process that starts the run and reports its end."""
    return not hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    """The file every process of the run appends result violations to, empty at the start."""
    if not _controller(config):
        return
    path = os.environ.get(CHECK_RESULTS_ENV, "").strip()
    if not path:
        descriptor, path = tempfile.mkstemp(prefix="mnote-results-", suffix=".jsonl")
        os.close(descriptor)
        os.environ[CHECK_RESULTS_ENV] = path
    Path(path).write_bytes(b"")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Fails the run if any result did not match its tool's `outputSchema` (one line per violation)."""
    if not _controller(session.config):
        return
    path = Path(os.environ[CHECK_RESULTS_ENV])
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    if not lines:
        return
    violations = sorted({(v["tool"], v["pointer"], v["message"]) for v in map(json.loads, lines)})
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(
            f"{len(violations)} result(s) did not match their tool's outputSchema ({path}):", red=True
        )
        for tool, pointer, message in violations[:50]:
            reporter.write_line(f"  {tool} {pointer or '/'}: {message}", red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the groups marked here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        folder = item.path.relative_to(TESTS).parts[0] if item.path.is_relative_to(TESTS) else ""
        if folder in FOLDER_MARKERS:
            item.add_marker(FOLDER_MARKERS[folder])
        if is_postgres_case(item) and item.get_closest_marker("postgres") is None:
            item.add_marker("postgres")
    assign_groups(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    """After deselection (`-m`, `-k`): does any test that will run carry the `postgres` marker?"""
    session.stash[_POSTGRES_SELECTED] = any(item.get_closest_marker("postgres") for item in session.items)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A fresh store seeded with tests/fixtures/workspace.json."""
    return seeded_store(tmp_path / "mnote.db")


@pytest.fixture(scope="session")
def pg_server(request: pytest.FixtureRequest) -> Iterator[PgServer]:
    """A PostgreSQL 16 server for the session (skipped where it cannot start, unless required)."""
    if not request.session.stash.get(_POSTGRES_SELECTED, True):
        pytest.fail(
            "a test reached PostgreSQL in a run without `postgres` tests: give it a parameter "
            '"postgres", the pg_server or pg_url fixture, or the postgres marker (tests/conftest.py)'
        )
    yield from start_server()


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """A fresh, empty database on it."""
    return pg_server.database()
