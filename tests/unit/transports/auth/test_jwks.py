"""`transports/auth/jwks.py`: an issuer's keys, fetched, kept, and fetched again only within bounds. Against
a JWKS endpoint served in this process, which counts its requests and can be made to hang or fail, and
one that answers badly on purpose on a thread of its own (`tests/support/hostile_http.py`: a body
trickled a byte at a time, one that never ends, one announced at 64 MiB): issue 30 measured a 600 MB
key set taking the process from 80 to 1,280 MB and a trickled one leaving a thread behind per fetch."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Literal

import anyio
import httpx2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mnote_mcp.config import DEFAULT_OAUTH_MAX_RESPONSE_BYTES
from mnote_mcp.transports.auth.bearer import TokenRefusedError
from mnote_mcp.transports.auth.bounded import Reach
from mnote_mcp.transports.auth.jwks import UNKNOWN_KEY, KeySet
from tests.support.hostile_http import HostileServer
from tests.support.oidc import SigningKey
from tests.support.runtimes import serve_app
from tests.support.timing import patience

pytestmark = pytest.mark.anyio


@dataclass
class Endpoint:
    """A JWKS endpoint: its keys, how it answers (`ok`, `hang`, `fail`) and how often it was asked."""

    keys: list[SigningKey]
    mode: str = "ok"
    asked: int = 0
    released: anyio.Event = field(default_factory=anyio.Event)

    async def answer(self, request: Request) -> Response:
        self.asked += 1
        if self.mode == "hang":
            await self.released.wait()
        if self.mode == "fail":
            return Response("no", status_code=503)
        public = [
            {k: v for k, v in key.jwk().items() if k not in ("d", "p", "q", "dp", "dq", "qi")}
            for key in self.keys
        ]
        return JSONResponse({"keys": public})


@pytest.fixture
async def endpoint() -> AsyncIterator[tuple[Endpoint, str]]:
    found = Endpoint([SigningKey.rsa("a"), SigningKey.ec("b")])
    async with serve_app(Starlette(routes=[Route("/jwks", found.answer)])) as url:
        yield found, f"{url}/jwks"
        found.released.set()


@pytest.fixture
async def http() -> AsyncIterator[httpx2.AsyncClient]:
    """The issuer's HTTP client, as `resolve_oauth` makes it."""
    async with httpx2.AsyncClient(timeout=30, follow_redirects=False) as client:
        yield client


def key_set(
    uri: str,
    http: httpx2.AsyncClient,
    *,
    timeout: float = 5.0,
    max_age: float = 300.0,
    refetch_interval: float = 60.0,
) -> KeySet:
    reach = Reach(
        http, timeout=timeout, max_bytes=DEFAULT_OAUTH_MAX_RESPONSE_BYTES, refetch_interval=refetch_interval
    )
    return KeySet(uri, reach, max_age=max_age)


async def test_keys_are_fetched_once_and_kept(
    endpoint: tuple[Endpoint, str], http: httpx2.AsyncClient
) -> None:
    served, uri = endpoint
    keys = key_set(uri, http)
    assert (await keys.key("a")).key_id == "a"
    assert (await keys.key("b")).algorithm_name == "ES256"
    assert served.asked == 1


async def test_made_up_kids_cost_one_fetch_per_interval(
    endpoint: tuple[Endpoint, str], http: httpx2.AsyncClient
) -> None:
    """A flood of tokens naming keys nobody publishes: one fetch for all of them (concurrent ones wait
    for it), none more until --oauth-refetch-interval has passed, each token refused."""
    served, uri = endpoint
    keys = key_set(uri, http, refetch_interval=0.5)
    refused = 0

    async def unknown(index: int) -> None:
        nonlocal refused
        with pytest.raises(TokenRefusedError, match=UNKNOWN_KEY):
            await keys.key(f"made-up-{index}")
        refused += 1

    async with anyio.create_task_group() as group:
        for index in range(50):
            group.start_soon(unknown, index)
    assert refused == 50 and served.asked == 1
    for index in range(20):
        await unknown(100 + index)
    assert served.asked == 1, "within the interval: no fetch"
    await anyio.sleep(0.6)
    await unknown(200)
    assert served.asked == 2, "past it: one more"


async def test_a_rotated_key_is_fetched_when_a_token_names_it(
    endpoint: tuple[Endpoint, str], http: httpx2.AsyncClient
) -> None:
    served, uri = endpoint
    keys = key_set(uri, http, refetch_interval=0.01)
    await keys.key("a")
    served.keys.append(SigningKey.rsa("c"))
    await anyio.sleep(0.02)
    assert (await keys.key("c")).key_id == "c" and served.asked == 2


@pytest.mark.slow
async def test_a_hanging_endpoint_is_bounded_and_known_keys_keep_working(
    endpoint: tuple[Endpoint, str], http: httpx2.AsyncClient
) -> None:
    served, uri = endpoint
    keys = key_set(uri, http, timeout=0.5, refetch_interval=0.01, max_age=0.2)
    await keys.key("a")
    served.mode = "hang"
    await anyio.sleep(0.25)  # the kept keys are now older than max_age: the next use fetches again
    started = time.monotonic()
    with pytest.raises(TokenRefusedError, match="does not publish"):
        await keys.key("unknown")
    assert time.monotonic() - started < patience(3), (
        "refused within the timeout, not when the endpoint answers"
    )
    assert (await keys.key("a")).key_id == "a", "the fetch failed: the kept keys stay in use"
    served.mode = "fail"
    await anyio.sleep(0.02)
    assert (await keys.key("b")).key_id == "b"


async def test_a_withdrawn_key_stops_being_accepted_after_max_age(
    endpoint: tuple[Endpoint, str], http: httpx2.AsyncClient
) -> None:
    served, uri = endpoint
    keys = key_set(uri, http, max_age=0.1, refetch_interval=0.01)
    await keys.key("a")
    served.keys = served.keys[1:]
    await anyio.sleep(0.15)
    with pytest.raises(TokenRefusedError):
        await keys.key("a")


async def test_a_token_without_kid_uses_the_only_key(http: httpx2.AsyncClient) -> None:
    found = Endpoint([SigningKey.rsa("only")])
    async with serve_app(Starlette(routes=[Route("/jwks", found.answer)])) as url:
        assert (await key_set(f"{url}/jwks", http).key(None)).key_id == "only"
        found.keys.append(SigningKey.rsa("second"))
        with pytest.raises(TokenRefusedError, match="names no signing key"):
            await key_set(f"{url}/jwks", http).key(None)


async def _refused_in_time(keys: KeySet, kid: str, within: float) -> None:
    started = time.monotonic()
    with pytest.raises(TokenRefusedError):
        await keys.key(kid)
    assert time.monotonic() - started < within, "a refusal waits for one bounded fetch at most"


async def _eventually(predicate: Callable[[], bool]) -> bool:
    """Whether `predicate` holds within 5 s (a thread of the hostile server decides it)."""
    with anyio.move_on_after(5):
        while not predicate():  # noqa: ASYNC110 - the server's counters are plain numbers, no event
            await anyio.sleep(0.05)
        return True
    return False


@pytest.mark.slow
async def test_a_trickling_key_set_is_cut_at_the_deadline_one_fetch_at_a_time(
    http: httpx2.AsyncClient,
) -> None:
    """A byte every 0.1 s never trips a per-read timeout: each fetch must end at --oauth-timeout in
    all, its connection closed, and never two at once, however many tokens ask. Before: each fetch
    was abandoned on a thread that read on, one more thread and connection per refetch interval."""
    with HostileServer("trickle", every=0.1) as served:
        keys = key_set(served.url, http, timeout=0.5, refetch_interval=0.05)
        await _refused_in_time(keys, "first", within=5)  # (the loop's resolver thread starts here)
        threads = threading.active_count()
        started = time.monotonic()
        while time.monotonic() - started < 3:
            async with anyio.create_task_group() as group:
                for index in range(10):  # ten tokens at once: they wait for the one fetch
                    group.start_soon(_refused_in_time, keys, f"made-up-{index}", 5)
            await anyio.sleep(0.06)
        assert served.connections >= 3, "a fetch per refetch interval, as before"
        assert served.peak == 1, f"{served.peak} fetches were in flight at once"
        assert threading.active_count() <= threads, "a fetch leaves no thread behind"
        assert await _eventually(lambda: served.open == 0), "the last fetch's connection stays open"


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["endless", "announced"])
async def test_a_huge_key_set_is_refused_without_being_read(
    mode: Literal["endless", "announced"], http: httpx2.AsyncClient
) -> None:
    """A key set over --oauth-max-response-bytes is refused as soon as that is known (from its
    Content-Length, or once that many bytes came), not at the deadline, and the rest is never read:
    the connection is closed, what the server got out stays within what sockets buffer."""
    with HostileServer(mode, every=0.01, announce=64 * 1024 * 1024) as served:
        keys = key_set(served.url, http, timeout=10.0)
        await _refused_in_time(keys, "a", within=5)
        assert await _eventually(lambda: served.open == 0), "the connection stays open"
        assert served.sent < 24 * 1024 * 1024, f"{served.sent} bytes read of a key set"
