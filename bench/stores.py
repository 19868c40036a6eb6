"""`python -m bench.stores`: what a call costs on PostgreSQL against SQLite, through the real server.

Each target is one `mnote-mcp serve` process: a source tree (this one, and with `--before DIR` another
checkout, run with its own code) × a store (a SQLite file, or a PostgreSQL 16 database from the
`pgserver` wheel on a Unix socket) × a transport (stdio, or streamable HTTP `--stateless` with a bearer
token) × an event loop (uvloop, or asyncio with `--no-uvloop`). `postgresql-nosync` in `--stores` is
PostgreSQL with `synchronous_commit=off` (in the URL's `options`): a commit that does not wait for the
write-ahead log's flush to disk, which is what SQLite's WAL with `synchronous=NORMAL` does, so the two
compare like with like; `postgresql` is PostgreSQL's default (every commit flushed). Each target has
a store of its own, seeded by its tree's own code (16 pages of 50 blocks), so a newer schema never meets
an older server and a database's CPU is its target's.

Round by round: sequential reads (`mnote.page.get` of a 50-block page) and writes (`mnote.block.update`
of one block, its own idempotency key each), the targets taking turns call by call (so that whatever
else the machine does falls on all of them alike), p50 of each; the server's CPU per call over those
calls (user + system, all threads, /proc) and its database's (the PostgreSQL backends serving that
database, by pg_stat_activity); and, with `--width`, the calls per second with that many in flight
(each write on one of the 16 pages in turn; the targets one after the other). Then the ratios
PostgreSQL / SQLite of each tree, transport and loop, per round, reported min / median / max.

`--loops uvloop,asyncio` puts both loops side by side (issue 34: uvloop in the default install);
`--stores sqlite` leaves PostgreSQL out. The client is raw (newline JSON on the pipes, hand-written HTTP
POSTs) and runs on uvloop where installed, so that its own cost stays small.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.fixtures import blocks
from bench.measure import cpu_seconds
from bench.postgres import new_database, start_postgres
from bench.rawclient import StdioPeer
from bench.streamable import RawHttp, _free_port, _request, _wait_for_port
from bench.targets import PYCACHE, ROOT

WS, ACTOR, TOKEN = "ws_bench", "bench_user", "bench-token"
PAGES = 16
KINDS = ("read", "write")
Args = Callable[[int], dict[str, Any]]


def fixture() -> dict[str, Any]:
    return {
        "workspaces": [
            {
                "id": WS,
                "name": "Benchmarks",
                "members": [{"actorId": ACTOR, "role": "editor"}],
                "pages": [
                    {"id": f"doc_{n}", "title": f"page {n}", "blocks": blocks(50)} for n in range(PAGES)
                ],
            }
        ]
    }


def read_args(n: int, page: int = 0) -> dict[str, Any]:
    return {"workspaceId": WS, "documentId": f"doc_{page}"}


def write_args(n: int, page: int = 0) -> dict[str, Any]:
    return {
        "workspaceId": WS,
        "documentId": f"doc_{page}",
        "blockId": "b1",
        "text": f"edit {n} {time.monotonic_ns()}",
        "idempotencyKey": f"k_{os.getpid()}_{page}_{n}_{time.monotonic_ns()}",
        "dryRun": False,
    }


CALLS: dict[str, tuple[str, Callable[..., dict[str, Any]]]] = {
    "read": ("mnote.page.get", read_args),
    "write": ("mnote.block.update", write_args),
}


def checked(answer: dict[str, Any], what: str) -> None:
    result = answer.get("result")
    if result is None or result.get("isError"):
        raise RuntimeError(f"{what}: {json.dumps(answer)[:400]}")


@dataclass
class Target:
    tree: str  # "after" (this tree) or "before"
    root: Path
    store: str  # "sqlite", "postgresql" or "postgresql-nosync"
    db: str
    transport: str  # "stdio" or "http"
    loop: str  # "uvloop" or "asyncio"
    peer: StdioPeer | None = None
    process: asyncio.subprocess.Process | None = None
    port: int = 0
    next_id: int = 0
    session: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.tree} {self.store} {self.transport} {self.loop}"

    def argv(self) -> list[str]:
        argv = [sys.executable, "-m", "mnote_mcp", "serve", "--db", self.db, "--actor", ACTOR]
        argv += ["--log-level", "warning"]
        if self.loop == "asyncio":
            argv.append("--no-uvloop")
        if self.transport == "http":
            argv += ["--transport", "http", "--stateless", "--port", str(self.port)]
        return argv

    def env(self) -> dict[str, str]:
        env = {**os.environ, **PYCACHE, "MNOTE_TOKEN": TOKEN}
        if self.root != ROOT:
            env["PYTHONPATH"] = str(self.root)
        return env

    async def start(self) -> None:
        if self.transport == "stdio":
            self.peer = await StdioPeer.spawn(self.argv(), self.env(), str(self.root))
            await self.peer.initialize()
            self.process = self.peer.process
            return
        self.port = _free_port()
        self.process = await asyncio.create_subprocess_exec(
            *self.argv(),
            cwd=self.root,
            env=self.env(),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await _wait_for_port(self.port, self.process, within=120)

    async def stop(self) -> None:
        if self.peer is not None:
            await self.peer.close()
        elif self.process is not None and self.process.returncode is None:
            self.process.terminate()
            await asyncio.wait_for(self.process.wait(), 30)

    def head(self) -> bytes:
        lines = [
            "POST /mcp HTTP/1.1",
            f"Host: 127.0.0.1:{self.port}",
            "Accept: application/json, text/event-stream",
            "Content-Type: application/json",
            "MCP-Protocol-Version: 2025-11-25",
            f"Authorization: Bearer {TOKEN}",
        ]
        return ("\r\n".join(lines) + "\r\n").encode("latin-1")

    async def call(self, connection: RawHttp | None, kind: str, n: int, page: int = 0) -> None:
        tool, args = CALLS[kind]
        arguments = args(n, page)
        if self.peer is not None:
            checked(await self.peer.call(tool, arguments), f"{self.name} {tool}")
            return
        assert connection is not None
        self.next_id += 1
        ident = self.next_id
        body = _request(ident, "tools/call", {"name": tool, "arguments": arguments})
        status, _, messages = await connection.post(self.head(), body)
        answer = next((m for m in messages if m.get("id") == ident), {"status": status})
        checked(answer, f"{self.name} {tool}")

    async def connection(self) -> RawHttp | None:
        return None if self.transport == "stdio" else await RawHttp.open(self.port)

    def cpu(self) -> float:
        assert self.process is not None
        return cpu_seconds(self.process.pid)

    def database(self) -> str | None:
        """The PostgreSQL database's name (None on SQLite)."""
        if not self.store.startswith("postgresql"):
            return None
        return self.db.split("?", 1)[0].rsplit("/", 1)[1]


async def sequential(target: Target, kind: str, calls: int) -> list[float]:
    """`calls` calls one after the other (a warm-up); their times in seconds."""
    connection = await target.connection()
    samples = []
    try:
        for n in range(calls):
            started = time.perf_counter()
            await target.call(connection, kind, n)
            samples.append(time.perf_counter() - started)
    finally:
        if connection is not None:
            await connection.close()
    return samples


class Backends:
    """PostgreSQL's CPU per database: its backends' (pg_stat_activity's pids by `datname`)."""

    def __init__(self, url: str | None) -> None:
        self.url = url

    def cpu(self) -> dict[str, float]:
        if self.url is None:
            return {}
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT datname, pid FROM pg_stat_activity WHERE backend_type = 'client backend'"
                " AND pid <> pg_backend_pid()"
            ).fetchall()
        out: dict[str, float] = {}
        for name, pid in rows:
            try:
                out[name] = out.get(name, 0.0) + cpu_seconds(pid)
            except OSError:  # (a backend that ended meanwhile)
                continue
        return out


async def interleaved(
    targets: list[Target], kind: str, calls: int, backends: Backends
) -> dict[str, dict[str, float]]:
    """`calls` calls of `kind` to each target, one at a time, the targets taking turns call by call
    (the order reversed every other turn), so that whatever else the machine does falls on all of
    them alike: each one's p50 µs, and its server's and its database's backends' CPU µs per call."""
    connections = {target.name: await target.connection() for target in targets}
    samples: dict[str, list[float]] = {target.name: [] for target in targets}
    try:
        cpu, db = {t.name: t.cpu() for t in targets}, backends.cpu()
        for n in range(calls):
            for target in targets if n % 2 == 0 else reversed(targets):
                started = time.perf_counter()
                await target.call(connections[target.name], kind, n)
                samples[target.name].append(time.perf_counter() - started)
        cpu_after, db_after = {t.name: t.cpu() for t in targets}, backends.cpu()
    finally:
        for connection in connections.values():
            if connection is not None:
                await connection.close()
    out = {}
    for target in targets:
        database = target.database()
        db_cpu = (db_after.get(database, 0.0) - db.get(database, 0.0)) if database else 0.0
        out[target.name] = {
            "p50_us": statistics.median(samples[target.name]) * 1e6,
            "cpu_us": (cpu_after[target.name] - cpu[target.name]) / calls * 1e6,
            "db_cpu_us": db_cpu / calls * 1e6,
        }
    return out


async def in_flight(target: Target, kind: str, calls: int, width: int) -> float:
    """Calls per second with `width` always in flight (HTTP: a connection each), writes spread over
    the pages."""
    connections = [await target.connection() for _ in range(width)]
    counter = iter(range(calls))

    async def lane(connection: RawHttp | None) -> None:
        for n in counter:
            await target.call(connection, kind, n, n % PAGES)

    try:
        started = time.perf_counter()
        await asyncio.gather(*(lane(c) for c in connections))
        return calls / (time.perf_counter() - started)
    finally:
        for connection in connections:
            if connection is not None:
                await connection.close()


def seed(root: Path, db: str, folder: Path) -> None:
    """The fixture into `db` by `root`'s own `mnote-mcp seed` (its schema, its loader)."""
    import subprocess

    path = folder / "fixture.json"
    path.write_text(json.dumps(fixture()), encoding="utf-8")
    env = {**os.environ, **({"PYTHONPATH": str(root)} if root != ROOT else {})}
    subprocess.run(
        [sys.executable, "-m", "mnote_mcp", "seed", "--db", db, str(path)],
        check=True,
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
    )


def ratios(results: dict[str, Any], targets: list[Target]) -> dict[str, dict[str, list[float]]]:
    """PostgreSQL / SQLite per round, for each tree, transport and loop."""
    out: dict[str, dict[str, list[float]]] = {}
    for target in targets:
        if not target.store.startswith("postgresql"):
            continue
        twin = target.name.replace(f" {target.store} ", " sqlite ")
        if twin not in results:
            continue
        pg, lite = results[target.name], results[twin]
        key = f"{target.tree} {target.store} {target.transport} {target.loop}"
        figures: dict[str, list[float]] = {}
        for kind in KINDS:
            for round_pg, round_lite in zip(pg[kind], lite[kind], strict=True):
                figures.setdefault(f"{kind} p50", []).append(round_pg["p50_us"] / round_lite["p50_us"])
                figures.setdefault(f"{kind} server cpu", []).append(round_pg["cpu_us"] / round_lite["cpu_us"])
                figures.setdefault(f"{kind} server+db cpu", []).append(
                    (round_pg["cpu_us"] + round_pg["db_cpu_us"]) / round_lite["cpu_us"]
                )
            for round_pg, round_lite in zip(pg[f"{kind}_per_s"], lite[f"{kind}_per_s"], strict=True):
                figures.setdefault(f"{kind} calls/s", []).append(round_pg / round_lite)
        out[key] = figures
    return out


def summary(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


async def run(args: argparse.Namespace) -> dict[str, Any]:
    trees = [("after", ROOT)] + ([("before", args.before.resolve())] if args.before else [])
    stores, transports, loops = args.stores.split(","), args.transports.split(","), args.loops.split(",")
    directory = tempfile.mkdtemp(prefix="mnote-pg-stores-")
    server = start_postgres(directory) if any(s.startswith("postgresql") for s in stores) else None
    targets: list[Target] = []
    results: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="mnote-bench-stores-") as tmp:
            for tree, root in trees:  # a store of its own each (its database's CPU is its own)
                for store, transport, loop in itertools.product(stores, transports, loops):
                    name = f"bench_{tree}_{store}_{transport}_{loop}".replace("-", "_")
                    if store.startswith("postgresql"):
                        assert server is not None
                        db = new_database(server, name)
                        seed(root, db, Path(tmp))
                        if store == "postgresql-nosync":  # commits not waiting for the WAL's flush
                            db += "&options=-c%20synchronous_commit%3Doff"
                    else:
                        db = str(Path(tmp) / f"{name}.db")
                        seed(root, db, Path(tmp))
                    targets.append(Target(tree, root, store, db, transport, loop))
            for target in targets:
                await target.start()
                for kind in KINDS:  # warm up: imports, caches, prepared statements
                    await sequential(target, kind, 30)
                results[target.name] = {kind: [] for kind in KINDS} | {f"{k}_per_s": [] for k in KINDS}
            backends = Backends(server.get_uri() if server is not None else None)
            started = time.time()
            load = [os.getloadavg()[0]]
            for round_ in range(args.rounds):
                for kind in KINDS:
                    for name, figures in (await interleaved(targets, kind, args.calls, backends)).items():
                        results[name][kind].append(figures)
                if args.width:
                    for target in targets if round_ % 2 == 0 else list(reversed(targets)):
                        for kind in KINDS:
                            per_s = await in_flight(target, kind, args.calls * 2, args.width)
                            results[target.name][f"{kind}_per_s"].append(per_s)
                load.append(os.getloadavg()[0])
            return {
                "rounds": args.rounds,
                "calls": args.calls,
                "width": args.width,
                "seconds": round(time.time() - started, 1),
                "load_average": load,
                "targets": results,
                "ratios": ratios(results, targets) if server is not None else {},
            }
    finally:
        for target in targets:
            try:
                await target.stop()
            except Exception as exc:  # a target that died is reported, the others still stopped
                print(f"{target.name}: {exc}", file=sys.stderr)
        if server is not None:
            server.cleanup()


def report(figures: dict[str, Any]) -> None:
    loads = figures["load_average"]
    print(
        f"{figures['rounds']} rounds of {figures['calls']} sequential calls per kind, targets interleaved; "
        f"load average {min(loads):.1f}-{max(loads):.1f}; {figures['seconds']} s"
    )
    print(
        f"\n{'target':36} {'read p50':>9} {'cpu':>6} {'db':>5} {'write p50':>10} {'cpu':>6} {'db':>5}", end=""
    )
    print(f" {'reads/s':>8} {'writes/s':>9}" if figures["width"] else "")
    for name, by_kind in figures["targets"].items():
        cells = []
        for kind in KINDS:
            rounds = by_kind[kind]
            med = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
            cells.append(f"{med['p50_us']:9.0f} {med['cpu_us']:6.0f} {med['db_cpu_us']:5.0f}")
        line = f"{name:36} {cells[0]} {' ' + cells[1]}"
        if figures["width"]:
            line += f" {statistics.median(by_kind['read_per_s']):8.0f} {statistics.median(by_kind['write_per_s']):9.0f}"
        print(line)
    for key, table in figures["ratios"].items():
        print(f"\nPostgreSQL / SQLite, {key} (min / median / max of the rounds)")
        for figure, values in table.items():
            print(f"  {figure:22} {summary(values)}")


async def profile(args: argparse.Namespace) -> int:
    """py-spy samples of one target (this tree, or `--tree DIR`) answering `args.kind` one call after
    the other: `python -m bench.stores profile postgresql write OUT.svg`."""
    import shutil
    import subprocess

    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    directory = tempfile.mkdtemp(prefix="mnote-pg-profile-")
    server = start_postgres(directory) if args.store == "postgresql" else None
    target: Target | None = None
    try:
        with tempfile.TemporaryDirectory(prefix="mnote-bench-profile-") as tmp:
            db = new_database(server, "bench_profile") if server is not None else str(Path(tmp) / "p.db")
            root = args.tree.resolve() if args.tree else ROOT
            seed(root, db, Path(tmp))
            target = Target(
                "after" if root == ROOT else "before", root, args.store, db, args.transport, args.loop
            )
            await target.start()
            await sequential(target, args.kind, 100)
            assert target.process is not None
            record = ["record", "--pid", str(target.process.pid), "-d", str(args.seconds), "-r", "500"]
            sampler = await asyncio.create_subprocess_exec(
                spy, *record, "-o", str(args.out), "-f", args.format, stdout=subprocess.DEVNULL
            )
            end = time.monotonic() + args.seconds
            while time.monotonic() < end and sampler.returncode is None:
                await sequential(target, args.kind, 50)
            return await sampler.wait()
    finally:
        if target is not None:
            await target.stop()
        if server is not None:
            server.cleanup()


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["profile"]:
        parser = argparse.ArgumentParser(prog="python -m bench.stores profile")
        parser.add_argument("store", choices=("sqlite", "postgresql"))
        parser.add_argument("kind", choices=KINDS)
        parser.add_argument("out", type=Path)
        parser.add_argument("--transport", default="stdio", choices=("stdio", "http"))
        parser.add_argument("--loop", default="uvloop", choices=("uvloop", "asyncio"))
        parser.add_argument("--seconds", type=int, default=20)
        parser.add_argument("--format", default="flamegraph", choices=("flamegraph", "raw"))
        parser.add_argument("--tree", type=Path, help="another checkout to profile (default: this one)")
        options = parser.parse_args(argv[1:])
        return asyncio.run(profile(options))
    parser = argparse.ArgumentParser(prog="python -m bench.stores", description=__doc__)
    parser.add_argument("--before", type=Path, help="another checkout, measured beside this one")
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--transports", default="stdio,http")
    parser.add_argument("--loops", default="uvloop", help="uvloop, asyncio or both (comma-separated)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200, help="sequential calls per round and kind")
    parser.add_argument("--width", type=int, default=0, help="also calls per second with this many in flight")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "stores.json")
    args = parser.parse_args(argv)
    try:
        import uvloop

        figures = uvloop.run(run(args))
    except ImportError:
        figures = asyncio.run(run(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2), encoding="utf-8")
    report(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
