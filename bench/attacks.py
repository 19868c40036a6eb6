"""`python -m bench.attacks`: issue 9's attacks, replayed against a real `mnote-mcp serve --transport http`.

- 400 unauthenticated POSTs announcing a 4 MiB body, each sending its first 64 KiB: how many are
  refused before their body is read, how fast, how many connections the server closed, and the
  server's resident memory before and after (issue 9 measured 1.62 GB held);
- 1,000 half-sent requests (headers never finished): how many are refused at accept (the connection
  cap, 500), how many file descriptors the server holds, what an authenticated client gets meanwhile
  (the longest-waiting half-sent request makes room for it), and what is left after the header timeout;
- one token opening sessions as fast as it can (issue 9: 10,000 in 20 s locked everyone out): how many
  it gets (429 after the per-token cap), and whether another token still gets in;
- 100 stateful sessions that subscribe and end, and 100 subscribes on a `--stateless` server: the
  watches left behind (issue 9: 500 and 2,000 left);
- a page at the size limit saved with a ping every 10 ms (`bench.bigpage.in_process`): the save's
  time, the longest a ping waited, and the refusal of one block more;
- the reference runtime (`runtime serve`, a service token): the same unauthenticated bodies and
  half-sent requests, and authenticated 64 MiB bodies (`--max-body-bytes` 32 MiB).

`python -m bench.attacks runtime` runs the runtime's part alone; `python -m bench.attacks postgres
[--before DIR]` the broad-search attack on a PostgreSQL replica (`bench/broadsearch.py`); `python -m
bench.attacks many-ids [BASE_DIR]` issue 26's many-id deletes and another tenant's reads meanwhile (`bench.manyids`);
`python -m bench.attacks outage [--before DIR]` stops and starts PostgreSQL under a replica
(`bench/outage.py`, issue 23); `python -m bench.attacks loop [--before DIR]`
sends issue 30's edit_text amplification and completion storm while another token reads
(`bench/loopattacks.py`); `python -m bench.attacks flood
[--before DIR]` floods a server with connections that send nothing (2,000 at once, each replaced as
soon as it ends, 20 s; issue 26) on each event loop, under `ulimit -n 1024` and a high limit: the
server's peak file descriptors, what it logged, and an authenticated client's calls meanwhile; with
`--before`, the same against the checkout DIR (the code before a fix) right ahead of each run.

Figures for docs/security.md. The machine these run on may be shared: the times are noisy, the counts
are not.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2

from tests.support.flood import fd_peak, flooding, open_fds
from tests.support.helpers import RAW_INITIALIZE, ROOT, call, page_args, seeded_store
from tests.support.http_helpers import address, http_server, mcp_http, write_tokens

TOKENS: dict[str, dict[str, Any]] = {
    "tok-a": {"actorId": "user_editor"},
    "tok-b": {"actorId": "user_viewer", "scopes": ["page.read"]},
}
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
PAGE_URI = "mnote://workspaces/ws_1/pages/doc_1"
RUNTIME_TOKEN = "runtime-attacks-token"
HEADER_TIMEOUT = 10.0  # the default of --header-timeout: half-sent requests are cut after it


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """The resident memory of `pid` now (or its peak so far: `VmHWM`)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def _head(url: str, token: str | None, length: int, path: str = "/mcp") -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{_address(url)[1]}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\n{auth}Content-Length: {length}\r\n\r\n"
    ).encode()


async def _reply(reader: asyncio.StreamReader, wait: float) -> tuple[bytes, bool]:
    """The first bytes the server answers, and whether it then closed the connection."""
    try:
        first = await asyncio.wait_for(reader.read(64), wait)
    except (TimeoutError, ConnectionError):
        return b"", False
    try:
        while await asyncio.wait_for(reader.read(65536), wait):
            pass
    except TimeoutError:
        return first, False
    except ConnectionError:  # reset: the server closed with our bytes unread
        pass
    return first, True


async def unauthenticated_bodies(url: str, pid: int, count: int = 400, path: str = "/mcp") -> dict[str, Any]:
    before = rss_mb(pid)
    host, port = _address(url)
    started = time.perf_counter()

    async def one(index: int) -> tuple[bytes, bool, float]:
        reader, writer = await asyncio.open_connection(host, port)
        token = None if index % 2 else "not-a-token"
        writer.write(_head(url, token, 4 * 1024 * 1024, path) + b"x" * 65536)
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        sent = time.perf_counter()
        first, closed = await _reply(reader, 5)
        writer.close()
        return first, closed, time.perf_counter() - sent

    results = await asyncio.gather(*(one(i) for i in range(count)))
    after = rss_mb(pid)
    return {
        "connections": count,
        "refused_401": sum(1 for first, _, _ in results if first.startswith(b"HTTP/1.1 401")),
        "closed_by_server": sum(1 for _, closed, _ in results if closed),
        "median_refusal_ms": statistics.median(took for _, _, took in results) * 1000,
        "rss_before_mb": before,
        "rss_after_mb": after,
        "attack_s": time.perf_counter() - started,
    }


async def half_sent_headers(
    url: str,
    pid: int,
    count: int = 1000,
    path: str = "/mcp",
    probe: Callable[[str], Awaitable[int]] | None = None,
) -> dict[str, Any]:
    host, port = _address(url)
    fds_before = open_fds(pid)
    held: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    for _ in range(count):
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode())
        held.append((reader, writer))
    started = time.perf_counter()
    await asyncio.sleep(0.5)
    fds_during = open_fds(pid)
    firsts = await asyncio.gather(*(_peek(reader) for reader, _ in held))
    refused_at_accept = sum(1 for first in firsts if first.startswith((b"HTTP/1.1 503", b"reset")))
    evicted = sum(1 for first in firsts if first.startswith(b"HTTP/1.1 408"))
    asked = time.perf_counter()
    during = await (probe or _authenticated_status)(url)
    during_s = time.perf_counter() - asked
    peak, drained = fds_during, None
    while time.perf_counter() - started < 4 * HEADER_TIMEOUT:
        fds = open_fds(pid)
        peak = max(peak, fds)
        if fds <= fds_before + 2:
            drained = time.perf_counter() - started
            break
        await asyncio.sleep(0.25)
    for _, writer in held:
        writer.close()
    return {
        "connections": count,
        "refused_at_accept": refused_at_accept,
        "cut_to_make_room": evicted,
        "server_fds_before": fds_before,
        "server_fds_peak": peak,
        "authenticated_status_during": during,
        "authenticated_call_during_s": during_s,
        "all_cut_after_s": drained,
    }


async def _peek(reader: asyncio.StreamReader) -> bytes:
    """What the server sent so far; a reset (a refused connection closed with our bytes unread) is
    reported as `reset`."""
    try:
        return await asyncio.wait_for(reader.read(64), 0.05)
    except TimeoutError:
        return b""
    except ConnectionError:
        return b"reset"


async def _authenticated_status(url: str, token: str = "tok-a") -> int:
    try:
        async with httpx2.AsyncClient(timeout=5) as http:
            reply = await http.post(
                f"{url}/mcp",
                json=RAW_INITIALIZE,
                headers={**JSON_HEADERS, "Authorization": f"Bearer {token}"},
            )
        return reply.status_code
    except httpx2.HTTPError:
        return 0


async def session_flood(url: str, attempts: int = 300) -> dict[str, Any]:
    statuses: dict[int, int] = {}
    started = time.perf_counter()
    async with httpx2.AsyncClient(timeout=10) as http:
        for _ in range(attempts):
            reply = await http.post(
                f"{url}/mcp", json=RAW_INITIALIZE, headers={**JSON_HEADERS, "Authorization": "Bearer tok-a"}
            )
            statuses[reply.status_code] = statuses.get(reply.status_code, 0) + 1
        took = time.perf_counter() - started
        other = await _authenticated_status(url, "tok-b")
        health = (await http.get(f"{url}/healthz")).json()
    return {
        "attempts": attempts,
        "statuses": statuses,
        "flood_s": took,
        "other_token_status": other,
        "sessions_open": health["sessions"],
    }


async def watches_left(url: str, count: int = 100) -> dict[str, Any]:
    """Open, subscribe, end: `count` times; the watches the server holds afterwards."""
    outcomes: dict[str, int] = {}
    async with httpx2.AsyncClient(timeout=10) as http:
        auth = {**JSON_HEADERS, "Authorization": "Bearer tok-a"}
        for _ in range(count):
            opened = await http.post(f"{url}/mcp", json=RAW_INITIALIZE, headers=auth)
            session = opened.headers.get("mcp-session-id")
            headers = {**auth, **({"Mcp-Session-Id": session} if session else {})}
            if session:
                await http.post(
                    f"{url}/mcp",
                    json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                    headers=headers,
                )
            reply = await http.post(
                f"{url}/mcp",
                json={
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "resources/subscribe",
                    "params": {"uri": PAGE_URI},
                },
                headers=headers,
            )
            outcome = (
                "subscribed"
                if '"result"' in reply.text
                else "refused"
                if '"error"' in reply.text
                else "other"
            )
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            if session:
                await http.delete(f"{url}/mcp", headers=headers)
        peak = (await http.get(f"{url}/healthz")).json()["watches"]
        await asyncio.sleep(1.5)
        after = (await http.get(f"{url}/healthz")).json()["watches"]
    return {"sessions": count, "outcomes": outcomes, "watches_right_after": peak, "watches_1_5s_later": after}


async def _runtime_status(url: str) -> int:
    """An authenticated runtime call (a page read through the relay's own client) and its status."""
    try:
        async with httpx2.AsyncClient(
            timeout=5, headers={"Authorization": f"Bearer {RUNTIME_TOKEN}"}
        ) as http:
            return (await http.get(f"{url}/v1/pages", params={"actorId": "user_editor"})).status_code
    except httpx2.HTTPError:
        return 0


async def large_bodies(url: str, pid: int, count: int = 8, size: int = 64 * 1024 * 1024) -> dict[str, Any]:
    """Authenticated clients sending `size` bytes each (not announced: chunked), as fast as they can."""
    before = rss_mb(pid)
    host, port = _address(url)
    head = (
        f"POST /v1/pages/query HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {RUNTIME_TOKEN}\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()
    piece = b"%x\r\n%s\r\n" % (1 << 20, b" " * (1 << 20))

    async def one() -> tuple[bytes, int]:
        reader, writer = await asyncio.open_connection(host, port)
        answer = asyncio.ensure_future(_reply(reader, 30))  # read while sending: a refusal comes early
        writer.write(head)
        sent = 0
        with contextlib.suppress(ConnectionError):
            for _ in range(size >> 20):
                writer.write(piece)
                await writer.drain()
                sent += 1 << 20
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        first, _ = await answer
        writer.close()
        return first, sent

    started = time.perf_counter()
    results = await asyncio.gather(*(one() for _ in range(count)))
    return {
        "clients": count,
        "bytes_each": size,
        "statuses": sorted({first[9:12].decode(errors="replace") for first, _ in results}),
        "most_sent_mb": max(sent for _, sent in results) / (1 << 20),
        "rss_before_mb": before,
        "rss_after_mb": rss_mb(pid),
        "rss_peak_mb": rss_mb(pid, "VmHWM"),
        "attack_s": time.perf_counter() - started,
    }


async def runtime_attacks() -> dict[str, Any]:
    """The reference runtime's own server under the same attacks (default limits, a service token)."""
    from tests.support.runtimes import reference_runtime

    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="mnote-attacks-") as tmp:
        root = Path(tmp)
        with reference_runtime(seeded_store(root / "r.db"), root, token=RUNTIME_TOKEN) as runtime:
            assert runtime.process is not None
            pid = runtime.process.pid
            results["idle_rss_mb"] = rss_mb(pid)
            results["unauthenticated_bodies"] = await unauthenticated_bodies(
                runtime.url, pid, path="/v1/pages/query"
            )
            results["half_sent_headers"] = await half_sent_headers(
                runtime.url, pid, path="/v1/pages/query", probe=_runtime_status
            )
            results["large_bodies"] = await large_bodies(runtime.url, pid)
    return results


async def _calls_meanwhile(url: str, stop: asyncio.Event) -> dict[str, Any]:
    """An authenticated MCP client reading a page over and over until `stop`: how many answered, how
    many failed (a failed client is replaced by a new one), and how long they took."""
    answered, failed, took = 0, 0, []
    while not stop.is_set():
        try:
            async with mcp_http(url, "tok-a") as client:
                while not stop.is_set():
                    started = time.perf_counter()
                    if not (await call(client, "mnote.page.get", **page_args()))["ok"]:
                        failed += 1
                        continue
                    took.append(time.perf_counter() - started)
                    answered += 1
                    await asyncio.sleep(0.1)
        except Exception:  # the client's connection was cut: count it, start another
            failed += 1
    return {
        "answered": answered,
        "failed": failed,
        "median_ms": statistics.median(took) * 1000 if took else None,
        "max_ms": max(took) * 1000 if took else None,
    }


async def connection_flood(
    root: Path, *, loop: str, open_files: int | None, clients: int = 2000, seconds: float = 20.0
) -> dict[str, Any]:
    """`clients` connections that send nothing, each replaced as soon as it ends, for `seconds`, against
    a server of the checkout `root` with default limits (`--max-connections` 500): the server's
    descriptors at their peak, what it logged meanwhile, and an authenticated client's calls."""
    with tempfile.TemporaryDirectory(prefix="mnote-flood-") as tmp:
        work = Path(tmp)
        tokens = write_tokens(work / "tokens.json", {"tok-a": {"actorId": "user_editor"}})
        args = ("--auth-file", str(tokens), *(["--no-uvloop"] if loop == "asyncio" else []))
        with http_server(seeded_store(work / "a.db"), *args, open_files=open_files, root=root) as server:
            pid = server.process.pid
            host, port = address(server.url)
            before, logged = open_fds(pid), len(server.stderr)
            stop = asyncio.Event()
            with fd_peak(pid) as peak:
                async with flooding(host, port, clients=clients) as flood:
                    calls = asyncio.ensure_future(_calls_meanwhile(server.url, stop))
                    await asyncio.sleep(seconds)
                    stop.set()
                    meanwhile = await calls
            # what the server logged meanwhile, but the one line per tool call of the client's calls
            during = "".join(line for line in server.stderr[logged:] if "mnote_mcp.calls" not in line)
    return {
        "loop": loop,
        "ulimit_n": open_files,
        "flood_connections": flood.opened,
        "server_fds_before": before,
        "server_fds_peak": peak.value,
        "logged_bytes": len(during.encode()),  # the client's own call lines left out
        "tracebacks": during.count("Traceback"),
        "authenticated_calls": meanwhile,
    }


async def flood_before_after(before: Path | None) -> dict[str, Any]:
    """The connection flood on this checkout, and on `before` (another checkout: the code before a
    fix) right ahead of it, for each loop, with `ulimit -n 1024` and with a high limit."""
    results: dict[str, Any] = {}
    for loop in ("uvloop", "asyncio"):
        for open_files in (1024, None):
            name = f"{loop}, ulimit -n {open_files or 'high'}"
            for label, root in (("before", before), ("after", ROOT)):
                if root is not None:
                    results.setdefault(name, {})[label] = await connection_flood(
                        root, loop=loop, open_files=open_files
                    )
    return results


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The attack to run (none: issue 9's set) and its arguments; `postgres` and `outage` read the rest
    themselves."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.attacks",
        description=(__doc__ or "").split("\n\n")[0],
        epilog="Without an attack: issue 9's set, as this module's docstring lists it.",
    )
    attacks = parser.add_subparsers(dest="attack", metavar="ATTACK")
    attacks.add_parser("runtime", help="the reference runtime's part alone")
    many = attacks.add_parser("many-ids", help="issue 26's many-id deletes and another tenant's reads")
    many.add_argument("base", nargs="?", type=Path, help="a checkout of other code, run beside this one")
    flood = attacks.add_parser("flood", help="connections that send nothing, on each event loop")
    flood.add_argument("--before", type=Path, help="a checkout of the code before a fix, run first")
    loop = attacks.add_parser("loop", help="issue 30's edit_text amplification and completion storm")
    loop.add_argument("--before", type=Path, help="a checkout of the code before a fix, side by side")
    loop.add_argument("--quick", action="store_true", help="a smoke run")
    attacks.add_parser(
        "postgres", help="broad searches on a PostgreSQL replica (its own --help)", add_help=False
    )
    attacks.add_parser(
        "outage", help="PostgreSQL stopped and started under a replica (its own --help)", add_help=False
    )
    args, rest = parser.parse_known_args(argv)
    if rest and args.attack not in ("postgres", "outage"):
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return args, rest


async def main(args: argparse.Namespace) -> dict[str, Any]:
    from bench.bigpage import in_process

    if args.attack == "runtime":
        return {"runtime": await runtime_attacks()}
    if args.attack == "many-ids":  # issue 26; optionally against a checkout of another commit too
        from bench.manyids import many_ids

        return {"many_ids": await many_ids(args.base)}
    if args.attack == "flood":
        return {"connection_flood": await flood_before_after(args.before)}
    if args.attack == "loop":  # issue 30: edit_text amplification and a completion storm
        from bench.loopattacks import loop_attacks

        return {"loop": await loop_attacks(args.before, quick=args.quick)}

    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="mnote-attacks-") as tmp:
        root = Path(tmp)
        tokens = write_tokens(root / "tokens.json", TOKENS)
        db = seeded_store(root / "a.db")
        with http_server(db, "--auth-file", str(tokens)) as server:
            pid = server.process.pid
            results["idle_rss_mb"] = rss_mb(pid)
            results["unauthenticated_bodies"] = await unauthenticated_bodies(server.url, pid)
            results["half_sent_headers"] = await half_sent_headers(server.url, pid)
            results["session_flood"] = await session_flood(server.url)
        with http_server(db, "--auth-file", str(tokens)) as server:
            results["watches_stateful"] = await watches_left(server.url)
        with http_server(db, "--auth-file", str(tokens), "--stateless") as server:
            results["watches_stateless"] = await watches_left(server.url)
        results["page_at_the_limit"] = await in_process(seeded_store(root / "b.db"))
    results["runtime"] = await runtime_attacks()
    return results


if __name__ == "__main__":
    arguments, rest = parse(sys.argv[1:])
    if arguments.attack == "postgres":
        from bench.broadsearch import main as broad_search

        print(json.dumps(broad_search(rest), indent=2))
    elif arguments.attack == "outage":
        from bench.outage import main as outage

        print(json.dumps(outage(rest), indent=2))
    else:
        print(json.dumps(anyio.run(main, arguments), indent=2))
