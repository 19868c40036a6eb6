from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import seeded_store


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A fresh store seeded with tests/fixtures/workspace.json."""
    return seeded_store(tmp_path / "mnote.db")
