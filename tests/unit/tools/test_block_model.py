"""Model-based: random block operations through the tools give the page a plain model predicts.

The model is a dictionary of nodes and ordered child lists, written from the rules in docs/kernel.md
("Block tools"), independent of the kernel's tree code. Each step is drawn from the model's current
state (so most steps hit real blocks, some hit missing ones or impossible targets) and sent through
`mcp.Client`; the outcome (done, unchanged, not found, invalid), the ids the result names and the
whole page afterwards must match the model.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.helpers import MODES, call, connect, page_args, seeded_store, write_args
from tests.unit.tools.test_block import TREE

MAX_DEPTH = 8
PROPS = {"heading": {"level"}, "todo": {"checked"}, "code": {"language"}, "callout": {"icon"}}
DEFAULTS: dict[str, dict[str, Any]] = {"heading": {"level": 1}, "todo": {"checked": False}}
NESTING = {"bulleted_list", "numbered_list", "todo"}
TYPES = [
    "paragraph",
    "heading",
    "bulleted_list",
    "numbered_list",
    "todo",
    "quote",
    "code",
    "callout",
    "divider",
]


class RefusedError(Exception):
    """The model says the tool must refuse, with this error code."""

    def __init__(self, code: str) -> None:
        self.code = code


@dataclass
class Model:
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    children: dict[str | None, list[str]] = field(default_factory=lambda: {None: []})
    parent: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def of(cls, blocks: list[dict[str, Any]]) -> Model:
        model = cls()
        model.add(blocks, None, 0)
        return model

    def add(self, blocks: list[dict[str, Any]], parent: str | None, index: int) -> list[str]:
        added: list[str] = []
        for offset, block in enumerate(blocks):
            bid = block["id"]
            self.nodes[bid] = {
                "type": block["type"],
                "text": block.get("text", ""),
                "props": _canonical(block),
            }
            self.children[bid] = []
            self.parent[bid] = parent
            self.children[parent].insert(index + offset, bid)
            added.append(bid)
            added.extend(self.add(block.get("children", []), bid, 0))
        return added

    def blocks(self, parent: str | None = None) -> list[dict[str, Any]]:
        out = []
        for bid in self.children[parent]:
            node = self.nodes[bid]
            block: dict[str, Any] = {"id": bid, "type": node["type"], "text": node["text"]}
            if node["props"]:
                block["props"] = dict(node["props"])
            if self.children[bid]:
                block["children"] = self.blocks(bid)
            out.append(block)
        return out

    def subtree(self, bid: str) -> list[str]:
        return [bid, *(d for child in self.children[bid] for d in self.subtree(child))]

    def depth(self, bid: str | None) -> int:
        return 0 if bid is None else 1 + self.depth(self.parent[bid])

    def height(self, blocks: list[dict[str, Any]]) -> int:
        return max((1 + self.height(b.get("children", [])) for b in blocks), default=0)

    def target(self, p: dict[str, Any], moving: str | None) -> tuple[str | None, int]:
        """(parent, index) where blocks go, after the moving block (if any) has been taken out."""
        parent, after = p.get("parentId"), p.get("afterBlockId")
        if parent is not None:
            if parent not in self.nodes:
                raise RefusedError("not_found")
            if moving is not None and parent in self.subtree(moving):
                raise RefusedError("invalid_argument")
            if self.nodes[parent]["type"] not in NESTING:
                raise RefusedError("invalid_argument")
        if after is not None:
            if after not in self.nodes:
                raise RefusedError("not_found")
            if moving is not None and after in self.subtree(moving):
                raise RefusedError("invalid_argument")
            if parent is not None and self.parent[after] != parent:
                raise RefusedError("invalid_argument")
            return self.parent[after], -1
        return parent, 0 if p.get("position", "start") == "start" else -2

    def place(self, parent: str | None, index: int, after: str | None) -> int:
        siblings = self.children[parent]
        if index == -1:
            assert after is not None
            return siblings.index(after) + 1
        return len(siblings) if index == -2 else 0

    def insert(self, p: dict[str, Any]) -> list[str]:
        blocks = p["blocks"]
        if not blocks:  # an anchor makes `position` moot: the tools drop it
            raise RefusedError("invalid_argument")
        if any(block["id"] in self.nodes for block in blocks):
            raise RefusedError("invalid_argument")
        parent, index = self.target(p, None)
        if self.depth(parent) + self.height(blocks) > MAX_DEPTH:
            raise RefusedError("invalid_argument")
        return self.add(blocks, parent, self.place(parent, index, p.get("afterBlockId")))

    def update(self, p: dict[str, Any]) -> list[str]:
        given = {k: v for k, v in p.items() if k in ("type", "text", "props") and v not in (None, {})}
        if not given:
            raise RefusedError("invalid_argument")
        bid = p["blockId"]
        if bid not in self.nodes:
            raise RefusedError("not_found")
        node = self.nodes[bid]
        kind = given.get("type", node["type"])
        if self.children[bid] and kind not in NESTING:
            raise RefusedError("invalid_argument")
        props = dict(node["props"])
        if kind != node["type"]:
            props = {k: v for k, v in props.items() if k in PROPS.get(kind, set())}
        props = {k: v for k, v in {**props, **given.get("props", {})}.items() if v is not None}
        if set(props) - PROPS.get(kind, set()):
            raise RefusedError("invalid_argument")
        text = given.get("text", node["text"] if kind != "divider" else "")
        if kind == "divider" and text:
            raise RefusedError("invalid_argument")
        updated = {"type": kind, "text": text, "props": {**DEFAULTS.get(kind, {}), **props}}
        if updated == node:
            return []
        self.nodes[bid] = updated
        return [bid]

    def delete(self, p: dict[str, Any]) -> list[str]:
        ids = p["blockIds"]
        if not ids or len(set(ids)) != len(ids):
            raise RefusedError("invalid_argument")
        if any(bid not in self.nodes for bid in ids):
            raise RefusedError("not_found")
        gone = {d for bid in ids for d in self.subtree(bid)}
        order = [bid for bid in self.walk() if bid in gone]
        for bid in order:
            self.children[self.parent[bid]].remove(bid)
            del self.nodes[bid], self.parent[bid]
        return order

    def move(self, p: dict[str, Any]) -> list[str]:
        bid = p["blockId"]
        if bid not in self.nodes:
            raise RefusedError("not_found")
        parent, index = self.target(p, bid)
        if self.depth(parent) + self.height(self.blocks_of(bid)) > MAX_DEPTH:
            raise RefusedError("invalid_argument")
        before = self.blocks()
        old_parent = self.parent[bid]
        self.children[old_parent].remove(bid)
        at = self.place(parent, index, p.get("afterBlockId"))
        self.children[parent].insert(at, bid)
        self.parent[bid] = parent
        return [] if self.blocks() == before else [bid]

    def blocks_of(self, bid: str) -> list[dict[str, Any]]:
        return [b for b in self._all(self.blocks()) if b["id"] == bid]

    def _all(self, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [x for b in blocks for x in (b, *self._all(b.get("children", [])))]

    def walk(self) -> list[str]:
        return [b["id"] for b in self._all(self.blocks())]


def _canonical(block: dict[str, Any]) -> dict[str, Any]:
    return {**DEFAULTS.get(block["type"], {}), **block.get("props", {})}


TEXT = st.text(alphabet="ab #-*\n", max_size=6)


def new_block(draw: Any, fresh: str, depth: int = 1) -> dict[str, Any]:
    kind = draw(st.sampled_from(TYPES))
    block: dict[str, Any] = {"id": fresh, "type": kind, "text": "" if kind == "divider" else draw(TEXT)}
    if kind == "heading":
        block["props"] = {"level": draw(st.integers(1, 6))}
    elif kind == "todo":
        block["props"] = {"checked": draw(st.booleans())}
    elif kind == "code" and draw(st.booleans()):
        block["props"] = {"language": "py"}
    if kind in NESTING and depth < 3 and draw(st.booleans()):
        block["children"] = [new_block(draw, f"{fresh}c", depth + 1)]
    return block


def placement(draw: Any, pick: Any) -> dict[str, Any]:
    chosen: dict[str, Any] = draw(
        st.sampled_from(
            [
                {},
                {"position": "end"},
                {"afterBlockId": pick()},
                {"parentId": pick()},
                {"parentId": pick(), "position": "end"},
                {"parentId": pick(), "afterBlockId": pick()},
                {"afterBlockId": pick(), "position": "start"},
            ]
        )
    )
    return chosen


def operation(draw: Any, model: Model, step: int) -> tuple[str, dict[str, Any]]:
    def pick() -> str:
        block_id: str = draw(st.sampled_from([*model.walk(), "ghost"]))
        return block_id

    kind = draw(st.sampled_from(["insert", "update", "delete", "move"]))
    if kind == "insert":
        count = draw(st.integers(0 if step % 7 == 3 else 1, 2))
        blocks = [new_block(draw, f"n{step}_{i}") for i in range(count)]
        if blocks and draw(st.integers(0, 9)) == 0:
            blocks[0]["id"] = pick()  # an id already on the page (or "ghost", which is fine)
        return "insert", {"blocks": blocks, **placement(draw, pick)}
    if kind == "update":
        fields = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "type": st.sampled_from(TYPES),
                    "text": TEXT,
                    "props": st.sampled_from(
                        [
                            {},
                            {"level": 2},
                            {"level": None},
                            {"checked": True},
                            {"language": "rs"},
                            {"icon": "★"},
                        ]
                    ),
                },
            )
        )
        return "update", {"blockId": pick(), **fields}
    if kind == "delete":
        return "delete", {"blockIds": draw(st.lists(st.builds(pick), min_size=0, max_size=2))}
    return "move", {"blockId": pick(), **placement(draw, pick)}


def predict(model: Model, kind: str, args: dict[str, Any]) -> tuple[str, list[str]]:
    """("ok", the ids the result must name) after applying the step to the model, or (error code, [])."""
    try:
        return "ok", getattr(model, kind)(args)
    except RefusedError as refusal:
        return refusal.code, []


async def run(db: Path, mode: str, data: st.DataObject) -> None:
    model = Model.of(TREE)
    async with connect(db, mode) as client:
        seeded = await call(client, "mnote.page.save", **write_args("seed", content=TREE))
        revision = seeded["result"]["revision"]
        for step in range(data.draw(st.integers(1, 12), label="steps")):
            kind, args = operation(data.draw, model, step)
            envelope = await call(client, f"mnote.block.{kind}", **write_args(f"k{step}", **args))
            outcome, expected = predict(model, kind, args)
            if outcome != "ok":
                assert not envelope["ok"], (kind, args, "the model refuses this")
                assert envelope["error"]["code"] == f"mnote_tool_{outcome}", (kind, args, envelope["error"])
            else:
                assert envelope["ok"], (kind, args, envelope["error"])
                assert envelope["result"]["blockIds"] == expected, (kind, args)
                revision += 1 if expected else 0
                assert envelope["result"]["revision"] == revision
            page = await call(client, "mnote.page.get", **page_args())
            assert page["result"]["blocks"] == model.blocks(), (kind, args)
            assert page["result"]["revision"] == revision


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_tools_agree_with_a_plain_model_of_the_block_tree(tmp_path: Path, mode: str) -> None:
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        db = seeded_store(tmp_path / f"{uuid.uuid4().hex}.db")
        anyio.run(run, db, mode, data)

    check()
