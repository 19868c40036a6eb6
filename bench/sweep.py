"""`python -m bench.sweep [--before DIR] [--only TEXT] [--quick]`: the hostile-input sweep's attacks
(`tests/support/sweep.py`, issue 30), each in a process of its own (`bench/sweepworker.py`), against this
checkout and, with `--before`, the checkout DIR (the code before a fix) right after it: the longest
stretch of the event loop thread's own CPU during each attack, side by side, and how long it took.

Both checkouts get the same attacks, made by this checkout's declarations, on the same stage (each
checkout's own `mnote-mcp seed` loads the sweep's fixture). An attack that outgrows the worker's
address space cap, or its time limit, is reported as such. Figures for docs/security.md; the loop CPU
figure does not depend on how busy the machine is, the times do.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.targets import ROOT
from tests.support.sweep import Attack, all_attacks, stage_fixture

WORKER = ROOT / "bench" / "sweepworker.py"
TIME_LIMIT = 120.0  # per attack; the call timeout of the servers is 60 s
QUICK = (
    "mnote.page.edit_text:declared-0-on-long-page",
    "mnote.page.get:example-1-on-long-page",
    "subscriptions/listen:many-uris",
    "resources/read:long-page",
    "mnote.block.move:example-2-on-wide-page",
)


def _stage(root: Path, folder: Path, fixture: Path) -> Path:
    db = folder / "stage.db"
    subprocess.run(
        [sys.executable, "-m", "mnote_mcp", "seed", "--db", str(db), str(fixture)],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root), "MNOTE_LOG_LEVEL": "warning"},
        check=True,
        capture_output=True,
    )
    return db


def _run(root: Path, stage: Path, attack: Attack, folder: Path) -> dict[str, Any]:
    spec = folder / "attack.json"
    spec.write_text(
        json.dumps({**asdict(attack), "prior": [list(step) for step in attack.prior]}), encoding="utf-8"
    )
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, str(WORKER), str(stage), str(spec)],
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(root), "MNOTE_LOG_LEVEL": "error"},
            capture_output=True,
            text=True,
            timeout=TIME_LIMIT,
        )
    except subprocess.TimeoutExpired:
        return {"failed": f"no answer within {TIME_LIMIT:.0f} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        tail = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        return {"failed": tail[0][:200], "took_s": time.perf_counter() - started}
    return dict(json.loads(lines[-1]))


def _cell(answer: dict[str, Any]) -> str:
    if "failed" in answer:
        return f"failed: {answer['failed']}"
    return f"{answer['loop_cpu_ms']:.0f} ms ({answer['took_s']:.2f} s)"


def run(before: Path | None, only: str | None, quick: bool) -> dict[str, Any]:
    attacks = [
        attack
        for attack in all_attacks()
        if (not quick or attack.id in QUICK) and (only is None or only in attack.id)
    ]
    roots = {"after": ROOT, **({"before": before} if before is not None else {})}
    results: dict[str, Any] = {"load_average_start": os.getloadavg(), "attacks": {}}
    with tempfile.TemporaryDirectory(prefix="mnote-sweep-bench-") as tmp:
        folder = Path(tmp)
        fixture = stage_fixture(folder / "stage.json")
        stages = {}
        for label, root in roots.items():
            (folder / label).mkdir()
            stages[label] = _stage(root, folder / label, fixture)
        for attack in attacks:
            row = {label: _run(root, stages[label], attack, folder) for label, root in roots.items()}
            results["attacks"][attack.id] = row
            print(attack.id, *(f"{label}: {_cell(answer)}" for label, answer in row.items()), flush=True)
    results["load_average_end"] = os.getloadavg()
    results["longest"] = {
        label: max(
            (row[label].get("loop_cpu_ms", 0.0), attack_id) for attack_id, row in results["attacks"].items()
        )
        for label in roots
    }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.sweep", description=__doc__)
    parser.add_argument("--before", type=Path, help="another checkout: the code before a fix")
    parser.add_argument("--only", help="only the attacks whose id holds this")
    parser.add_argument("--quick", action="store_true", help="four attacks, to try the bench out")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "sweep.json")
    args = parser.parse_args()
    results = run(args.before, args.only, args.quick)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2), encoding="utf-8")
    print(json.dumps(results["longest"]))


if __name__ == "__main__":
    main()
