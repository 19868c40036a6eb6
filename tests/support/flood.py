"""A connection flood for tests and `bench.attacks`: many clients that connect and send nothing (or
half a request's headers), reconnecting as soon as the server lets go, from a process of their own
(an attacker is not the legitimate client: sharing its event loop would slow that client down, not
the server); and a sampler of the server's open file descriptors (`/proc/PID/fd`) while it lasts.

`python -m tests.support.flood HOST PORT CLIENTS [half-sent]` floods until it is terminated, printing how many
connections it has opened so far, a line every 0.1 s."""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.timing import patience

HALF_SENT = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
REACH_TIMEOUT = patience(60.0)
ROOT = Path(__file__).resolve().parents[1]


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@dataclass
class Flood:
    """What the flood did so far: connections opened."""

    opened: int = 0
    _waiting: list[tuple[int, asyncio.Event]] = field(default_factory=list)

    def now(self, opened: int) -> None:
        self.opened = opened
        for target, event in self._waiting:
            if opened >= target:
                event.set()

    async def reached(self, opened: int) -> None:
        """Wait until `opened` connections have been made (the flood is in full swing)."""
        event = asyncio.Event()
        self._waiting.append((opened, event))
        self.now(self.opened)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(REACH_TIMEOUT):
                await event.wait()
        self._waiting.remove((opened, event))
        assert self.opened >= opened, f"the flood opened only {self.opened} connections"


@asynccontextmanager
async def flooding(host: str, port: int, *, clients: int, payload: bytes = b"") -> AsyncIterator[Flood]:
    """`clients` connections held at once against host:port by another process, each replaced as
    soon as it ends, while the block runs."""
    argv = [sys.executable, "-m", "tests.support.flood", host, str(port), str(clients)]
    process = await asyncio.create_subprocess_exec(
        *argv, *(["half-sent"] if payload else []), stdout=asyncio.subprocess.PIPE, cwd=ROOT
    )
    assert process.stdout is not None
    flood = Flood()

    async def progress() -> None:
        assert process.stdout is not None
        async for line in process.stdout:
            flood.now(int(line))

    reader = asyncio.ensure_future(progress())
    try:
        yield flood
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        await process.wait()
        await reader


async def _client(host: str, port: int, payload: bytes, flood: Flood) -> None:
    while True:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            await asyncio.sleep(0.01)
            continue
        flood.opened += 1
        try:
            if payload:
                writer.write(payload)
            while await reader.read(4096):  # until the server closes it
                pass
        except OSError:
            pass
        finally:
            writer.close()


async def _flood(host: str, port: int, clients: int, payload: bytes) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < clients + 64:  # a socket per client
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    flood = Flood()
    tasks = [asyncio.ensure_future(_client(host, port, payload, flood)) for _ in range(clients)]
    while tasks:  # until terminated
        print(flood.opened, flush=True)
        await asyncio.sleep(0.1)


@dataclass
class Peak:
    value: int = 0


@contextmanager
def fd_peak(pid: int, every: float = 0.01) -> Iterator[Peak]:
    """The most file descriptors `pid` held at once while the block ran (sampled every `every` s)."""
    peak = Peak(open_fds(pid))
    done = threading.Event()

    def sample() -> None:
        while not done.wait(every):
            with contextlib.suppress(FileNotFoundError):
                peak.value = max(peak.value, open_fds(pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peak
    finally:
        done.set()
        sampler.join()


if __name__ == "__main__":
    host, port, clients, *kind = sys.argv[1:]
    asyncio.run(_flood(host, int(port), int(clients), HALF_SENT if kind == ["half-sent"] else b""))
