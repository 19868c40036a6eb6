"""`python -m bench.agenttasks [--before DIR] [--out FILE] [--only NAME ...]`: every task on every
server, one table.

Needs Hermes in `.ci/hermes` and `(cd bench/node && npm install)` (server-filesystem). `--before DIR`
runs another release's tree (a `git worktree` of it) beside this checkout, each mnote on a store of its
own seeded alike, in the same run. Bytes do not depend on the machine's load; they are the same run
after run (the corpus is seeded).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

from bench.agenttasks.corpus import corpus, seed_mnote, write_files
from bench.agenttasks.session import BEFORE, FILESYSTEM, MNOTE, Agent, Servers, servers
from bench.agenttasks.tasks import TASKS, Place, Run, Task, reset


def run_side(srv: Servers, key: str, run: Run, place: Place) -> dict[str, Any]:
    agents: list[Agent] = []

    def new() -> Agent:
        agent = srv.agent(key)
        agents.append(agent)
        return agent

    try:
        done, error = run(new, place), ""
    except Exception:  # reported in the table, never hidden
        done, error = False, traceback.format_exc(limit=3)
    calls = sum(agent.tally.calls for agent in agents)
    requests = sum(agent.tally.calls + 1 for agent in agents)
    results = sum(agent.tally.result_bytes for agent in agents)
    definitions = requests * srv.definition_bytes(key)
    # A host that defers tools sends, at best, the definitions of the tools the task calls.
    used = sorted({tool for agent in agents for tool, _ in agent.tally.log})
    deferred = requests * srv.definition_bytes(key, used)
    return {
        "calls": calls,
        "requests": requests,
        "definitionBytes": definitions,
        "resultBytes": results,
        "readBytes": definitions + results,
        "toolsUsed": used,
        "deferredDefinitionBytes": deferred,
        "deferredReadBytes": deferred + results,
        "writtenBytes": sum(agent.tally.written_bytes for agent in agents),
        "cutByHermes": sum(agent.tally.cut for agent in agents),
        "limited": sum(agent.tally.limited for agent in agents),
        "perCall": [entry for agent in agents for entry in agent.tally.log],
        "done": done,
        **({"error": error} if error else {}),
    }


def run_task(srv: Servers, task: Task, places: dict[str, Place]) -> dict[str, Any]:
    row: dict[str, Any] = {"task": task.name, "asks": task.asks}
    for title in task.reset:
        reset(places[MNOTE], title)
    for side, place in places.items():
        row[side] = run_side(srv, side, task.filesystem if side == FILESYSTEM else task.mnote, place)
    return row


def _kb(n: int) -> str:
    return f"{n / 1000:,.1f}"


def _ratio(a: int, b: int) -> str:
    return f"{a / max(1, b):.2f}"


def table(figures: dict[str, Any]) -> str:
    d = figures["definitions"]
    sides = [side for side in (MNOTE, BEFORE, FILESYSTEM) if side in d]
    names = {MNOTE: "mnote", BEFORE: "before", FILESYSTEM: "fs"}
    said = "; ".join(
        f"{names[side]} {d[side]['bytes']:,} bytes for {d[side]['tools']} tools ({d[side]['perTool']:,} a tool)"
        for side in sides
    )
    lines = [
        f"Definitions, as Hermes sends them with every request: {said}; a tool, mnote against the"
        f" filesystem server {d['ratioPerTool']:.2f}x, a request {d['ratioPerRequest']:.2f}x.",
        "",
    ]
    order = " / ".join(names[side] for side in sides)
    ratios = [side for side in sides if side != FILESYSTEM]
    ratio_heads = " | ".join(f"{names[side]}/fs" for side in ratios)
    lines += [
        f"| task | calls ({order}) | model reads, every definition, KB ({order}) | {ratio_heads} "
        f"| only the tools used, KB ({order}) | {ratio_heads} | of which results, KB ({order}) "
        f"| {ratio_heads} | done ({order}) |",
        "|---|---:|---:|"
        + "---:|" * len(ratios)
        + "---:|"
        + "---:|" * len(ratios)
        + "---:|"
        + "---:|" * len(ratios)
        + "---|",
    ]
    for row in figures["tasks"]:
        fs = row[FILESYSTEM]
        cells = [
            row["task"],
            " / ".join(str(row[side]["calls"]) for side in sides),
            " / ".join(_kb(row[side]["readBytes"]) for side in sides),
            *(_ratio(row[side]["readBytes"], fs["readBytes"]) for side in ratios),
            " / ".join(_kb(row[side]["deferredReadBytes"]) for side in sides),
            *(_ratio(row[side]["deferredReadBytes"], fs["deferredReadBytes"]) for side in ratios),
            " / ".join(_kb(row[side]["resultBytes"]) for side in sides),
            *(_ratio(row[side]["resultBytes"], fs["resultBytes"]) for side in ratios),
            " / ".join(
                ("✓" if row[side]["done"] else "✗")
                + (f" (Hermes cut {row[side]['cutByHermes']})" if row[side]["cutByHermes"] else "")
                for side in sides
            ),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.agenttasks", description=__doc__)
    parser.add_argument("--before", type=Path, help="another release's tree, run beside this checkout")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    parser.add_argument("--only", nargs="*", help="run only the tasks with these names")
    options = parser.parse_args(argv)
    tasks = [task for task in TASKS if not options.only or task.name in options.only]
    with tempfile.TemporaryDirectory(prefix="agenttasks-") as folder:
        base = Path(folder)
        pages = corpus()
        dbs = {MNOTE: base / "mnote.db", **({BEFORE: base / "before.db"} if options.before else {})}
        for db in dbs.values():
            seed_mnote(db, pages)
        notes = base / "notes"
        write_files(notes, pages)
        by_title = {page.title: page for page in pages}
        every = tuple(dbs.values())
        places = {
            **{side: Place(db, notes, by_title, every) for side, db in dbs.items()},
            FILESYSTEM: Place(dbs[MNOTE], notes, by_title, every),
        }
        with servers(base, dbs, notes, options.before) as srv:
            definitions = {
                side: {"bytes": srv.definition_bytes(side), "tools": len(srv.definitions[side])}
                for side in places
            }
            for entry in definitions.values():
                entry["perTool"] = entry["bytes"] // entry["tools"]
            rows = [run_task(srv, task, places) for task in tasks]
    figures: dict[str, Any] = {
        "definitions": {
            **definitions,
            "ratioPerTool": definitions[MNOTE]["perTool"] / definitions[FILESYSTEM]["perTool"],
            "ratioPerRequest": definitions[MNOTE]["bytes"] / definitions[FILESYSTEM]["bytes"],
        },
        "pages": len(pages),
        "before": str(options.before) if options.before else None,
        "tasks": rows,
    }
    figures["limitedCalls"] = sum(row["mnote"]["limited"] for row in rows)
    print(table(figures))
    print(f"\nCalls limited at the default limits (mnote_tool_rate_limited): {figures['limitedCalls']}")
    for row in rows:
        for side in places:
            if row.get(side, {}).get("error"):
                print(f"\n{row['task']} ({side}):\n{row[side]['error']}", file=sys.stderr)
    if options.out:
        options.out.parent.mkdir(parents=True, exist_ok=True)
        options.out.write_text(json.dumps(figures, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
