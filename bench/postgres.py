"""`python -m bench.postgres [--quick]`: the PostgreSQL store against SQLite, and replicas on one database.

1. Per call, in process (the kernel port, no MCP): `get_page` of a 50-block page and a one-block
   `page.block.update` (its own key each time), SQLite and PostgreSQL interleaved call by call; p50.
2. Over HTTP (`serve --transport http --stateless`, raw POSTs, a bearer token): 1, 2 and 4 replicas on
   one PostgreSQL, 16 calls always in flight spread over the replicas, reads (`mnote.page.get`) and
   writes (`mnote.block.update`, each lane on its own page so page locks do not queue them); calls per
   second and the efficiency per replica (throughput of N / (N × throughput of 1)), and the CPU the
   replicas and PostgreSQL used per call (from /proc), which says where the time goes; and, as the
   baseline, one replica on a SQLite file under the same load (`sqlite` in `replicas`).

PostgreSQL is the `pgserver` wheel's (16, on a Unix socket, same machine). One run; the machine is
shared and noisy, so only ratios within the run mean anything.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from bench.fixtures import blocks
from bench.measure import cpu_seconds, median, without_call_limits
from bench.rawclient import HttpPeer
from bench.run import _free_port, _wait_for_port
from mnote_mcp.kernel.port import Command, CommandName, Correlation, Kernel, PageQuery
from mnote_mcp.kernel.postgres.opening import open_kernel as open_postgres_kernel
from mnote_mcp.kernel.sqlite.opening import open_kernel
from mnote_mcp.kernel.store.fixtures import load_fixture
from mnote_mcp.kernel.store.kernel import StoreKernel

ROOT = Path(__file__).resolve().parent.parent
WS, ACTOR, TOKEN = "ws_bench", "bench_user", "bench-token"
LANES = 16
CORRELATION = Correlation("bench_session", "bench_run", "bench_call", "bench_trace")


def fixture(pages: int) -> dict[str, Any]:
    return {
        "workspaces": [
            {
                "id": WS,
                "members": [{"actorId": ACTOR, "role": "editor"}],
                "pages": [
                    {"id": f"doc_{n}", "title": f"page {n}", "blocks": blocks(50)} for n in range(pages)
                ],
            }
        ]
    }


def start_postgres(directory: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pgserver.postgres_server import get_server

    return get_server(directory, cleanup_mode="stop")


def new_database(server: Any, name: str) -> str:
    import psycopg

    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base: str = server.get_uri()
    return base.replace("/postgres?", f"/{name}?", 1)


def first_block(page: str) -> str:
    block_id: str = blocks(50)[0]["id"]
    return block_id


def update(page: str, n: int) -> Command:
    return Command(
        name=CommandName.PAGE_BLOCK_UPDATE,
        workspace_id=WS,
        document_id=page,
        actor_id=ACTOR,
        correlation=CORRELATION,
        idempotency_key=f"k_{page}_{n}_{time.monotonic_ns()}",
        dry_run=False,
        payload={"blockId": first_block(page), "text": f"edit {n}"},
    )


async def per_call(kernels: dict[str, Kernel], calls: int) -> dict[str, dict[str, float]]:
    """p50 wall ms of a read and of a write, and this process's CPU ms per call (worker threads
    included, PostgreSQL's own not). A read follows a write, so it misses the page cache; `reread`
    is a second read of the same revision (the cache's)."""
    kinds = ("read", "reread", "write")
    samples: dict[str, dict[str, list[float]]] = {name: {kind: [] for kind in kinds} for name in kernels}
    cpu = {name: dict.fromkeys(kinds, 0.0) for name in kernels}
    query = PageQuery(WS, "doc_0", ACTOR, CORRELATION)
    for n in range(calls + 20):
        for name, kernel in kernels.items():
            for kind in kinds:
                cpu_started, started = time.process_time(), time.perf_counter()
                if kind == "write":
                    await kernel.execute(update("doc_0", n))
                else:
                    await kernel.get_page(query)
                wall, used = time.perf_counter() - started, time.process_time() - cpu_started
                if n >= 20:  # the first calls warm caches and prepare statements
                    samples[name][kind].append(wall)
                    cpu[name][kind] += used
    return {
        name: {
            **{kind: median(values) * 1e3 for kind, values in by_kind.items()},
            **{f"{kind}_cpu": cpu[name][kind] / calls * 1e3 for kind in kinds},
        }
        for name, by_kind in samples.items()
    }


async def replicas(url: str, count: int, seconds: float, postmaster: int | None) -> dict[str, float]:
    """`count` replicas on one store (`url`: PostgreSQL, or a SQLite file with `postmaster` None)."""
    ports = [_free_port() for _ in range(count)]
    argv = [sys.executable, "-m", "mnote_mcp", "serve", "--transport", "http", "--stateless", "--db", url]
    argv += ["--actor", ACTOR]
    env = {**os.environ, "MNOTE_TOKEN": TOKEN, "MNOTE_LOG_LEVEL": "warning", "MNOTE_DB_POOL_SIZE": "8"}
    servers = [
        await asyncio.create_subprocess_exec(
            *argv,
            "--port",
            str(port),
            env=env,
            cwd=ROOT,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        for port in ports
    ]
    try:
        for port, process in zip(ports, servers, strict=True):
            await _wait_for_port(port, process, within=120)
        auth = {"Authorization": f"Bearer {TOKEN}"}
        peers = [HttpPeer(f"http://127.0.0.1:{port}/mcp", auth) for port in ports]
        for peer in peers:
            await peer.initialize()
        out: dict[str, float] = {}
        for kind in ("read", "write"):
            done = 0
            stop = time.perf_counter() + seconds

            async def lane(lane: int, kind: str = kind, stop: float = stop) -> None:
                nonlocal done
                peer, page, n = peers[lane % count], f"doc_{lane}", 0
                while time.perf_counter() < stop:
                    n += 1
                    args: dict[str, Any]
                    if kind == "read":
                        args = {"workspaceId": WS, "documentId": page}
                        answer = await peer.call("mnote.page.get", args)
                    else:
                        args = {
                            "workspaceId": WS,
                            "documentId": page,
                            "blockId": first_block(page),
                            "text": f"lane {lane} edit {n}",
                            "idempotencyKey": f"k_{count}_{lane}_{n}_{time.monotonic_ns()}",
                            "dryRun": False,
                        }
                        answer = await peer.call("mnote.block.update", args)
                    if answer.get("result", {}).get("isError"):
                        raise RuntimeError(json.dumps(answer)[:500])
                    done += 1

            cpu_before = sum(cpu_seconds(p.pid) for p in servers)
            db_before = _tree_cpu(postmaster) if postmaster else 0.0
            started = time.perf_counter()
            await asyncio.gather(*(lane(n) for n in range(LANES)))
            elapsed = time.perf_counter() - started
            out[f"{kind}_per_s"] = done / elapsed
            out[f"{kind}_server_cpu_ms"] = (
                (sum(cpu_seconds(p.pid) for p in servers) - cpu_before) / done * 1e3
            )
            if postmaster:
                out[f"{kind}_db_cpu_ms"] = (_tree_cpu(postmaster) - db_before) / done * 1e3
        for peer in peers:
            await peer.close()
        return out
    finally:
        for process in servers:
            process.terminate()
            await asyncio.wait_for(process.wait(), 20)


def _postmaster(directory: str) -> int:
    return int(Path(directory, "postmaster.pid").read_text().split()[0])


def _tree_cpu(pid: int) -> float:
    """CPU seconds of PostgreSQL: the postmaster's children (backends) included."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry) == pid or int(fields[1]) == pid:
            total += cpu_seconds(int(entry))
    return total


async def run(quick: bool) -> dict[str, Any]:
    calls, seconds = (100, 4.0) if quick else (400, 10.0)
    directory = tempfile.mkdtemp(prefix="mnote-pg-bench-")
    server = start_postgres(directory)
    try:
        with tempfile.TemporaryDirectory(prefix="mnote-bench-pg-") as tmp:
            url = new_database(server, "bench_per_call")
            kernels: dict[str, Kernel] = {
                "sqlite": open_kernel(Path(tmp) / "bench.db"),
                "postgresql": open_postgres_kernel(url),
            }
            for kernel in kernels.values():
                assert isinstance(kernel, StoreKernel)
                load_fixture(kernel.store, fixture(1))
            try:
                figures: dict[str, Any] = {"per_call_ms": await per_call(kernels, calls)}
            finally:
                for kernel in kernels.values():
                    await kernel.aclose()
            postmaster = _postmaster(directory)
            scaling: dict[str, Any] = {}
            for count in (1, 2, 4):
                url = new_database(server, f"bench_replicas_{count}")
                store = open_postgres_kernel(url)
                load_fixture(store.store, fixture(LANES))
                await store.aclose()
                scaling[str(count)] = await replicas(url, count, seconds, postmaster)
            for kind in ("read", "write"):
                one = scaling["1"][f"{kind}_per_s"]
                for replicas_, row in scaling.items():
                    row[f"{kind}_efficiency"] = row[f"{kind}_per_s"] / (int(replicas_) * one)
            sqlite = Path(tmp) / "replicas.db"
            baseline = open_kernel(sqlite)
            load_fixture(baseline.store, fixture(LANES))
            await baseline.aclose()
            scaling["sqlite"] = await replicas(str(sqlite), 1, seconds, None)
            figures["replicas"] = scaling
            figures["load_average"] = os.getloadavg()
            return figures
    finally:
        server.cleanup()


def main(argv: list[str] | None = None) -> int:
    without_call_limits()
    parser = argparse.ArgumentParser(prog="python -m bench.postgres", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer calls, shorter rounds")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "postgres.json")
    args = parser.parse_args(argv)
    figures = asyncio.run(run(args.quick))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2))
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
