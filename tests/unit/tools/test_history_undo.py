"""Undo without guessing, through the real MCP client in both protocol eras: every write's result
names the `runId` it was recorded under (given as an argument, in `_meta`, or generated for the
connection; a replay names the first call's), and that is what `mnote.page.revert` takes as
`undoRunId`; revert's own refusals name `undoRunId`, the argument the model gave, never the kernel's
`runId`, in either tool-name style."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mnote_mcp.tools.catalog import ALL_TOOLS
from mnote_mcp.tools.registry import ToolSpec
from tests.support.helpers import (
    FIXTURE,
    IDS,
    MODES,
    call,
    connect,
    dump,
    page_args,
    store_with_pages,
    write_args,
)
from tests.support.tool_calls import call_example, target

pytestmark = pytest.mark.anyio

WRITES = [spec for spec in ALL_TOOLS if spec.writes]
SECOND_PAGE = {"id": "doc_2", "title": "Two", "blocks": [{"id": "q_1", "type": "paragraph", "text": "x"}]}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("spec", WRITES, ids=lambda spec: spec.name)
async def test_every_write_names_the_run_it_was_recorded_under(db: Path, mode: str, spec: ToolSpec) -> None:
    async with connect(db, mode, confirm="never") as client:
        planned = await call_example(client, spec, target("doc_1"), dry_run=True)
        written = await call_example(client, spec, target("doc_1"))
    assert written["ok"], written["error"]
    assert written["result"]["runId"] == IDS["runId"]
    assert "runId" not in planned["result"], "a dry run records nothing"


@pytest.mark.parametrize("mode", MODES)
async def test_the_run_named_is_the_one_revert_undoes(db: Path, mode: str) -> None:
    without_run = {
        name: value for name, value in write_args("k1", blockId="p_1", text="A").items() if name != "runId"
    }
    async with connect(db, mode, confirm="never") as client:
        generated = await call(client, "mnote.block.update", **without_run)
        from_meta = await call(
            client,
            "mnote.block.update",
            meta={"mnote/runId": "run_from_meta"},
            **{
                name: value
                for name, value in write_args("k2", blockId="p_2", text="B").items()
                if name != "runId"
            },
        )
        retried = await call(client, "mnote.block.update", **{**without_run, "runId": "run_other"})
        undone = await call(
            client, "mnote.page.revert", **write_args("undo", undoRunId=generated["result"]["runId"])
        )
        blocks = (await call(client, "mnote.page.get", **page_args()))["result"]["blocks"]
    run = generated["result"]["runId"]
    assert run.startswith("run_") and run != IDS["runId"], "generated for the connection"
    assert from_meta["result"]["runId"] == "run_from_meta"
    assert retried["result"]["idempotentReplay"] is True
    assert retried["result"]["runId"] == run, "a replay names the run the write was recorded under"
    assert undone["result"]["revertedRevisions"] == [generated["result"]["revision"]]
    assert [block["text"] for block in blocks[1:]] == ["First paragraph.", "B"]


CASES: dict[str, dict[str, Any]] = {
    "none": {},
    "too long": {"undoRunId": "r" * 300},
    "two": {"undoRunId": "run_a", "toRevision": 1},
}


@pytest.mark.parametrize("style", ["dotted", "underscore"])
@pytest.mark.parametrize("case", sorted(CASES))
async def test_revert_refusals_name_undo_run_id(db: Path, style: str, case: str) -> None:
    tool = "mnote.page.revert" if style == "dotted" else "mnote_page_revert"
    async with connect(db, tool_names=style, confirm="never") as client:
        refused = await call(client, tool, **write_args(f"k_{case}", **CASES[case]))
    error = refused["error"]
    said = json.dumps(error, ensure_ascii=False)
    assert error["code"] == "mnote_tool_invalid_argument"
    assert error["details"]["pointer"] in ("/undoRunId", "/commandId", "/toRevision"), error  # issue 30
    assert "undoRunId" in said and "runId" not in said.replace("undoRunId", ""), said


@pytest.mark.parametrize("mode", MODES)
async def test_a_run_that_wrote_nothing_to_the_page_is_not_found(tmp_path: Path, mode: str) -> None:
    """Issue 30: a mistyped `undoRunId` answered `ok`, `effect: "write"`, a commandId and `changed:
    false`, with a ledger entry and an audit record of a write. A run that wrote nothing to this page
    (no such run, another page's run, another actor's run of the same id) is refused as an unknown
    `commandId` is, real or dry run, and nothing is recorded."""
    db = store_with_pages(tmp_path / "two.db", FIXTURE, SECOND_PAGE)
    async with connect(db, mode, confirm="never") as client:
        await call(
            client, "mnote.block.update", **write_args("w1", blockId="p_1", text="A", runId="run_mine")
        )
        await call(
            client,
            "mnote.block.update",
            **write_args("w2", document_id="doc_2", blockId="q_1", text="B", runId="run_elsewhere"),
        )
    async with connect(db, mode, confirm="never", actor="user_owner") as client:
        await call(client, "mnote.page.update_title", **write_args("w3", title="T", runId="run_theirs"))
    before = dump(db)
    async with connect(db, mode, confirm="never") as client:
        answers = [
            await call(
                client, "mnote.page.revert", **write_args(f"u-{run}-{dry}", dry_run=dry, undoRunId=run)
            )
            for run in ("run_mnie", "run_elsewhere", "run_theirs")
            for dry in (False, True)
        ]
        mine = await call(client, "mnote.page.revert", **write_args("u-mine", undoRunId="run_mine"))
    assert dump(db) != before and mine["ok"] and mine["result"]["revertedRevisions"] == [2]
    for refused in answers:
        assert refused["audit"] == {"effect": "none", "workspaceId": "ws_1", "documentId": "doc_1"}
        error = refused["error"]
        assert (error["code"], error["details"]["pointer"]) == ("mnote_tool_not_found", "/undoRunId"), error
        assert error["details"]["runId"] in ("run_mnie", "run_elsewhere", "run_theirs")
        assert "runId" not in error["message"].replace("undoRunId", ""), error["message"]


async def test_nothing_is_recorded_for_a_run_that_wrote_nothing(db: Path) -> None:
    before = dump(db)
    async with connect(db, confirm="never") as client:
        refused = await call(client, "mnote.page.revert", **write_args("u-typo", undoRunId="run_typo"))
    assert refused["error"]["code"] == "mnote_tool_not_found"
    assert dump(db) == before, "no ledger entry, no audit record, no revision"
