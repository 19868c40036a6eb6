"""`python -m bench.neighbours [--before DIR] [--quick] [--window S]`: noisy neighbours (issue 32).

One token (the attacker, actor `attacker`) runs each attack of the suite against a real
`mnote-mcp serve --transport http --stateless` (default flags) while another token (the tenant, actor
`tenant`, in a workspace of its own) reads and writes its small page: the tenant's p50 and p99 under
each attack against idle. The issue's goal: p50 within 2x idle and p99 within 5x under every attack.

The attacks, each from a process of its own (so that its client's work is not the tenant's client's),
each lane sending its call again as soon as it is answered, and 50 ms after a refusal whatever the
refusal says (a client that does not wait as told: a flood):

- `broad searches`: 16 `w*` searches in flight over 51,000 blocks of Zipf English (`w*` matches about
  15,000 of them) the attacker may read;
- `completion storm`: 20 `completion/complete` of a prompt's `workspaceId` in flight (the attacker may
  read 1,000 + 2,000 pages: each is the whole listing);
- `history of long runs`: 8 `mnote.page.history` calls in flight, 50 entries of one run of 120 writes
  of 100 blocks each on the attacker's own page;
- `many-id writes`: 4 `mnote.block.delete` calls in flight naming 60,000 block ids (660 KB) on the
  attacker's own page.

The tenant sends one call every 100 ms (a busy agent: 10 a second, within its limits), alternately `mnote.page.get` of its 5-block page and a
`mnote.block.update` of one of its blocks (an agent's pace, well within its own limits), for `--window`
seconds (25 by default) per measure. Stores: SQLite and PostgreSQL (the `pgserver` wheel's 16, no
`pg_trgm`), the same data in each. `--before DIR` (a checkout of the code before, e.g. `git worktree add
--detach DIR main`) runs the same servers from that code too, on the same databases, in the same run,
so before and after are side by side; the machine may be shared: compare within one run. Figures as
JSON on stdout and in bench/results/neighbours.json; a Markdown table on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bench.broadsearch import fixture as broad_fixture
from bench.postgres import new_database, start_postgres
from bench.rawclient import HttpPeer
from bench.run import _free_port, _wait_for_port
from mnote_mcp.kernel.databases.stores import open_store
from mnote_mcp.kernel.port import Command, Correlation
from mnote_mcp.kernel.store.fixtures import load_fixture
from tests.support.helpers import every_tool_env
from tests.support.http_helpers import serve_argv, write_tokens

ROOT = Path(__file__).resolve().parent.parent
TOKENS: dict[str, dict[str, Any]] = {
    "tok-attacker": {"actorId": "attacker"},
    "tok-tenant": {"actorId": "tenant"},
}
IDS = {"sessionId": "s", "runId": "r", "toolCallId": "c", "traceId": "t"}
RUN = "long_run"
BOGUS = [f"x_{n:06d}" for n in range(60_000)]
PACE = 0.1  # seconds between the tenant's calls: 10 a second, a busy agent's pace within its limits
RETRY = 0.05  # seconds an attacker lane waits after a refusal, whatever it was told

# name -> (lanes, method, params)
ATTACKS: dict[str, tuple[int, str, dict[str, Any]]] = {
    "broad searches": (
        16,
        "tools/call",
        {"name": "mnote.page.search", "arguments": {**IDS, "query": "w*", "limit": 20}},
    ),
    "completion storm": (
        20,
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "summarise_page"},
            "argument": {"name": "workspaceId", "value": "ws"},
        },
    ),
    "history of long runs": (
        8,
        "tools/call",
        {
            "name": "mnote.page.history",
            "arguments": {
                **IDS,
                "workspaceId": "ws_attacker",
                "documentId": "long",
                "filter": {"runId": RUN},
                "limit": 50,
            },
        },
    ),
    "many-id writes": (
        4,
        "tools/call",
        {
            "name": "mnote.block.delete",
            "arguments": {
                **IDS,
                "workspaceId": "ws_attacker",
                "documentId": "long",
                "blockIds": BOGUS,
                "idempotencyKey": "many",
                "dryRun": False,
            },
        },
    ),
}


def data(quick: bool) -> dict[str, Any]:
    """The broad-search fixture (1,000 pages x 50 blocks the attacker may read, the tenant's small
    page), the attacker's own workspace (its long page and 2,000 one-block pages) and the tenant."""
    fixture = broad_fixture(100, 0) if quick else broad_fixture(1000, 0)
    workspaces = [ws for ws in fixture["workspaces"] if ws["id"] != "ws_restricted"]
    for ws in workspaces:
        if ws["id"] == "ws_tenant":
            ws["members"] = [{"actorId": "tenant", "role": "editor"}]
    many = 200 if quick else 2_000
    workspaces.append(
        {
            "id": "ws_attacker",
            "members": [{"actorId": "attacker", "role": "editor"}],
            "pages": [
                {"id": "long", "title": "long", "blocks": _blocks("l", 100, 0)},
                *(
                    {
                        "id": f"n{n}",
                        "title": f"note {n}",
                        "blocks": [{"id": f"nb{n}", "type": "paragraph", "text": f"n {n}"}],
                    }
                    for n in range(many)
                ),
            ],
        }
    )
    return {"workspaces": workspaces}


def _blocks(prefix: str, count: int, round_: int) -> list[dict[str, Any]]:
    return [
        {"id": f"{prefix}{k}", "type": "paragraph", "text": f"round {round_} line {k} " * 4}
        for k in range(count)
    ]


def seed(location: str, quick: bool) -> None:
    """The data, then one run of writes on the attacker's long page (each replaces its 100 blocks)."""
    store = open_store(location)
    try:
        load_fixture(store, data(quick))
        for round_ in range(1, 20 if quick else 121):
            store.execute(
                Command(
                    name="page.body.save",
                    workspace_id="ws_attacker",
                    document_id="long",
                    actor_id="attacker",
                    correlation=Correlation("bench", RUN, f"c{round_}", "t"),
                    idempotency_key=f"long-{round_}",
                    dry_run=False,
                    payload={"mode": "replace", "content": _blocks("l", 100, round_)},
                )
            )
    finally:
        store.close()


# -- the attacker, a process of its own -----------------------------------------------------------


async def attacker(name: str, url: str) -> dict[str, int]:
    """Run attack `name` until stdin closes; its outcomes, counted."""
    lanes, method, params = ATTACKS[name]
    outcomes: Counter[str] = Counter()
    stop = asyncio.Event()

    async def lane(peer: HttpPeer) -> None:
        try:
            while not stop.is_set():
                try:
                    answer = await peer.request(method, params)
                except Exception as exc:  # a 429 from the headers, a closed connection
                    outcomes[_failure(exc)] += 1
                    await asyncio.sleep(RETRY)
                    continue
                word = _outcome(answer)
                outcomes[word] += 1
                if word.startswith(("rate_limited", "error", "mnote_tool_runtime")):
                    await asyncio.sleep(RETRY)
        finally:
            await peer.close()

    peers = [HttpPeer(url, {"Authorization": "Bearer tok-attacker"}) for _ in range(lanes)]
    await asyncio.gather(*(peer.initialize() for peer in peers))
    print("ready", flush=True)  # the parent measures from now on
    tasks = [asyncio.ensure_future(lane(peer)) for peer in peers]
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes it
    stop.set()
    await asyncio.wait(tasks, timeout=60)
    for task in tasks:  # a lane that could not even start says why
        if task.done() and not task.cancelled() and task.exception() is not None:
            outcomes[f"lane failed: {task.exception()!r}"[:120]] += 1
    return dict(outcomes)


def _failure(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    return f"http_{status}" if status else type(exc).__name__


def _outcome(answer: dict[str, Any]) -> str:
    if "error" in answer:  # a JSON-RPC error (completions refused)
        data = answer["error"].get("data") or {}
        code = data.get("code", answer["error"].get("code"))
        return (
            "rate_limited:" + str(data.get("details", {}).get("limit"))
            if code == "mnote_tool_rate_limited"
            else f"error:{code}"
        )
    result = answer.get("result", {})
    if "content" not in result:
        return "ok"
    envelope = json.loads(result["content"][0]["text"])
    if envelope["ok"]:
        return "ok"
    error = envelope["error"]
    if error["code"] == "mnote_tool_rate_limited":
        return f"rate_limited:{error['details'].get('limit')}:{error['details'].get('reason', '')}".rstrip(
            ":"
        )
    word: str = error["code"]
    return word.removeprefix("mnote_tool_")


# -- the tenant and one server ---------------------------------------------------------------------


@contextlib.asynccontextmanager
async def server(root: Path, db: str, tokens: Path) -> AsyncIterator[str]:
    """`serve --transport http --stateless` from the checkout at `root`, default flags: its /mcp URL."""
    port = _free_port()
    argv = serve_argv(db, "--stateless", "--auth-file", str(tokens), "--locale", "en", "--port", str(port))
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root), "MNOTE_LOG_LEVEL": "warning", **every_tool_env(root)},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        await _wait_for_port(port, process, within=120)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 60)


async def tenant(url: str, window: float) -> dict[str, Any]:
    """The tenant's calls for `window` seconds: latencies in ms, and its refusals."""
    peer = HttpPeer(url, {"Authorization": "Bearer tok-tenant"})
    await peer.initialize()
    took: list[float] = []
    failed: Counter[str] = Counter()
    stop = time.perf_counter() + window
    n = 0
    try:
        while time.perf_counter() < stop:
            n += 1
            page: dict[str, Any] = {**IDS, "workspaceId": "ws_tenant", "documentId": "small"}
            if n % 2:
                tool, arguments = "mnote.page.get", page
            else:
                text = f"tenant write {n} {time.time()}"
                arguments = {
                    **page,
                    "blockId": "s0",
                    "text": text,
                    "idempotencyKey": f"t-{n}-{time.time()}",
                    "dryRun": False,
                }
                tool = "mnote.block.update"
            started = time.perf_counter()
            answer = await peer.call(tool, arguments)
            elapsed = time.perf_counter() - started
            word = _outcome(answer)
            if word == "ok":
                took.append(elapsed * 1e3)
            else:
                failed[word] += 1
            await asyncio.sleep(max(0.0, PACE - elapsed))
    finally:
        await peer.close()
    return {**_stats(took), **({"refused": dict(failed)} if failed else {})}


def _stats(values: list[float]) -> dict[str, Any]:
    ordered = sorted(values)
    if not ordered:
        return {"n": 0}

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {
        "n": len(ordered),
        "p50": round(statistics.median(ordered), 2),
        "p99": at(0.99),
        "max": round(ordered[-1], 2),
    }


async def under_attack(url: str, name: str, window: float) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.neighbours",
        "--attacker",
        name,
        url,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        assert (await asyncio.wait_for(process.stdout.readline(), 120)).strip() == b"ready"
        await asyncio.sleep(1.0)  # its lanes are busy
        measured = await tenant(url, window)
    finally:
        assert process.stdin is not None
        process.stdin.close()
        out, _ = await asyncio.wait_for(process.communicate(), 120)
    attack = json.loads(out.decode() or "{}")
    return {"tenant_ms": measured, "attacker": attack}


async def one_server(url: str, window: float) -> dict[str, Any]:
    warm = HttpPeer(url, {"Authorization": "Bearer tok-attacker"})
    await warm.initialize()
    await warm.call("mnote.page.search", {**IDS, "query": "w*"})  # caches
    await warm.close()
    await tenant(url, 2.0)
    result: dict[str, Any] = {"idle": {"tenant_ms": await tenant(url, window)}}
    for name in ATTACKS:
        result[name] = await under_attack(url, name, window)
        await asyncio.sleep(2.0)  # what the attack left running ends
    return result


async def run(before: Path | None, quick: bool, window: float) -> dict[str, Any]:
    roots = {"after": ROOT, **({"before": before} if before is not None else {})}
    results: dict[str, Any] = {"load_average_start": os.getloadavg(), "window_s": window}
    directory = tempfile.mkdtemp(prefix="mnote-neighbours-pg-")
    pg = start_postgres(directory)
    try:
        with tempfile.TemporaryDirectory(prefix="mnote-neighbours-") as tmp:
            tokens = write_tokens(Path(tmp) / "tokens.json", TOKENS)
            stores = {"sqlite": str(Path(tmp) / "s.db"), "postgresql": new_database(pg, "neighbours")}
            for location in stores.values():
                seed(location, quick)
            for kind, location in stores.items():
                for label, root in roots.items():
                    async with server(root, location, tokens) as url:
                        results[f"{kind} {label}"] = await one_server(url, window)
    finally:
        pg.cleanup()
        shutil.rmtree(directory, ignore_errors=True)
    results["load_average_end"] = os.getloadavg()
    return results


def table(results: dict[str, Any]) -> str:
    """p50 / p99 of the tenant (ms) and their ratios to idle, per store and code."""
    lines = [
        "| store, code | attack | tenant p50 ms (x idle) | tenant p99 ms (x idle) | attacker's answers |",
        "|---|---|---:|---:|---|",
    ]
    for key, measured in results.items():
        if not isinstance(measured, dict) or "idle" not in measured:
            continue
        idle = measured["idle"]["tenant_ms"]
        for name, figures in measured.items():
            t = figures["tenant_ms"]
            if not t.get("n"):
                lines.append(f"| {key} | {name} | no answer | | |")
                continue
            p50, p99 = t["p50"] / idle["p50"], t["p99"] / idle["p99"]
            attack = ", ".join(f"{k} {v}" for k, v in sorted(figures.get("attacker", {}).items()))
            lines.append(
                f"| {key} | {name} | {t['p50']:.1f} ({p50:.2f}x) | {t['p99']:.1f} ({p99:.2f}x) | {attack} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.neighbours", description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="a checkout of the code before, run side by side")
    parser.add_argument("--quick", action="store_true", help="a tenth of the data, to try the bench out")
    parser.add_argument("--window", type=float, default=25.0, help="seconds the tenant is measured per case")
    parser.add_argument("--attacker", nargs=2, metavar=("ATTACK", "URL"), help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.attacker:
        name, url = options.attacker
        print(json.dumps(asyncio.run(attacker(name, url))))
        return 0
    before = options.before.resolve() if options.before else None
    figures = asyncio.run(run(before, options.quick, options.window))
    out = ROOT / "bench" / "results" / "neighbours.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=2))
    print(json.dumps(figures, indent=2))
    print(table(figures), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
