"""`transports/jwks.py`: an issuer's keys, fetched by PyJWT's `PyJWKClient` on a worker thread, kept,
and fetched again only within bounds. Against a JWKS endpoint served in this process, which counts
its requests and can be made to hang or fail."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mnote_mcp.transports.bearer import TokenRefusedError
from mnote_mcp.transports.jwks import UNKNOWN_KEY, KeySet
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


def key_set(uri: str, **bounds: Any) -> KeySet:
    return KeySet(uri, **{"timeout": 5.0, "max_age": 300.0, "refetch_interval": 60.0, **bounds})


async def test_keys_are_fetched_once_and_kept(endpoint: tuple[Endpoint, str]) -> None:
    served, uri = endpoint
    keys = key_set(uri)
    assert (await keys.key("a")).key_id == "a"
    assert (await keys.key("b")).algorithm_name == "ES256"
    assert served.asked == 1


async def test_made_up_kids_cost_one_fetch_per_interval(endpoint: tuple[Endpoint, str]) -> None:
    """A flood of tokens naming keys nobody publishes: one fetch for all of them (concurrent ones wait
    for it), none more until --oauth-refetch-interval has passed, each token refused."""
    served, uri = endpoint
    keys = key_set(uri, refetch_interval=0.5)
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


async def test_a_rotated_key_is_fetched_when_a_token_names_it(endpoint: tuple[Endpoint, str]) -> None:
    served, uri = endpoint
    keys = key_set(uri, refetch_interval=0.01)
    await keys.key("a")
    served.keys.append(SigningKey.rsa("c"))
    await anyio.sleep(0.02)
    assert (await keys.key("c")).key_id == "c" and served.asked == 2


@pytest.mark.slow
async def test_a_hanging_endpoint_is_bounded_and_known_keys_keep_working(
    endpoint: tuple[Endpoint, str],
) -> None:
    served, uri = endpoint
    keys = key_set(uri, timeout=0.5, refetch_interval=0.01, max_age=0.2)
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


async def test_a_withdrawn_key_stops_being_accepted_after_max_age(endpoint: tuple[Endpoint, str]) -> None:
    served, uri = endpoint
    keys = key_set(uri, max_age=0.1, refetch_interval=0.01)
    await keys.key("a")
    served.keys = served.keys[1:]
    await anyio.sleep(0.15)
    with pytest.raises(TokenRefusedError):
        await keys.key("a")


async def test_a_token_without_kid_uses_the_only_key() -> None:
    found = Endpoint([SigningKey.rsa("only")])
    async with serve_app(Starlette(routes=[Route("/jwks", found.answer)])) as url:
        assert (await key_set(f"{url}/jwks").key(None)).key_id == "only"
        found.keys.append(SigningKey.rsa("second"))
        with pytest.raises(TokenRefusedError, match="names no signing key"):
            await key_set(f"{url}/jwks").key(None)
