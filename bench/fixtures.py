"""The data each target serves: a mnote store with a 50-block page (and 100/1,000/10,000-block pages
for the scaling runs), and a server-memory graph holding about as much text as the 50-block page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mnote_mcp.kernel.sqlite.opening import open_store
from mnote_mcp.kernel.store.fixtures import load_fixture

WORKSPACE, ACTOR = "ws_bench", "bench_user"
PAGE = "doc_50"
SCALING = (100, 1_000, 10_000)
_KINDS = ("paragraph", "heading", "bulleted_list", "todo", "quote")


def blocks(count: int) -> list[dict[str, Any]]:
    """A realistic mix: headings every tenth block, list items and to-dos, sentences of prose."""
    out: list[dict[str, Any]] = []
    for n in range(count):
        kind = "heading" if n % 10 == 0 else _KINDS[n % len(_KINDS)]
        block: dict[str, Any] = {
            "id": f"b{n}",
            "type": kind,
            "text": f"Block {n}: the plan for step {n} of the project.",
        }
        if kind == "heading":
            block["props"] = {"level": 2}
        if kind == "todo":
            block["props"] = {"checked": n % 2 == 0}
        out.append(block)
    return out


def page_id(count: int) -> str:
    return f"doc_{count}"


def seed_mnote(db: Path, sizes: tuple[int, ...] = (50, *SCALING)) -> None:
    fixture = {
        "workspaces": [
            {
                "id": WORKSPACE,
                "name": "Benchmarks",
                "members": [{"actorId": ACTOR, "role": "editor"}],
                "pages": [
                    {"id": page_id(size), "title": f"{size} blocks", "blocks": blocks(size)} for size in sizes
                ],
            }
        ]
    }
    store = open_store(db)
    try:
        load_fixture(store, fixture)
    finally:
        store.close()


def seed_memory(path: Path, characters: int) -> None:
    """server-memory's JSON-lines file: entities with observations totalling about `characters`."""
    lines, total, n = [], 0, 0
    while total < characters:
        observations = [f"Observation {n}.{k}: the plan for step {n} of the project." for k in range(5)]
        lines.append(
            json.dumps(
                {"type": "entity", "name": f"entity_{n}", "entityType": "step", "observations": observations}
            )
        )
        total += sum(len(o) for o in observations)
        n += 1
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
