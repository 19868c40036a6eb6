"""Seeding never destroys edits (issue 11, item 7): `--seed` and `mnote-mcp seed` create what is missing,
leave what exists, and say on stderr what they did; replacing a page is a separate, explicit action that
names the pages it replaces."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import anyio
import pytest

from mnote_mcp.kernel.databases.stores import open_kernel as open_seeded
from mnote_mcp.kernel.port import Command, CommandName, Correlation, PageQuery, PageView
from mnote_mcp.kernel.sqlite.opening import open_kernel
from tests.support.helpers import ROOT, run_cli
from tests.support.postgres import STORES

DEMO = ROOT / "examples" / "workspace.json"
CORRELATION = Correlation("sess", "run", "call", "trace")


def _grow_doc_2(db: Path, blocks: int = 40) -> int:
    """Edit the demo's doc_2 the way an agent would; returns its block count afterwards."""

    async def edit() -> int:
        kernel = open_kernel(db)
        try:
            for n in range(blocks):
                await kernel.execute(
                    Command(
                        name=CommandName.PAGE_BLOCK_INSERT,
                        workspace_id="ws_1",
                        document_id="doc_2",
                        actor_id="user_1",
                        correlation=CORRELATION,
                        idempotency_key=f"grow_{n}",
                        dry_run=False,
                        payload={"blocks": [{"type": "paragraph", "text": f"edit {n}"}], "position": "end"},
                    )
                )
            page = await kernel.get_page(PageQuery("ws_1", "doc_2", "user_1", CORRELATION))
        finally:
            await kernel.aclose()
        return len(page["blocks"])

    return anyio.run(edit)


def _doc_2(db: Path) -> PageView:
    async def read() -> PageView:
        kernel = open_kernel(db)
        try:
            return await kernel.get_page(PageQuery("ws_1", "doc_2", "user_1", CORRELATION))
        finally:
            await kernel.aclose()

    return anyio.run(read)


@pytest.mark.slow
def test_seed_command_keeps_pages_edited_since_and_says_so(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    first = run_cli("seed", "--db", str(db), str(DEMO))
    assert first.returncode == 0, first.stderr
    assert _grow_doc_2(db) == 42
    revision = _doc_2(db)["revision"]
    again = run_cli("seed", "--db", str(db), str(DEMO))
    assert again.returncode == 0, again.stderr
    page = _doc_2(db)
    assert (len(page["blocks"]), page["revision"]) == (42, revision), "the edits survive"
    report = json.loads(again.stdout)
    assert report["created"] == {"workspaces": 0, "members": 0, "pages": 0}
    assert "ws_1/doc_2" in report["kept"]["changed"]
    assert "ws_1/doc_2" in again.stderr and "--replace" in again.stderr, (
        "stderr names the page and the way out"
    )


def test_serve_seed_creates_what_is_missing_and_never_replaces(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "store.db"
    open_seeded(db, seed=DEMO).store.close()
    assert _grow_doc_2(db) == 42
    fixture = json.loads(DEMO.read_text(encoding="utf-8"))
    fixture["workspaces"][0]["pages"].append({"id": "doc_new", "title": "New page"})
    extended = tmp_path / "extended.json"
    extended.write_text(json.dumps(fixture), encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="mnote_mcp"):
        open_seeded(db, seed=extended).store.close()
    assert len(_doc_2(db)["blocks"]) == 42
    said = caplog.text
    assert "created 1 page" in said and "ws_1/doc_new" in said
    assert "kept" in said and "ws_1/doc_2" in said


@pytest.mark.slow
def test_replace_is_explicit_names_its_pages_and_is_a_new_revision(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    assert run_cli("seed", "--db", str(db), str(DEMO)).returncode == 0
    _grow_doc_2(db)
    before = _doc_2(db)
    replaced = run_cli("seed", "--db", str(db), str(DEMO), "--replace", "ws_1/doc_2")
    assert replaced.returncode == 0, replaced.stderr
    assert "replaced ws_1/doc_2" in replaced.stderr
    after = _doc_2(db)
    assert len(after["blocks"]) == 2
    assert after["revision"] == before["revision"] + 1
    unknown = run_cli("seed", "--db", str(db), str(DEMO), "--replace", "ws_1/doc_nope")
    assert unknown.returncode == 2 and "ws_1/doc_nope" in unknown.stderr


@pytest.mark.parametrize("store", STORES)
def test_the_seed_report_counts_what_it_created_on_either_store(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Issue 23: `mnote-mcp seed` on PostgreSQL reported `"workspaces": -2` (a driver's rowcount)."""
    db = request.getfixturevalue("pg_url") if store == "postgres" else str(tmp_path / "seed.db")
    data = json.loads(DEMO.read_text(encoding="utf-8"))
    expected = {
        "workspaces": len(data["workspaces"]),
        "members": sum(len(ws.get("members", [])) for ws in data["workspaces"]),
        "pages": sum(len(ws.get("pages", [])) for ws in data["workspaces"]),
    }
    first = run_cli("seed", "--db", db, str(DEMO))
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["created"] == expected
    again = run_cli("seed", "--db", db, str(DEMO))
    assert json.loads(again.stdout)["created"] == dict.fromkeys(expected, 0)
