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
from dataclasses import dataclass
from typing import Any

import httpx2


class TooLargeError(Exception):
    """An answer over the bound; the message says how large it was known to be."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes

    def json(self) -> Any:
        """The body as JSON; `ValueError` when it is not."""
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
