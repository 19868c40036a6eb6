"""The portable kernel's shape (issue 11, item 18; issue 21): the store split by job, no module of it
importing the store back, and the Markdown text diff computed only when a dry run will show it. (What
the portable kernel and the dialects may import is tests/unit/test_architecture.py's.)"""

from __future__ import annotations

import ast
import difflib
import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import ROOT, call, connect, write_args

pytestmark = pytest.mark.anyio
STORE = ROOT / "mnote_mcp" / "kernel" / "store"


def _imports(path: Path) -> Iterator[str]:
    """Every module `path` imports, TYPE_CHECKING imports included (a cycle in types is still a cycle)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def test_the_store_is_split_by_job() -> None:
    for module, job in [
        ("store.dialect", "the seam between the portable kernel and a database"),
        ("store.changes", "the one page-change path"),
        ("store.access", "permission checkpoints"),
        ("store.bounds", "the limits every command's plan passes, and what runs off the loop"),
        ("store.ledger", "idempotency ledger and audit"),
        ("store.search", "search: the listing, cursors"),
        ("sqlite.connection", "SQLite's connections and transactions"),
        ("sqlite.migrate", "SQLite's schema creation and migration"),
        ("postgres.database", "PostgreSQL's connections and transactions"),
        ("postgres.schema", "PostgreSQL's schema and migrations"),
    ]:
        assert importlib.import_module(f"mnote_mcp.kernel.{module}").__doc__, job
    # 305: the port's answer types (PageView, HistoryView, SearchResult, AuditRecord), issue 21;
    # 310: `record_refusal`, a declined write's audit record (issue 25); 315: the one door of issue 30
    # (`bounds`: what every command may write and where its work runs; the rules live in bounds.py);
    # 317: the ledger and the rows a command names asked for with the page lock (issue 34); 320: what
    # was asked and not read is closed when the command ends (a write moved off the loop left it open)
    assert len((STORE / "store.py").read_text(encoding="utf-8").splitlines()) < 320


def test_no_module_of_the_portable_kernel_imports_the_store_back() -> None:
    importers = {
        path.relative_to(STORE).as_posix()
        for path in STORE.rglob("*.py")
        if path.name not in ("store.py", "__init__.py", "kernel.py", "fixtures.py")
        and "mnote_mcp.kernel.store.store" in set(_imports(path))
    }
    assert importers == set(), "the store sits on top: commands, rows, ledger and access never import it"


async def test_the_text_diff_is_computed_for_dry_runs_only(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = difflib.unified_diff

    def counting(*args: Any, **kwargs: Any) -> Iterator[str]:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(difflib, "unified_diff", counting)
    async with connect(db) as client:
        written = await call(client, "mnote.block.update", **write_args("k1", blockId="p_1", text="changed"))
        saved = await call(
            client,
            "mnote.page.save",
            **write_args("k2", content=[{"id": "p_1", "type": "paragraph", "text": "x"}]),
        )
        assert written["ok"] and saved["ok"]
        assert calls == [], "a real write throws the text diff away: it must not compute it"
        plan = await call(
            client, "mnote.block.update", **write_args("k3", dry_run=True, blockId="p_1", text="again")
        )
    assert plan["ok"], plan["error"]
    assert calls and "textDiff" in plan["result"]
