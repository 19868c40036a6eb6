"""What an authorization server answers (its metadata, its keys, an introspection), read within a size
bound (`--oauth-max-response-bytes`).

The answer is streamed and dropped as soon as it is known to be over the bound: from its
`Content-Length` before a byte of the body is read, else once that many bytes (decoded: a compressed
body counts as what it inflates to) have arrived. The connection is closed then, so the rest is
never read, and one answer never holds more than the bound in memory (issue 30: a 600 MB key set
took the process from 80 to 1,280 MB). Time is the caller's to bound, around the whole exchange
(`anyio.move_on_after`): a per-read timeout never stops a server that sends a byte now and then.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2


class TooLargeError(Exception):
    """An answer over the bound; the message says how large it was known to be."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes

    def json(self) -> object:
        """The body as JSON; `ValueError` when it is not. `object`: what an issuer sends is checked
        (`isinstance`) before any of it is read."""
        return json.loads(self.body)


async def fetch(http: httpx2.AsyncClient, method: str, url: str, *, max_bytes: int, **sent: Any) -> Answer:
    """One request; its answer read whole if it is at most `max_bytes`, else `TooLargeError`.
    `httpx2.HTTPError` as the client raises it."""
    async with http.stream(method, url, **sent) as response:
        announced = response.headers.get("content-length", "")
        if announced.isdigit() and int(announced) > max_bytes:
            raise TooLargeError(f"it announces {announced} bytes, over {max_bytes}")
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > max_bytes:
                raise TooLargeError(f"it is over {max_bytes} bytes")
            chunks.append(chunk)
        return Answer(response.status_code, b"".join(chunks))


@dataclass(frozen=True)
class Reach:
    """How one issuer is asked, the same for its metadata, its keys and its introspection: so the
    `--oauth-*` bounds are passed on once, not as four arguments to each of them."""

    http: httpx2.AsyncClient
    timeout: float
    max_bytes: int
    refetch_interval: float

    async def get_json(self, url: str) -> Answer:
        """A GET for a JSON document (metadata, a key set), redirects not followed, within `max_bytes`."""
        return await fetch(
            self.http, "GET", url, max_bytes=self.max_bytes, headers={"Accept": "application/json"}
        )


class Refetch:
    """One fetch at a time, and none sooner than `interval` after the last try: however many requests
    need what the issuer has not given, it is asked once per interval, and those that waited for a
    fetch use what it brought instead of starting another."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._tried_at = -math.inf
        self._lock = anyio.Lock()

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[bool]:
        """Held while the caller fetches; yields whether it should (False: a fetch it waited for, or
        one within the interval, already tried)."""
        asked = time.monotonic()
        async with self._lock:
            yield self._tried_at < asked and time.monotonic() - self._tried_at >= self.interval

    def tried(self) -> None:
        """The interval counts from now (the start of a fetch, or its end, as the caller holds it)."""
        self._tried_at = time.monotonic()
