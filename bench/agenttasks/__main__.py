"""`python -m bench.agenttasks [--out FILE] [--only NAME ...]`: every task on both servers, one table.

Needs Hermes in `.ci/hermes` and `(cd bench/node && npm install)` (server-filesystem). Bytes do not
depend on the machine's load; they are the same run after run (the corpus is seeded).
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
from bench.agenttasks.session import FILESYSTEM, MNOTE, Agent, Servers, servers
from bench.agenttasks.tasks import TASKS, Place, Run, Task, reset

SIDES = {"mnote": MNOTE, "filesystem": FILESYSTEM}


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
    return {
        "calls": calls,
        "requests": requests,
        "definitionBytes": definitions,
        "resultBytes": results,
        "readBytes": definitions + results,
        "writtenBytes": sum(agent.tally.written_bytes for agent in agents),
        "cutByHermes": sum(agent.tally.cut for agent in agents),
        "limited": sum(agent.tally.limited for agent in agents),
        "perCall": [entry for agent in agents for entry in agent.tally.log],
        "done": done,
        **({"error": error} if error else {}),
    }


def run_task(srv: Servers, task: Task, place: Place) -> dict[str, Any]:
    row: dict[str, Any] = {"task": task.name, "asks": task.asks}
    for title in task.reset:
        reset(place, title)
    for side, key in SIDES.items():
        row[side] = run_side(srv, key, task.mnote if side == "mnote" else task.filesystem, place)
    return row


def _kb(n: int) -> str:
    return f"{n / 1000:,.1f}"


def table(figures: dict[str, Any]) -> str:
    d = figures["definitions"]
    lines = [
        f"Definitions, as Hermes sends them with every request: mnote {d['mnote']['bytes']:,} bytes for "
        f"{d['mnote']['tools']} tools ({d['mnote']['perTool']:,} per tool), the filesystem server "
        f"{d['filesystem']['bytes']:,} for {d['filesystem']['tools']} ({d['filesystem']['perTool']:,}); "
        f"per tool {d['ratioPerTool']:.2f}x.",
        "",
        "| task | calls (mnote / fs) | model reads, KB (mnote / fs) | ratio | of which results, KB | ratio | done (mnote / fs) |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for row in figures["tasks"]:
        m, f = row["mnote"], row["filesystem"]
        lines.append(
            f"| {row['task']} | {m['calls']} / {f['calls']} | {_kb(m['readBytes'])} / {_kb(f['readBytes'])} "
            f"| {m['readBytes'] / f['readBytes']:.2f} | {_kb(m['resultBytes'])} / {_kb(f['resultBytes'])} "
            f"| {m['resultBytes'] / max(1, f['resultBytes']):.2f} "
            f"| {'✓' if m['done'] else '✗'} / {'✓' if f['done'] else '✗'}"
            f"{' (Hermes cut ' + str(f['cutByHermes']) + ')' if f['cutByHermes'] else ''} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.agenttasks", description=__doc__)
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    parser.add_argument("--only", nargs="*", help="run only the tasks with these names")
    options = parser.parse_args(argv)
    tasks = [task for task in TASKS if not options.only or task.name in options.only]
    with tempfile.TemporaryDirectory(prefix="agenttasks-") as folder:
        base = Path(folder)
        pages = corpus()
        db, notes = base / "mnote.db", base / "notes"
        seed_mnote(db, pages)
        write_files(notes, pages)
        place = Place(db, notes, {page.title: page for page in pages})
        with servers(base, db, notes) as srv:
            definitions = {
                side: {"bytes": srv.definition_bytes(key), "tools": len(srv.definitions[key])}
                for side, key in SIDES.items()
            }
            for entry in definitions.values():
                entry["perTool"] = entry["bytes"] // entry["tools"]
            rows = [run_task(srv, task, place) for task in tasks]
    ratio = definitions["mnote"]["perTool"] / definitions["filesystem"]["perTool"]
    figures: dict[str, Any] = {
        "definitions": {**definitions, "ratioPerTool": ratio},
        "pages": len(pages),
        "tasks": rows,
    }
    figures["limitedCalls"] = sum(row["mnote"]["limited"] for row in rows)
    print(table(figures))
    print(f"\nCalls limited at the default limits (mnote_tool_rate_limited): {figures['limitedCalls']}")
    for row in rows:
        for side in SIDES:
            if row.get(side, {}).get("error"):
                print(f"\n{row['task']} ({side}):\n{row[side]['error']}", file=sys.stderr)
    if options.out:
        options.out.parent.mkdir(parents=True, exist_ok=True)
        options.out.write_text(json.dumps(figures, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
