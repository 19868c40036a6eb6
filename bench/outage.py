"""`python -m bench.attacks outage [--before DIR] [--cycles N]`: a PostgreSQL outage under a running
replica (issue 23), on this checkout and, with `--before`, on another one (the code before the fix:
`git archive COMMIT | tar -x -C DIR`), one after the other on one PostgreSQL (the `pgserver` wheel's).

Per checkout: a `serve --transport http --stateless` replica on a fresh database, warmed up; then N
cycles of: postgres stopped (a fast shutdown); 4 writes and 4 reads at once, then 2 of each one after
the other (the SDK client, each call given up after 45 s: `no answer`); `/readyz`; postgres started; at
once one read and one write. Reported: the time each call took to answer with the database down (p50
and max, reads and writes), how many took 10 s or more (a hang: the busy timeout is 30 s), the causes
answered, and whether the first read and write after each restart succeeded (and how long they took).

Figures for docs/deploy.md. The machine may be shared: the times are noisy, the counts are not.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import httpx2

from tests.support.helpers import FIXTURE, ROOT, call, page_args, write_args
from tests.support.http_helpers import http_server, mcp_http_client, write_tokens
from tests.support.postgres import PgServer, seeded_database, start, start_server, stop

TOKENS: dict[str, dict[str, Any]] = {"tok-a": {"actorId": "user_editor"}}
HANG_S = 10.0
HTTP_TIMEOUT_S = 60.0
# A call still unanswered after this is given up (`no answer`): the HTTP client's timeout does not
# bound it (the SDK's client keeps waiting on the answer's event stream), and before the fix the first
# call after a restart never answered.
CALL_CAP_S = 45.0


async def timed(client: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    started = time.monotonic()
    try:
        with anyio.fail_after(CALL_CAP_S):
            envelope = await call(client, tool, **arguments)
        error = envelope["error"] or {}
        outcome = "ok" if envelope["ok"] else (error.get("details") or {}).get("cause", error.get("code"))
    except Exception as exc:  # the client's own timeout, or CALL_CAP_S: no answer at all
        outcome = f"no answer ({type(exc).__name__})"
    kind = "write" if tool != "mnote.page.get" else "read"
    return {"kind": kind, "seconds": round(time.monotonic() - started, 3), "outcome": outcome}


async def one_checkout(pg: PgServer, root: Path, cycles: int, tmp: Path) -> dict[str, Any]:
    url = seeded_database(pg, FIXTURE)
    tokens = write_tokens(tmp / f"tokens-{os.getpid()}-{time.monotonic_ns()}.json", TOKENS)
    down: list[dict[str, Any]] = []
    after: list[dict[str, Any]] = []
    ready: list[int] = []
    with http_server(url, "--stateless", "--auth-file", str(tokens), root=root) as server:
        async with mcp_http_client(server.url, "tok-a", http_timeout=HTTP_TIMEOUT_S) as client:
            for _ in range(3):
                await call(client, "mnote.page.get", **page_args())
            for cycle in range(cycles):
                stop(pg)
                try:
                    batch: list[dict[str, Any]] = []

                    async def one(tool: str, arguments: dict[str, Any], into: list[dict[str, Any]]) -> None:
                        into.append(await timed(client, tool, arguments))

                    async with anyio.create_task_group() as group:
                        for n in range(4):
                            key = f"down-{cycle}-{n}"
                            group.start_soon(
                                one, "mnote.page.update_title", write_args(key, title=key), batch
                            )
                            group.start_soon(one, "mnote.page.get", page_args(), batch)
                    for n in range(2):
                        key = f"down-{cycle}-seq-{n}"
                        batch.append(
                            await timed(client, "mnote.page.update_title", write_args(key, title=key))
                        )
                        batch.append(await timed(client, "mnote.page.get", page_args()))
                    down += batch
                    async with httpx2.AsyncClient(timeout=HTTP_TIMEOUT_S) as http:
                        ready.append((await http.get(f"{server.url}/readyz")).status_code)
                finally:
                    start(pg)
                after.append(await timed(client, "mnote.page.get", page_args()))
                key = f"back-{cycle}"
                after.append(await timed(client, "mnote.page.update_title", write_args(key, title=key)))
    summary: dict[str, Any] = {}
    for kind in ("read", "write"):
        times = [answer["seconds"] for answer in down if answer["kind"] == kind]
        summary[f"{kind}s_down"] = {
            "calls": len(times),
            "p50_s": round(statistics.median(times), 3),
            "max_s": max(times),
            "hangs": sum(1 for seconds in times if seconds >= HANG_S),
        }
    summary["outcomes_down"] = dict(Counter(answer["outcome"] for answer in down))
    summary["readyz_down"] = ready
    summary["first_calls_after_restart"] = after
    summary["first_calls_after_restart_ok"] = f"{sum(a['outcome'] == 'ok' for a in after)}/{len(after)}"
    return summary


async def run(before: Path | None, cycles: int) -> dict[str, Any]:
    results: dict[str, Any] = {"load_average_start": os.getloadavg(), "cycles": cycles}
    directory = tempfile.mkdtemp(prefix="mnote-outage-")
    try:
        for pg in start_server():
            for label, root in (("before", before), ("after", ROOT)):
                if root is not None:
                    results[label] = await one_checkout(pg, root, cycles, Path(directory))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    results["load_average_end"] = os.getloadavg()
    return results


def main(argv: list[str]) -> dict[str, Any]:
    """`[--before DIR] [--cycles N]`; the figures are also written to bench/results/outage.json."""
    before = Path(argv[argv.index("--before") + 1]).resolve() if "--before" in argv else None
    cycles = int(argv[argv.index("--cycles") + 1]) if "--cycles" in argv else 3
    figures = anyio.run(run, before, cycles)
    out = ROOT / "bench" / "results" / "outage.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:]), indent=2))
