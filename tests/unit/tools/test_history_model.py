"""Model-based: random block edits and page saves by three runs, then reverts, against a plain model.

The block edits are drawn and predicted as in `test_block_model` (its model of the block tree); a save
replaces the body with the model's own blocks, one text changed. Every write that changes the page
records the model's page at that revision, the run that wrote it and the blocks it touched. Then:

- the history lists every such write once, newest first, with its run;
- a revert to a random earlier revision gives exactly the page the model had at that revision, and
  so does a second revert, to another revision, after more edits;
- undoing a random run is refused (`mnote_tool_conflict`) exactly when a later write by another run
  touched one of its blocks, or when putting its blocks back would break the tree (a parent gone or
  without children); otherwise every block the run touched is back as it was before the run first
  touched it (content and parent; gone if the run created it), every other block is as it was, and
  untouched siblings keep their order.
"""

from __future__ import annotations

import copy
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.helpers import MODES, call, connect, page_args, seeded_store, write_args
from tests.unit.tools.test_block import TREE
from tests.unit.tools.test_block_model import MAX_DEPTH, NESTING, Model, operation, predict

RUNS = ("run_a", "run_b", "run_c")
FIXTURE_BLOCKS: list[dict[str, Any]] = [
    {"id": "heading_1", "type": "heading", "text": "Chapter one", "props": {"level": 1}},
    {"id": "p_1", "type": "paragraph", "text": "First paragraph."},
    {"id": "p_2", "type": "paragraph", "text": "Second paragraph."},
]


def flat(
    blocks: list[dict[str, Any]], parent: str | None = None
) -> dict[str, tuple[str | None, dict[str, Any]]]:
    """id -> (parent, the block without children)."""
    out: dict[str, tuple[str | None, dict[str, Any]]] = {}
    for block in blocks:
        out[block["id"]] = (parent, {k: v for k, v in block.items() if k != "children"})
        out.update(flat(block.get("children", []), block["id"]))
    return out


def sibling_order(blocks: list[dict[str, Any]], parent: str | None = None) -> dict[str | None, list[str]]:
    out: dict[str | None, list[str]] = {parent: [b["id"] for b in blocks]}
    for block in blocks:
        out.update(sibling_order(block.get("children", []), block["id"]))
    return out


class Story:
    """What the server was asked to do, and what the model says each revision looked like."""

    def __init__(self) -> None:
        self.pages: dict[int, list[dict[str, Any]]] = {1: copy.deepcopy(FIXTURE_BLOCKS)}
        self.runs: dict[int, str] = {}
        self.touched: dict[int, set[str]] = {}
        self.revision = 1

    def wrote(
        self, envelope: dict[str, Any], run: str, page: list[dict[str, Any]], touched: set[str]
    ) -> None:
        revision = envelope["result"]["revision"]
        if revision == self.revision:
            return
        assert revision == self.revision + 1
        self.revision = revision
        self.pages[revision] = copy.deepcopy(page)
        self.runs[revision] = run
        self.touched[revision] = touched


async def edits(
    client: Any, data: st.DataObject, model: Model, story: Story, label: str, count: int
) -> Model:
    for step in range(count):
        run = data.draw(st.sampled_from(RUNS), label=f"{label}{step} run")
        if data.draw(st.integers(0, 5), label=f"{label}{step} save?") == 0 and model.walk():
            blocks = model.blocks()
            target = data.draw(st.sampled_from(model.walk()))
            node = model.nodes[target]
            if node["type"] != "divider":
                node["text"] += "!"
            blocks = model.blocks()
            envelope = await call(
                client, "mnote.page.save", **write_args(f"{label}{step}", content=blocks, runId=run)
            )
            assert envelope["ok"], envelope["error"]
            ops = envelope["result"]["diff"]
            story.wrote(envelope, run, model.blocks(), {op["blockId"] for op in ops})
            continue
        kind, args = operation(data.draw, model, step)
        envelope = await call(
            client, f"mnote.block.{kind}", **write_args(f"{label}{step}", runId=run, **args)
        )
        outcome, expected = predict(model, kind, args)
        assert envelope["ok"] is (outcome == "ok"), (kind, args, envelope["error"])
        if envelope["ok"]:
            assert envelope["result"]["blockIds"] == expected
            story.wrote(envelope, run, model.blocks(), set(expected))
    return model


async def page_blocks(client: Any) -> list[dict[str, Any]]:
    page = await call(client, "mnote.page.get", **page_args())
    blocks: list[dict[str, Any]] = page["result"]["blocks"]
    return blocks


async def check_history(client: Any, story: Story) -> None:
    seen: list[tuple[int, str]] = []
    cursor: str | None = None
    while True:
        extra = {"cursor": cursor} if cursor else {}
        history = await call(client, "mnote.page.history", **page_args(limit=7, **extra))
        seen += [(entry["revision"], entry["runId"]) for entry in history["result"]["entries"]]
        cursor = history["result"].get("nextCursor")
        if cursor is None:
            break
    expected = sorted(story.runs.items(), reverse=True)
    assert [s for s in seen if s[0] in story.runs] == expected, "every write once, newest first"


def undo_oracle(story: Story, run: str, current: list[dict[str, Any]]) -> tuple[str, Any]:
    """("conflict", None), ("not_found", None) for a run that wrote nothing to the page (issue 30), or
    ("ok", (blocks before the run, per touched id), the page now)."""
    mine = sorted(r for r, who in story.runs.items() if who == run)
    if not mine:
        return "not_found", None
    first_touch: dict[str, int] = {}
    for revision in mine:
        for block_id in story.touched[revision]:
            first_touch.setdefault(block_id, revision)
    for block_id, first in first_touch.items():
        if any(r not in mine and r > first and block_id in story.touched[r] for r in story.runs):
            return "conflict", None
    now = flat(current)
    expected = dict(now)
    for block_id, first in first_touch.items():
        before = flat(story.pages[first - 1])
        if block_id in before:
            expected[block_id] = before[block_id]
        else:
            expected.pop(block_id, None)
    for parent, _ in expected.values():
        depth, node = 1, parent
        while node is not None:
            if node not in expected or expected[node][1]["type"] not in NESTING:
                return "conflict", None
            depth, node = depth + 1, expected[node][0]
        if depth > MAX_DEPTH:
            return "conflict", None
    return "ok", (expected, set(first_touch))


async def run(db: Path, mode: str, data: st.DataObject) -> None:
    story = Story()
    async with connect(db, mode) as client:
        seeded = await call(client, "mnote.page.save", **write_args("seed", content=TREE, runId="run_seed"))
        model = Model.of(TREE)
        story.wrote(seeded, "run_seed", model.blocks(), {op["blockId"] for op in seeded["result"]["diff"]})
        await edits(client, data, model, story, "a", data.draw(st.integers(1, 8), label="steps"))
        await check_history(client, story)
        for attempt in range(2):
            target = data.draw(st.sampled_from(sorted(story.pages)), label="toRevision")
            reverted = await call(
                client,
                "mnote.page.revert",
                **write_args(f"rev{attempt}", toRevision=target, runId=f"revert{attempt}"),
            )
            assert reverted["ok"], reverted["error"]
            assert await page_blocks(client) == story.pages[target], f"revert to {target}"
            model = Model.of(story.pages[target])
            story.wrote(reverted, f"revert{attempt}", model.blocks(), set(reverted["result"]["blockIds"]))
            await edits(
                client, data, model, story, f"b{attempt}_", data.draw(st.integers(0, 4), label="more")
            )
        await check_history(client, story)
        victim = data.draw(st.sampled_from(RUNS), label="undo run")
        before = await page_blocks(client)
        verdict, expected = undo_oracle(story, victim, before)
        undone = await call(client, "mnote.page.revert", **write_args("undo", undoRunId=victim, runId="undo"))
        after = await page_blocks(client)
    if verdict in ("conflict", "not_found"):
        assert undone["error"]["code"] == f"mnote_tool_{verdict}", undone
        assert after == before
        return
    assert undone["ok"], (victim, undone["error"])
    blocks, touched = expected
    assert flat(after) == blocks, "each block the run touched as before it did; every other as it is"
    old_order, new_order = sibling_order(before), sibling_order(after)
    for parent, ids in old_order.items():
        kept = [b for b in ids if b not in touched and b in blocks]
        assert [b for b in new_order.get(parent, []) if b in kept] == kept, (
            "untouched siblings keep their order"
        )


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_history_and_revert_agree_with_the_model(tmp_path: Path, mode: str) -> None:
    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        db = seeded_store(tmp_path / f"{uuid.uuid4().hex}.db")
        anyio.run(run, db, mode, data)

    check()
