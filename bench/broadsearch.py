"""`python -m bench.attacks postgres [--before DIR]`: issue 26's broad-search attack (finding 3) and the
search timing of restricted pages (finding 10), against real `serve --transport http --stateless`
servers on PostgreSQL (the `pgserver` wheel's 16) and, as the reference, on SQLite.

The data: 1,000 pages x 50 blocks of Zipf-distributed English (`bench.search.Text`; `w*` matches
about 15,000 of the 51,000 rows) that the attacker may read; a 5-block page in another workspace, the
other tenant's; 300 restricted pages x 50 blocks, each block holding the word `zebra`, in a third
workspace whose member (the prober) may not open them, and one page there the prober may read.

Per server:
- `search_ms`: the attacker's `w*` alone, median of 5 (after a warm-up);
- `restricted_ms`: the prober's search for `zebra` (15,000 rows of pages it may not read, none it
  may) against a word no page holds, alternated, medians of 15 (finding 10: what timing tells);
- `idle_read_ms`: the other tenant's `mnote.page.get` of its small page, 30 in a row;
- `under_attack`: the attacker keeps 16, then 20, `w*` searches in flight (a refused one is sent
  again 50 ms later, as a client honouring `retryable` does) while the other tenant reads its page
  again and again, for 20 s at most; medians and p90 of its reads, and the attacker's outcomes.

`--quick` loads a tenth of the data (to try the bench out). `--before DIR` runs the same servers from another checkout too (`git archive 65cea2d | tar -x -C DIR`),
interleaved with this one's on the same database, so before and after are measured side by side.
The machine these run on may be shared: compare the ratios within one run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bench.postgres import new_database, start_postgres
from bench.rawclient import HttpPeer
from bench.run import _free_port, _wait_for_port
from bench.search import Text
from mnote_mcp.kernel.databases.stores import open_store
from mnote_mcp.kernel.store.fixtures import load_fixture
from tests.support.http_helpers import serve_argv, write_tokens

ROOT = Path(__file__).resolve().parent.parent
TOKENS: dict[str, dict[str, Any]] = {
    "tok-attacker": {"actorId": "attacker", "scopes": ["page.read"]},
    "tok-tenant": {"actorId": "tenant", "scopes": ["page.read"]},
    "tok-prober": {"actorId": "prober", "scopes": ["page.read"]},
}
IDS = {"sessionId": "s", "runId": "r", "toolCallId": "c", "traceId": "t"}
BROAD = "w*"
IN_FLIGHT = (16, 20)
READ_BUDGET_S = 20.0


def fixture(pages: int = 1000, restricted: int = 300) -> dict[str, Any]:
    text = Text(7)
    return {
        "workspaces": [
            {
                "id": "ws_big",
                "members": [{"actorId": "attacker", "role": "viewer"}],
                "pages": [
                    {
                        "id": f"p{n}",
                        "title": f"notes {n}",
                        "blocks": [
                            {"id": f"b{k}", "type": "paragraph", "text": text.english_text()}
                            for k in range(50)
                        ],
                    }
                    for n in range(pages)
                ],
            },
            {
                "id": "ws_tenant",
                "members": [{"actorId": "tenant", "role": "editor"}],
                "pages": [
                    {
                        "id": "small",
                        "title": "small",
                        "blocks": [
                            {"id": f"s{k}", "type": "paragraph", "text": f"line {k}"} for k in range(5)
                        ],
                    }
                ],
            },
            {
                "id": "ws_restricted",
                "members": [{"actorId": "prober", "role": "viewer"}, {"actorId": "boss", "role": "owner"}],
                "pages": [
                    {
                        "id": "open",
                        "title": "open",
                        "blocks": [{"type": "paragraph", "text": "nothing here"}],
                    },
                    *(
                        {
                            "id": f"r{n}",
                            "title": f"plans {n}",
                            "members": [{"actorId": "boss", "role": "owner"}],
                            "blocks": [
                                {"id": f"b{k}", "type": "paragraph", "text": f"zebra {text.english_text()}"}
                                for k in range(50)
                            ],
                        }
                        for n in range(restricted)
                    ),
                ],
            },
        ]
    }


@contextlib.asynccontextmanager
async def server(root: Path, db: str, tokens: Path) -> AsyncIterator[str]:
    """`serve --transport http --stateless` from the checkout at `root`: its URL."""
    port = _free_port()
    argv = serve_argv(db, "--stateless", "--auth-file", str(tokens), "--locale", "en", "--port", str(port))
    process = await asyncio.create_subprocess_exec(
        *argv,  # (the last --port wins over serve_argv's 0: this one is waited for)
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root), "MNOTE_LOG_LEVEL": "warning"},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        await _wait_for_port(port, process, within=120)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 30)


async def peer(url: str, token: str) -> HttpPeer:
    client = HttpPeer(url, {"Authorization": f"Bearer {token}"})
    await client.initialize()
    return client


def envelope(answer: dict[str, Any]) -> dict[str, Any]:
    result = answer.get("result", {})
    structured: dict[str, Any] | None = result.get("structuredContent")
    if structured is None:
        structured = json.loads(result["content"][0]["text"])
    return structured


async def timed(client: HttpPeer, tool: str, arguments: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    answer = envelope(await client.call(tool, {**IDS, **arguments}))
    return time.perf_counter() - started, answer


def ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median": statistics.median(ordered) * 1e3,
        "p90": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))] * 1e3,
        "n": len(ordered),
    }


async def reads(tenant: HttpPeer, count: int, budget: float) -> list[float]:
    out: list[float] = []
    stop = time.perf_counter() + budget
    while len(out) < count and time.perf_counter() < stop:
        took, answer = await timed(
            tenant, "mnote.page.get", {"workspaceId": "ws_tenant", "documentId": "small"}
        )
        if not answer["ok"]:
            raise RuntimeError(json.dumps(answer)[:500])
        out.append(took)
    return out


async def attack(url: str, tenant: HttpPeer, in_flight: int) -> dict[str, Any]:
    attacker = await peer(url, "tok-attacker")
    outcomes: Counter[str] = Counter()
    stop = asyncio.Event()

    async def lane() -> None:
        while not stop.is_set():
            try:
                _, answer = await timed(attacker, "mnote.page.search", {"query": BROAD, "limit": 20})
            except Exception as exc:  # a transport failure is an outcome too
                outcomes[type(exc).__name__] += 1
                continue
            if answer["ok"]:
                outcomes["ok"] += 1
            else:
                error = answer["error"]
                outcomes[f"{error['code']}:{error.get('details', {}).get('cause', '')}"] += 1
                if error["retryable"]:
                    await asyncio.sleep(0.05)

    lanes = [asyncio.ensure_future(lane()) for _ in range(in_flight)]
    try:
        await asyncio.sleep(1.0)  # the searches are running
        started = time.perf_counter()
        under = await reads(tenant, 40, READ_BUDGET_S)
        took = time.perf_counter() - started
    finally:
        stop.set()
        await asyncio.gather(*lanes, return_exceptions=True)
        await attacker.close()
    return {"tenant_read_ms": ms(under), "attack_s": took, "attacker": dict(outcomes)}


async def one_server(url: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    attacker, prober, tenant = [await peer(url, t) for t in ("tok-attacker", "tok-prober", "tok-tenant")]
    try:
        await timed(attacker, "mnote.page.search", {"query": BROAD})
        searches = [(await timed(attacker, "mnote.page.search", {"query": BROAD}))[0] for _ in range(5)]
        out["search_ms"] = ms(searches)
        probes: dict[str, list[float]] = {"zebra": [], "absent": []}
        for _ in range(16):
            for name, word in (("zebra", "zebra"), ("absent", "qzqzq")):
                took, answer = await timed(prober, "mnote.page.search", {"query": word})
                assert answer["ok"] and not answer["result"]["hits"], answer
                probes[name].append(took)
        out["restricted_ms"] = {name: ms(values[1:]) for name, values in probes.items()}
        await reads(tenant, 5, 30)
        out["idle_read_ms"] = ms(await reads(tenant, 30, 60))
        out["under_attack"] = {str(n): await attack(url, tenant, n) for n in IN_FLIGHT}
    finally:
        for client in (attacker, prober, tenant):
            await client.close()
    return out


async def run(before: Path | None, quick: bool = False) -> dict[str, Any]:
    roots = {"after": ROOT, **({"before": before} if before is not None else {})}
    results: dict[str, Any] = {"load_average_start": os.getloadavg()}
    directory = tempfile.mkdtemp(prefix="mnote-pg-attack-")
    pg = start_postgres(directory)
    try:
        with tempfile.TemporaryDirectory(prefix="mnote-attack-") as tmp:
            tokens = write_tokens(Path(tmp) / "tokens.json", TOKENS)
            data = fixture(100, 30) if quick else fixture()
            stores = {"postgresql": new_database(pg, "broad_search"), "sqlite": str(Path(tmp) / "s.db")}
            for location in stores.values():
                store = open_store(location)
                try:
                    load_fixture(store, data)
                finally:
                    store.close()
            for kind, location in stores.items():
                for label, root in roots.items():
                    async with server(root, location, tokens) as url:
                        results[f"{kind} {label}"] = await one_server(url)
    finally:
        pg.cleanup()
        shutil.rmtree(directory, ignore_errors=True)
    results["load_average_end"] = os.getloadavg()
    return results


def main(argv: list[str]) -> dict[str, Any]:
    """`[--before DIR] [--quick]` (`--quick`: a tenth of the data, to try the bench out); the figures
    are also written to bench/results/attacks-postgres.json (PostgreSQL's own output may share stdout)."""
    before = Path(argv[argv.index("--before") + 1]).resolve() if "--before" in argv else None
    figures = asyncio.run(run(before, quick="--quick" in argv))
    out = ROOT / "bench" / "results" / "attacks-postgres.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=2))
    return figures
