"""`python -m bench.streamable`: streamable HTTP, with sessions and `--stateless`, this tree against an
earlier one (`--baseline DIR`, a checkout of the commit to compare with, run with its own code) and
the SDK's plain streamable-HTTP echo (the floor), in one run, targets interleaved round by round.

For each target: p50/p90 of sequential reads (`mnote.page.get` of a 50-block page; the echo's
`echo_page` of 50 blocks) and writes (`mnote.artifact.create_ai_note`), throughput with `--width`
calls in flight (reads and writes), and server CPU microseconds per call in the throughput phase (from
/proc: what the server did, the figure a shared machine moves least). The client is a raw HTTP/1.1
client on asyncio (one keep-alive connection per call in flight, no HTTP library), so that client
overhead does not hide server cost on a 2-core machine. Each target runs as it serves by default, with
a bearer token (mnote) and info logging of every call.

`--variant=FLAGS` (repeatable; the `=` keeps argparse from reading FLAGS as its own option) adds this
tree run with more flags, e.g. `--variant=--sse-responses`: one cut undone, to see its share.

`python -m bench.streamable profile TARGET OUT.svg` records a py-spy flame graph of one target under the
throughput load instead (`mnote`, `mnote --stateless`, `baseline`, `baseline --stateless`, `echo`,
`echo --stateless`; the baseline ones need `--baseline`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import fixtures
from bench.fixtures import ACTOR, PAGE, WORKSPACE
from bench.measure import cpu_seconds, percentiles, without_call_limits
from bench.rawclient import INIT, PROTOCOL
from bench.run import seed_baseline
from bench.targets import ROOT

TOKEN = "bench-token"
_unique = itertools.count()


class RawHttp:
    """One keep-alive HTTP/1.1 connection: a POST written by hand, the answer parsed by hand
    (Content-Length or chunked; an SSE body's `data:` lines)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, port: int) -> RawHttp:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=16 * 1024 * 1024)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(reader, writer)

    async def post(self, head: bytes, body: bytes) -> tuple[int, dict[str, str], list[dict[str, Any]]]:
        self.writer.write(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        status_and_headers = await self.reader.readuntil(b"\r\n\r\n")
        lines = status_and_headers.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            payload = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding") == "chunked":
            chunks = []
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await self.reader.readuntil(b"\r\n")
                    break
                chunks.append((await self.reader.readexactly(size + 2))[:-2])
            payload = b"".join(chunks)
        else:
            payload = b""
        if headers.get("connection", "").lower() == "close":
            self.writer.close()
        messages: list[dict[str, Any]] = []
        if headers.get("content-type", "").startswith("text/event-stream"):
            for event_line in payload.split(b"\n"):
                if event_line.startswith(b"data:") and event_line[5:].strip():
                    messages.append(json.loads(event_line[5:]))
        elif payload:
            messages.append(json.loads(payload))
        return status, headers, messages

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()


Args = Callable[[int], dict[str, Any]]


@dataclass
class Target:
    name: str
    argv: list[str]
    cwd: Path
    env: dict[str, str]
    read: tuple[str, Args]
    write: tuple[str, Args]
    token: str | None = None
    port: int = 0
    process: asyncio.subprocess.Process | None = None
    session: dict[str, str] = field(default_factory=dict)
    _next_id: Any = field(default_factory=itertools.count)

    def head(self) -> bytes:
        lines = [
            "POST /mcp HTTP/1.1",
            f"Host: 127.0.0.1:{self.port}",
            "Accept: application/json, text/event-stream",
            "Content-Type: application/json",
            *(f"{name}: {value}" for name, value in self.session.items()),
            *([f"Authorization: Bearer {self.token}"] if self.token else []),
        ]
        return ("\r\n".join(lines) + "\r\n").encode("latin-1")

    async def start(self) -> None:
        self.port = _free_port()
        self.process = await asyncio.create_subprocess_exec(
            *self.argv,
            str(self.port),
            cwd=self.cwd,
            env={**os.environ, **self.env},
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await _wait_for_port(self.port, self.process)
        connection = await RawHttp.open(self.port)
        try:
            self.session = {}
            status, headers, _ = await connection.post(
                self.head(), _request(next(self._next_id), "initialize", INIT)
            )
            if status != 200:
                raise RuntimeError(f"{self.name}: initialize answered {status}")
            if "mcp-session-id" in headers:
                self.session["mcp-session-id"] = headers["mcp-session-id"]
            self.session["mcp-protocol-version"] = PROTOCOL
            note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
            await connection.post(self.head(), note)
        finally:
            await connection.close()

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
            try:
                await asyncio.wait_for(self.process.wait(), 20)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()

    async def call(self, connection: RawHttp, spec: tuple[str, Args], n: int) -> None:
        tool, args = spec
        ident = next(self._next_id)
        body = _request(ident, "tools/call", {"name": tool, "arguments": args(n)})
        status, _, messages = await connection.post(self.head(), body)
        answer = next((m for m in messages if m.get("id") == ident), None)
        if status != 200 or answer is None or "result" not in answer or answer["result"].get("isError"):
            raise RuntimeError(f"{self.name}: {tool} answered {status}: {messages!r:.300}")

    def cpu(self) -> float:
        assert self.process is not None
        return cpu_seconds(self.process.pid)


def _request(ident: int, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": method, "params": params}).encode()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _wait_for_port(port: int, process: asyncio.subprocess.Process, within: float = 60) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if process.returncode is not None:
            raise RuntimeError("the HTTP server exited at start")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


def _read(n: int) -> dict[str, Any]:
    return {"workspaceId": WORKSPACE, "documentId": PAGE}


def _write(n: int) -> dict[str, Any]:
    return {
        "workspaceId": WORKSPACE,
        "documentId": PAGE,
        "content": f"note {n}",
        "idempotencyKey": f"bench_http_{os.getpid()}_{next(_unique)}",
        "dryRun": False,
    }


def _echo_page(n: int) -> dict[str, Any]:
    return {"blocks": 50}


def mnote_target(
    db: Path, stateless: bool, baseline: Path | None = None, extra: tuple[str, ...] = ()
) -> Target:
    name = "mnote" if baseline is None else "baseline"
    flags = [*extra, *(["--stateless"] if stateless else [])]
    env = {"MNOTE_TOKEN": TOKEN, "PYTHONDONTWRITEBYTECODE": "1"}
    if baseline is not None:
        env["PYTHONPATH"] = str(baseline)
    return Target(
        name=" ".join([name, *flags]),
        argv=[
            sys.executable,
            "-m",
            "mnote_mcp",
            "serve",
            "--transport",
            "http",
            "--db",
            str(db),
            "--actor",
            ACTOR,
            *flags,
            "--port",
        ],
        cwd=baseline or ROOT,  # `python -m` puts the working directory first on sys.path
        env=env,
        read=("mnote.page.get", _read),
        write=("mnote.artifact.create_ai_note", _write),
        token=TOKEN,
    )


def echo_target(stateless: bool) -> Target:
    mode = ["http-stateless"] if stateless else ["http"]
    return Target(
        name="echo --stateless" if stateless else "echo",
        argv=[sys.executable, str(ROOT / "bench" / "echo_server.py"), *mode],
        cwd=ROOT,
        env={},
        read=("echo_page", _echo_page),
        write=("echo_page", _echo_page),
    )


async def sequential(target: Target, spec: tuple[str, Args], count: int) -> list[float]:
    connection = await RawHttp.open(target.port)
    samples = []
    try:
        for n in range(count):
            started = time.perf_counter()
            await target.call(connection, spec, n)
            samples.append(time.perf_counter() - started)
    finally:
        await connection.close()
    return samples


async def in_flight(target: Target, spec: tuple[str, Args], total: int, width: int) -> tuple[float, float]:
    """Calls per second with `width` calls always outstanding (one connection each), and the server's
    CPU microseconds per call meanwhile."""
    connections = [await RawHttp.open(target.port) for _ in range(width)]
    counter = iter(range(total))

    async def lane(connection: RawHttp) -> None:
        for n in counter:
            await target.call(connection, spec, n)

    try:
        cpu = target.cpu()
        started = time.perf_counter()
        await asyncio.gather(*(lane(c) for c in connections))
        elapsed = time.perf_counter() - started
        return total / elapsed, (target.cpu() - cpu) / total * 1e6
    finally:
        for connection in connections:
            await connection.close()


KINDS = ("read", "write")


async def run(
    targets: list[Target], rounds: int, calls: int, throughput_calls: int, width: int
) -> dict[str, Any]:
    samples: dict[str, dict[str, list[float]]] = {
        t.name: {key: [] for kind in KINDS for key in (f"{kind}_latency", f"{kind}_per_s", f"{kind}_cpu_us")}
        for t in targets
    }
    try:
        for target in targets:
            await target.start()
        for target in targets:  # warm up: first calls compile, cache, page in
            await sequential(target, target.read, 30)
            await sequential(target, target.write, 30)
        for _ in range(rounds):
            for target in targets:
                for kind in KINDS:
                    spec = target.read if kind == "read" else target.write
                    samples[target.name][f"{kind}_latency"] += await sequential(target, spec, calls)
                    per_s, cpu = await in_flight(target, spec, throughput_calls, width)
                    samples[target.name][f"{kind}_per_s"].append(per_s)
                    samples[target.name][f"{kind}_cpu_us"].append(cpu)
    finally:
        for target in targets:
            await target.stop()
    out: dict[str, Any] = {}
    for name, s in samples.items():
        out[name] = {
            **{kind: percentiles(s[f"{kind}_latency"]) for kind in KINDS},
            **{f"{kind}_per_s": statistics.median(s[f"{kind}_per_s"]) for kind in KINDS},
            **{f"{kind}_cpu_us": statistics.median(s[f"{kind}_cpu_us"]) for kind in KINDS},
            "rounds_per_s": {kind: s[f"{kind}_per_s"] for kind in KINDS},
        }
    return out


def ratios(results: dict[str, Any]) -> list[tuple[str, float]]:
    """This tree against the baseline, sessions and stateless: throughput up, p50 and CPU down."""
    out = []
    for mode in ("", " --stateless"):
        this, before = results.get("mnote" + mode), results.get("baseline" + mode)
        if this is None or before is None:
            continue
        label = "stateless" if mode else "sessions"
        for kind in KINDS:
            out.append(
                (f"{label} {kind} throughput this/baseline", this[f"{kind}_per_s"] / before[f"{kind}_per_s"])
            )
        for kind in KINDS:
            out.append((f"{label} {kind} p50 this/baseline", this[kind]["p50"] / before[kind]["p50"]))
        for kind in KINDS:
            out.append(
                (f"{label} {kind} CPU/call this/baseline", this[f"{kind}_cpu_us"] / before[f"{kind}_cpu_us"])
            )
    return out


def table(results: dict[str, Any], width: int) -> str:
    rows = [
        f"{'target':24} {'read p50':>9} {'p90':>7} {'write p50':>10} {'p90':>7} "
        f"{f'{width}-wide r/s':>11} {'w/s':>6} {'cpu r us':>9} {'w us':>6}"
    ]
    for name, r in results.items():
        rows.append(
            f"{name:24} {r['read']['p50']:9.0f} {r['read']['p90']:7.0f} {r['write']['p50']:10.0f} "
            f"{r['write']['p90']:7.0f} {r['read_per_s']:11.0f} {r['write_per_s']:6.0f} "
            f"{r['read_cpu_us']:9.0f} {r['write_cpu_us']:6.0f}"
        )
    rows.append("")
    rows += [f"{label:44} {value:6.2f}" for label, value in ratios(results)]
    return "\n".join(rows)


def build_targets(
    db: Path, baseline: Path | None, names: list[str] | None = None, variants: tuple[str, ...] = ()
) -> list[Target]:
    candidates = [echo_target(False), echo_target(True)]
    if baseline is not None:  # its own store, seeded by its own code (its schema may be older)
        old = db.with_name("baseline.db")
        if not old.exists():
            seed_baseline(old, baseline, (50,))
        candidates += [mnote_target(old, False, baseline), mnote_target(old, True, baseline)]
    candidates += [mnote_target(db, False), mnote_target(db, True)]
    for flags in variants:  # this tree with more flags, e.g. the SDK's SSE answers: one cut undone
        candidates += [
            mnote_target(db, False, None, tuple(flags.split())),
            mnote_target(db, True, None, tuple(flags.split())),
        ]
    if names is None:
        return candidates
    chosen = [t for t in candidates if t.name in names]
    if len(chosen) != len(names):
        raise SystemExit(f"unknown target among {names}: choose from {[t.name for t in candidates]}")
    return chosen


async def profile(target: Target, out: Path, seconds: int, width: int, form: str = "flamegraph") -> int:
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    try:
        await target.start()
        await sequential(target, target.read, 50)
        assert target.process is not None
        record = ["record", "--pid", str(target.process.pid), "-d", str(seconds), "-r", "250"]
        sampler = await asyncio.create_subprocess_exec(
            spy, *record, "-o", str(out), "-f", form, stdout=subprocess.DEVNULL
        )
        await asyncio.sleep(1)
        calls, end = 0, time.monotonic() + seconds - 1
        while time.monotonic() < end:
            await in_flight(target, target.read, 200, width)
            calls += 200
        status = await sampler.wait()
    finally:
        await target.stop()
    print(f"{target.name}: {calls} reads in {seconds} s sampled into {out}")
    return status


async def main_async(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="mnote-bench-http-") as tmp:
        db = Path(tmp) / "bench.db"
        fixtures.seed_mnote(db, (50,))
        if args.command == "profile":
            (target,) = build_targets(db, args.baseline, [args.target], tuple(args.variant))
            return await profile(target, args.out, args.seconds, args.width, args.format)
        names = [n.strip() for n in args.targets.split(",")] if args.targets else None
        targets = build_targets(db, args.baseline, names, tuple(args.variant))
        started = time.strftime("%Y-%m-%d %H:%M:%S")
        results = await run(targets, args.rounds, args.calls, args.throughput_calls, args.width)
        print(
            f"streamable HTTP, {args.rounds} rounds interleaved; {args.calls} sequential calls and "
            f"{args.throughput_calls} with {args.width} in flight per round and kind; started {started}; "
            f"load {os.getloadavg()[0]:.2f} at the end"
        )
        print("(latencies in µs; r/s, w/s: reads/writes per second; cpu: server µs per call, in flight)\n")
        print(table(results, args.width))
        if args.json:
            args.json.write_text(json.dumps({"started": started, "results": results}, indent=2) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    without_call_limits()
    parser = argparse.ArgumentParser(prog="python -m bench.streamable", description=__doc__)
    parser.add_argument("command", nargs="?", default="run", choices=("run", "profile"))
    parser.add_argument("target", nargs="?", help="profile: the target to sample")
    parser.add_argument("out", nargs="?", type=Path, help="profile: the SVG to write")
    parser.add_argument(
        "--baseline", type=Path, help="a source tree of the earlier server, run with its own code"
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="FLAGS",
        help="also this tree with these flags (sessions and stateless), e.g. '--sse-responses'; repeatable",
    )
    parser.add_argument("--targets", help="comma-separated target names (default: all)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200, help="sequential calls per round and kind")
    parser.add_argument(
        "--throughput-calls", type=int, default=1000, help="calls in flight per round and kind"
    )
    parser.add_argument("--width", type=int, default=32, help="calls in flight")
    parser.add_argument("--seconds", type=int, default=20, help="profile: how long to sample")
    parser.add_argument(
        "--format",
        default="flamegraph",
        choices=("flamegraph", "raw"),
        help="profile: SVG or collapsed stacks",
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    if args.command == "profile" and (args.target is None or args.out is None):
        parser.error("profile needs TARGET and OUT")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
