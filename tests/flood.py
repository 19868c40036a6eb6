"""A connection flood for tests and `bench.attacks`: many clients that connect and send nothing (or
half a request's headers), reconnecting as soon as the server lets go, and a sampler of the server's
open file descriptors (`/proc/PID/fd`) while it lasts."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field

HALF_SENT = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


REACH_TIMEOUT = 60.0


@dataclass
class Flood:
    """What the flood did so far: connections opened, and connects that failed."""

    opened: int = 0
    failed: int = 0
    _waiting: list[tuple[int, asyncio.Event]] = field(default_factory=list)

    def one_more(self) -> None:
        self.opened += 1
        for target, event in self._waiting:
            if self.opened >= target:
                event.set()

    async def reached(self, opened: int) -> None:
        """Wait until `opened` connections have been made (the flood is in full swing)."""
        event = asyncio.Event()
        self._waiting.append((opened, event))
        if self.opened >= opened:
            event.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(REACH_TIMEOUT):
                await event.wait()
        self._waiting.remove((opened, event))
        assert self.opened >= opened, f"the flood opened only {self.opened} connections"


async def _client(host: str, port: int, payload: bytes, flood: Flood) -> None:
    while True:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            flood.failed += 1
            await asyncio.sleep(0.01)
            continue
        flood.one_more()
        try:
            if payload:
                writer.write(payload)
            while await reader.read(4096):  # until the server closes it (or the flood ends)
                pass
        except OSError:
            pass
        finally:
            writer.close()


@asynccontextmanager
async def flooding(host: str, port: int, *, clients: int, payload: bytes = b"") -> AsyncIterator[Flood]:
    """`clients` connections held at once against host:port, each replaced as soon as it ends."""
    flood = Flood()
    tasks = [asyncio.ensure_future(_client(host, port, payload, flood)) for _ in range(clients)]
    try:
        yield flood
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


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
