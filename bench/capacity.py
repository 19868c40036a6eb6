"""`python -m bench.capacity [--quick]`: how many agents a replica and a PostgreSQL core carry (issue 34).

Everything runs on this machine: PostgreSQL 16 (the `pgserver` wheel, a Unix socket), `mnote-mcp serve
--transport http --stateless` replicas with a pool of `--db-pool-size` connections, nginx with the
shipped examples/nginx.postgres.conf (TLS; only addresses, ports and paths changed, a replica line
added per replica past two), and the client (raw HTTP/1.1 on uvloop). The store holds `PAGES` pages of
50 blocks.

1. **One replica, per core.** 16 calls always in flight straight to one replica (`--no-call-limits`: the
   per-actor rates would cap what it measures), for each workload: reads (`mnote.page.get`), writes
   (`mnote.block.update`, a page per lane), searches (`mnote.page.search` of a word: half of them a word
   of one page's title, half a word ten pages share; a word in every block would scan them all,
   docs/deploy.md "Sizing the pool") and mixed agent traffic (`MIX`). Calls per second, the cores the
   replica used (its CPU seconds per second; and how long its threads waited for a core, from /proc
   schedstat: on a shared machine a replica gets the cores it is given), so calls per core-second,
   PostgreSQL's CPU per call (the postmaster and its backends), the pool connections the replica held at
   most (pg_stat_activity, sampled), and p50/p95 latency.
2. **The knee.** N concurrent agent sessions (`--sessions`, 10 → 1,000) through nginx to R replicas
   (`--replicas`, 2 and 4) on one PostgreSQL: each session keeps one TLS connection from a loopback
   address of its own group (four sessions an address, so the proxy's per-address limits apply as per
   agent), and loops: one call of the mix, then a think time (`--think` seconds on average, as an agent
   waits for its model), so N sessions offer about N / think calls a second. For each N: calls per
   second served, p50/p95/p99 latency, refusals and errors, the CPU of the replicas, PostgreSQL, nginx
   and the client, and the connections PostgreSQL held. The knee is where latency leaves its floor
   while the served rate stops following the offered one.

Writes `capacity.json`, `capacity.md` (the tables) and `capacity.png` (latency and served rate against
sessions) to `--out`. The machine is shared: the load average is recorded beside each step, and the
figures are what this machine gave at that load, not a promise for another one. Where the kernel
shares the CPU between sessions (Linux's autogroup, `/proc/sys/kernel/sched_autogroup_enabled`), this
run and everything it starts get one session's share whatever their nice value, so the knee is where
that share runs out (the replicas' wait for a core says so), while calls per core-second hold
whatever the share.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import socket
import ssl
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.fixtures import blocks
from bench.measure import cpu_seconds
from bench.postgres import _postmaster, _tree_cpu, new_database, start_postgres
from bench.streamable import _free_port, _request, _wait_for_port
from bench.targets import PYCACHE, ROOT
from tests.support.helpers import every_tool_env

WS = "ws_cap"
PAGES = 200
TOKEN_PREFIX = "cap-token-"
WIDTH = 16  # calls in flight in the per-core phase
PER_ADDRESS = 4  # sessions sharing one loopback address in the knee phase
# Mixed agent traffic: what an agent's calls are, by share (reads most, then edits, then searches).
MIX: tuple[tuple[str, float], ...] = (("read", 0.50), ("search", 0.15), ("update", 0.25), ("insert", 0.10))


def topic(n: int) -> str:
    """A word of one page's title alone (`kw007q`: no other title starts with it)."""
    return f"kw{n:03d}q"


def group(n: int) -> str:
    """A word ten pages' titles share."""
    return f"grp{n % (PAGES // 10):02d}x"


def fixture(actors: int) -> dict[str, Any]:
    return {
        "workspaces": [
            {
                "id": WS,
                "name": "Capacity",
                "members": [{"actorId": f"agent_{n}", "role": "editor"} for n in range(actors)],
                "pages": [
                    {"id": f"doc_{n}", "title": f"{topic(n)} notes, group {group(n)}", "blocks": blocks(50)}
                    for n in range(PAGES)
                ],
            }
        ]
    }


def call_of(kind: str, n: int, page: int) -> tuple[str, dict[str, Any]]:
    """The tool and arguments of one call of `kind` (the `n`th of its caller) on page `page`."""
    document = f"doc_{page % PAGES}"
    if kind == "read":
        return "mnote.page.get", {"workspaceId": WS, "documentId": document}
    if kind == "search":
        # what an agent looks for: a page by a word of its own, or the few pages a word they share
        word = topic(page % PAGES) if n % 2 else group(page % PAGES)
        return "mnote.page.search", {"query": word, "workspaceId": WS}
    key = f"k_{os.getpid()}_{page}_{n}_{time.monotonic_ns()}"
    if kind == "update":
        return "mnote.block.update", {
            "workspaceId": WS,
            "documentId": document,
            "blockId": f"b{1 + n % 40}",
            "text": f"edit {n}",
            "idempotencyKey": key,
            "dryRun": False,
        }
    return "mnote.block.insert", {
        "workspaceId": WS,
        "documentId": document,
        "blocks": [{"type": "paragraph", "text": f"note {n}"}],
        "position": "end",
        "idempotencyKey": key,
        "dryRun": False,
    }


def mixed(rng: random.Random) -> str:
    pick, total = rng.random(), 0.0
    for kind, share in MIX:
        total += share
        if pick < total:
            return kind
    return MIX[-1][0]


class Client:
    """One keep-alive HTTP/1.1 connection (TLS through the proxy), POSTs written by hand."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
        self.reader, self.writer, self.head = reader, writer, head
        self.next_id = 0

    @classmethod
    async def open(
        cls, port: int, token: str, *, tls: ssl.SSLContext | None = None, local: str | None = None
    ) -> Client:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1",
            port,
            ssl=tls,
            local_addr=(local, 0) if local else None,
            limit=16 * 1024 * 1024,
        )
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        head = "\r\n".join(
            [
                "POST /mcp HTTP/1.1",
                f"Host: 127.0.0.1:{port}",
                "Accept: application/json, text/event-stream",
                "Content-Type: application/json",
                "MCP-Protocol-Version: 2025-11-25",
                f"Authorization: Bearer {token}",
            ]
        )
        return cls(reader, writer, (head + "\r\n").encode("latin-1"))

    async def call(self, tool: str, arguments: dict[str, Any]) -> int:
        """The HTTP status; 200 only when the tool answered without a failure."""
        self.next_id += 1
        body = _request(self.next_id, "tools/call", {"name": tool, "arguments": arguments})
        self.writer.write(self.head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            payload = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding") == "chunked":
            chunks = []
            while size := int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16):
                chunks.append((await self.reader.readexactly(size + 2))[:-2])
            await self.reader.readuntil(b"\r\n")
            payload = b"".join(chunks)
        else:
            payload = b""
        if headers.get("connection", "").lower() == "close":
            raise ConnectionResetError(f"closed after {status}")
        if status != 200:
            return status
        text = payload.decode()
        if '"isError":true' in text.replace(" ", ""):
            return 0  # a tool failure (counted as an error)
        return status

    async def close(self) -> None:
        self.writer.close()
        with suppress(OSError, ssl.SSLError):
            await self.writer.wait_closed()


@dataclass
class Replica:
    port: int
    process: asyncio.subprocess.Process

    def cpu(self) -> float:
        try:
            return cpu_seconds(self.process.pid)
        except OSError:
            return 0.0

    def waited(self) -> dict[str, float]:
        """Seconds each of its threads has spent runnable but waiting for a core (/proc schedstat)."""
        out = {}
        for stat in Path(f"/proc/{self.process.pid}/task").glob("*/schedstat"):
            try:
                out[f"{self.process.pid}/{stat.parent.name}"] = int(stat.read_text().split()[1]) / 1e9
            except (OSError, IndexError, ValueError):
                continue
        return out


async def start_replicas(count: int, url: str, tokens: Path, pool: int, *flags: str) -> list[Replica]:
    replicas = []
    for _ in range(count):
        port = _free_port()
        argv = [sys.executable, "-m", "mnote_mcp", "serve", "--transport", "http", "--stateless"]
        argv += ["--db", url, "--port", str(port), "--auth-file", str(tokens), "--db-pool-size", str(pool)]
        argv += ["--log-level", "warning", "--allowed-hosts", "127.0.0.1:*", *flags]
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=ROOT,
            env={**os.environ, **PYCACHE, **every_tool_env()},  # writes are mnote.block.update
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        replicas.append(Replica(port, process))
    for replica in replicas:
        await _wait_for_port(replica.port, replica.process, within=120)
    return replicas


async def stop_replicas(replicas: list[Replica]) -> None:
    for replica in replicas:
        if replica.process.returncode is None:
            replica.process.terminate()
    for replica in replicas:
        try:
            await asyncio.wait_for(replica.process.wait(), 30)
        except TimeoutError:
            replica.process.kill()
            await replica.process.wait()


class Sampler:
    """PostgreSQL's connections from mnote (pg_stat_activity), sampled every half second."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.peak = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        import psycopg

        conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        try:
            while True:
                row = await (
                    await conn.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'mnote-mcp'"
                    )
                ).fetchone()
                self.peak = max(self.peak, int(row[0]) if row else 0)
                await asyncio.sleep(0.5)
        finally:
            await conn.close()

    def __enter__(self) -> Sampler:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()


@dataclass
class Step:
    """What one measured interval saw."""

    latencies: list[float] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)

    def count(self, status: int, seconds: float) -> None:
        key = "ok" if status == 200 else ("tool_error" if status == 0 else str(status))
        self.statuses[key] = self.statuses.get(key, 0) + 1
        if status == 200:
            self.latencies.append(seconds)

    def quantile(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3


@dataclass
class Meters:
    """CPU seconds of the replicas, PostgreSQL, nginx and this process, read at a step's start and end."""

    replicas: list[Replica]
    postmaster: int
    nginx_pids: list[int] = field(default_factory=list)
    _waited: dict[str, float] = field(default_factory=dict)

    def read(self) -> dict[str, float]:
        waited = {task: seconds for r in self.replicas for task, seconds in r.waited().items()}
        known, self._waited = self._waited, waited
        return {
            "replicas": sum(r.cpu() for r in self.replicas),
            # (threads that started or ended between two readings are left out)
            "replicas_waiting": sum(
                seconds - known[task] for task, seconds in waited.items() if task in known
            ),  # since the last reading
            "postgres": _tree_cpu(self.postmaster),
            "nginx": sum(_tree_cpu(pid) for pid in self.nginx_pids),
            "client": time.process_time(),
        }


async def per_core(kind: str, replica: Replica, meters: Meters, url: str, seconds: float) -> dict[str, Any]:
    """`WIDTH` calls in flight to one replica for `seconds`."""
    clients = [await Client.open(replica.port, f"{TOKEN_PREFIX}{lane}") for lane in range(WIDTH)]
    step = Step()
    rng = random.Random(7)
    stop = 0.0

    async def lane(n: int, client: Client) -> None:
        calls = 0
        while time.perf_counter() < stop:
            calls += 1
            chosen = mixed(rng) if kind == "mixed" else kind
            tool, arguments = call_of(chosen, calls, n + WIDTH * (calls % 4))
            started = time.perf_counter()
            status = await client.call(tool, arguments)
            if measuring:
                step.count(status, time.perf_counter() - started)

    measuring = False
    stop = time.perf_counter() + min(1.0, seconds / 2)  # (half a step for the quick run's short ones)
    await asyncio.gather(*(lane(n, c) for n, c in enumerate(clients)))  # warm up
    measuring = True
    with Sampler(url) as sampler:
        before, started = meters.read(), time.perf_counter()
        stop = started + seconds
        await asyncio.gather(*(lane(n, c) for n, c in enumerate(clients)))
        elapsed, after = time.perf_counter() - started, meters.read()
    for client in clients:
        await client.close()
    done = step.statuses.get("ok", 0)
    cores = (after["replicas"] - before["replicas"]) / elapsed
    return {
        "workload": kind,
        "replica_waiting_for_cpu": after["replicas_waiting"] / elapsed,  # (since `before`)
        "calls_per_s": done / elapsed,
        "replica_cores": cores,
        "calls_per_core_s": done / elapsed / cores if cores else float("nan"),
        "replica_cpu_ms_per_call": (after["replicas"] - before["replicas"]) / done * 1e3 if done else None,
        "postgres_cpu_ms_per_call": (after["postgres"] - before["postgres"]) / done * 1e3 if done else None,
        "pool_connections_peak": sampler.peak,
        "p50_ms": step.quantile(0.5),
        "p95_ms": step.quantile(0.95),
        "errors": {k: v for k, v in step.statuses.items() if k != "ok"},
        "load_average": os.getloadavg()[0],
    }


async def knee_step(
    sessions: int, port: int, tls: ssl.SSLContext, think: float, meters: Meters, url: str, seconds: float
) -> dict[str, Any]:
    """`sessions` agents through the proxy, each: a call of the mix, then about `think` seconds."""
    step = Step()
    measuring = False
    end = 0.0
    failed_opens = 0

    async def agent(n: int) -> None:
        nonlocal failed_opens
        rng = random.Random(n)
        await asyncio.sleep(rng.uniform(0, think))  # sessions start spread over one think time
        address = f"127.0.{1 + (n // PER_ADDRESS) // 250}.{2 + (n // PER_ADDRESS) % 250}"
        client: Client | None = None
        calls = 0
        while time.perf_counter() < end:
            if client is None:
                try:
                    client = await Client.open(port, f"{TOKEN_PREFIX}{n}", tls=tls, local=address)
                except (OSError, ssl.SSLError):
                    failed_opens += 1
                    await asyncio.sleep(think)
                    continue
            calls += 1
            tool, arguments = call_of(mixed(rng), calls, n)
            started = time.perf_counter()
            try:
                status = await client.call(tool, arguments)
            except (OSError, ssl.SSLError, asyncio.IncompleteReadError, ValueError):
                status = -1
                await client.close()
                client = None
            if measuring:
                step.count(status, time.perf_counter() - started)
            # (no longer than the step: a think drawn past its end would only keep the run waiting)
            await asyncio.sleep(min(rng.expovariate(1 / think), max(0.0, end - time.perf_counter())))
        if client is not None:
            await client.close()

    warm = max(think, 2.0)
    end = time.perf_counter() + warm + seconds
    group = asyncio.gather(*(agent(n) for n in range(sessions)))
    await asyncio.sleep(warm)
    measuring = True
    with Sampler(url) as sampler:
        before, started = meters.read(), time.perf_counter()
        await asyncio.sleep(seconds)
        measuring = False
        elapsed, after = time.perf_counter() - started, meters.read()
    await group
    done = step.statuses.get("ok", 0)
    used = {name: (after[name] - before[name]) / elapsed for name in after}
    used["replicas_waiting"] = after["replicas_waiting"] / elapsed  # (since `before`)
    return {
        "sessions": sessions,
        "offered_per_s": sessions / think,
        "served_per_s": done / elapsed,
        "p50_ms": step.quantile(0.5),
        "p95_ms": step.quantile(0.95),
        "p99_ms": step.quantile(0.99),
        "errors": {k: v for k, v in step.statuses.items() if k != "ok"},
        "failed_connects": failed_opens,
        "cores": {name: round(value, 2) for name, value in used.items()},
        "postgres_connections_peak": sampler.peak,
        "load_average": os.getloadavg()[0],
    }


def proxy_site(replicas: list[Replica], http_port: int, https_port: int, certificate: Any) -> str:
    """The shipped config with the replicas' addresses; replicas past two get a line in the upstream
    that carries calls without a session (all these are, `--stateless`) and in the probes' one."""
    from tests.support.nginx import shipped_config

    addresses = {tag: f"127.0.0.1:{replica.port}" for tag, replica in zip("ab", replicas, strict=False)}
    site = shipped_config(addresses, http_port=http_port, https_port=https_port, certificate=certificate)
    extra = replicas[2:]
    for upstream, options in (("mnote", " max_fails=1 fail_timeout=5s"), ("mnote_probes", " max_fails=0")):
        lines = "".join(f"    server 127.0.0.1:{r.port}{options};\n" for r in extra)
        site, found = re.subn(rf"(upstream {upstream} \{{\n(?:    server [^\n]+\n)+)", rf"\g<1>{lines}", site)
        assert found == 1, upstream
    return site


@contextmanager
def proxy(replicas: list[Replica], folder: Path) -> Iterator[tuple[int, ssl.SSLContext, list[int]]]:
    from tests.support.nginx import free_port, make_certificate, nginx

    folder.mkdir(parents=True, exist_ok=True)
    certificate = make_certificate(folder)
    https_port, http_port = free_port(), free_port()
    site = proxy_site(replicas, http_port, https_port, certificate)
    with nginx(
        site, folder / "nginx", https_port=https_port, http_port=http_port, worker_connections=8192
    ) as px:
        yield https_port, certificate.client_context(), [px.process.pid]


def nginx_installed() -> bool:
    return shutil.which("nginx") is not None or os.access("/usr/sbin/nginx", os.X_OK)


def seed(url: str, actors: int, folder: Path) -> Path:
    import subprocess

    path = folder / "fixture.json"
    path.write_text(json.dumps(fixture(actors)), encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "mnote_mcp", "seed", "--db", url, str(path)],
        check=True,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    tokens = folder / "tokens.json"
    grants = [{"token": f"{TOKEN_PREFIX}{n}", "actorId": f"agent_{n}"} for n in range(actors)]
    tokens.write_text(json.dumps({"tokens": grants}), encoding="utf-8")
    tokens.chmod(0o600)
    return tokens


async def run(args: argparse.Namespace) -> dict[str, Any]:
    sessions = [int(n) for n in args.sessions.split(",")]
    counts = [int(n) for n in args.replicas.split(",")]
    actors = max([*sessions, WIDTH])
    directory = tempfile.mkdtemp(prefix="mnote-pg-capacity-")
    server = start_postgres(directory)
    postmaster = _postmaster(directory)
    figures: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "cpus": os.cpu_count(),
        "load_average_start": os.getloadavg(),
        "pool": args.pool,
        "think_s": args.think,
        "per_core": [],
        "knee": {},
    }
    try:
        with tempfile.TemporaryDirectory(prefix="mnote-capacity-") as tmp:
            folder = Path(tmp)
            url = new_database(server, "capacity")
            tokens = seed(url, actors, folder)
            # As fast as it answers: the per-actor rates (fair share) would cap what this phase measures,
            # and at a rate that depends on the machine's load (a quiet machine met the search limit).
            one = await start_replicas(1, url, tokens, args.pool, "--no-call-limits")
            try:
                meters = Meters(one, postmaster)
                for kind in ("read", "write", "search", "mixed"):
                    row = await per_core(
                        "update" if kind == "write" else kind, one[0], meters, url, args.seconds
                    )
                    row["workload"] = kind
                    figures["per_core"].append(row)
                    print(json.dumps(row), flush=True)
            finally:
                await stop_replicas(one)
            if not nginx_installed():
                figures["knee_skipped"] = "nginx is not installed"
                return figures
            for count in counts:
                replicas = await start_replicas(count, url, tokens, args.pool)
                try:
                    with proxy(replicas, folder / f"proxy-{count}") as (port, tls, nginx_pids):
                        meters = Meters(replicas, postmaster, nginx_pids)
                        rows = []
                        for n in sessions:
                            row = await knee_step(n, port, tls, args.think, meters, url, args.seconds)
                            rows.append(row)
                            print(json.dumps({"replicas": count, **row}), flush=True)
                        figures["knee"][str(count)] = rows
                finally:
                    await stop_replicas(replicas)
    finally:
        server.cleanup()
    figures["load_average_end"] = os.getloadavg()
    return figures


def table(figures: dict[str, Any]) -> str:
    out = [
        f"Run {figures['started']}, {figures['cpus']} cores shared; load average (1 min) "
        f"{figures['load_average_start'][0]:.1f} at the start, {figures['load_average_end'][0]:.1f} at the end; "
        f"--db-pool-size {figures['pool']}.",
        "",
        "| one replica, 16 in flight | calls/s | replica cores (waiting for a core) | calls per core-second"
        " | replica CPU ms/call | PostgreSQL CPU ms/call | pool connections (peak) | p50 ms | p95 ms | load |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in figures["per_core"]:
        out.append(
            f"| {row['workload']} | {row['calls_per_s']:.0f} | {row['replica_cores']:.2f}"
            f" ({row['replica_waiting_for_cpu']:.2f}) |"
            f" {row['calls_per_core_s']:.0f} | {row['replica_cpu_ms_per_call']:.2f} |"
            f" {row['postgres_cpu_ms_per_call']:.2f} | {row['pool_connections_peak']} |"
            f" {row['p50_ms']:.1f} | {row['p95_ms']:.1f} | {row['load_average']:.1f} |"
        )
    for count, rows in figures["knee"].items():
        out += [
            "",
            f"| {count} replicas behind nginx, think {figures['think_s']} s | offered/s | served/s | p50 ms |"
            " p95 ms | p99 ms | errors | cores: replicas (waiting for a core) / PostgreSQL / nginx / client"
            " | PostgreSQL connections | load |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for row in rows:
            cores = row["cores"]
            errors = ", ".join(f"{k} {v}" for k, v in row["errors"].items()) or "0"
            out.append(
                f"| {row['sessions']} sessions | {row['offered_per_s']:.0f} | {row['served_per_s']:.0f} |"
                f" {row['p50_ms']:.0f} | {row['p95_ms']:.0f} | {row['p99_ms']:.0f} | {errors} |"
                f" {cores['replicas']:.2f} ({cores['replicas_waiting']:.2f}) / {cores['postgres']:.2f} /"
                f" {cores['nginx']:.2f} / {cores['client']:.2f} |"
                f" {row['postgres_connections_peak']} | {row['load_average']:.1f} |"
            )
    if "knee_skipped" in figures:
        out += ["", f"The knee was not measured: {figures['knee_skipped']}."]
    return "\n".join(out) + "\n"


def plot(figures: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    if not figures["knee"]:
        return False
    fig, (latency, rate) = plt.subplots(1, 2, figsize=(11, 4.2))
    for (count, rows), colour in zip(
        figures["knee"].items(), ("tab:blue", "tab:orange", "tab:green"), strict=False
    ):
        x = [row["sessions"] for row in rows]
        latency.plot(x, [row["p50_ms"] for row in rows], "o-", color=colour, label=f"{count} replicas, p50")
        latency.plot(x, [row["p95_ms"] for row in rows], "s--", color=colour, label=f"{count} replicas, p95")
        rate.plot(
            x, [row["served_per_s"] for row in rows], "o-", color=colour, label=f"{count} replicas, served"
        )
    first = next(iter(figures["knee"].values()))
    rate.plot([r["sessions"] for r in first], [r["offered_per_s"] for r in first], "k:", label="offered")
    for axes, label in ((latency, "latency (ms)"), (rate, "calls per second")):
        axes.set_xscale("log")
        axes.set_xlabel(f"concurrent agent sessions (think {figures['think_s']} s)")
        axes.set_ylabel(label)
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize=8)
    latency.set_yscale("log")
    fig.suptitle(
        f"mnote-mcp on one PostgreSQL, nginx in front ({figures['cpus']} shared cores, "
        f"load {figures['load_average_start'][0]:.1f}-{figures['load_average_end'][0]:.1f})",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.capacity", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smoke run: short steps, fewer sessions")
    parser.add_argument("--sessions", default="10,30,100,300,1000", help="knee steps (comma-separated)")
    parser.add_argument("--replicas", default="2,4", help="replica counts behind the proxy")
    parser.add_argument("--think", type=float, default=2.0, help="seconds between an agent's calls, mean")
    parser.add_argument("--seconds", type=float, default=12.0, help="measured seconds per step")
    parser.add_argument("--pool", type=int, default=8, help="--db-pool-size of each replica")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args(argv)
    if args.quick:
        args.sessions, args.replicas, args.seconds = "10,100", "2", 1.0
    runner: Callable[..., dict[str, Any]]
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    figures = runner(run(args))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "capacity.json").write_text(json.dumps(figures, indent=2), encoding="utf-8")
    text = table(figures)
    (args.out / "capacity.md").write_text(text, encoding="utf-8")
    plotted = plot(figures, args.out / "capacity.png")
    print(text)
    print(f"wrote {args.out / 'capacity.json'}, capacity.md" + (", capacity.png" if plotted else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
