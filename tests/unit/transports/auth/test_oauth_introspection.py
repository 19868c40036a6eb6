"""`transports/auth/oauth_introspection.py`: what reaches the issuer's introspection endpoint (issue 30: 500
junk bearer tokens made 480 introspection requests). Against a counting fake issuer served in this
process (metadata and `/introspect`, which counts requests and how many are in flight at once, and can
be made to hang), through the verifier `--auth oauth --oauth-introspection` builds.

A token the issuer called inactive is refused without asking again for a while (by its digest, a
bounded number of them); the same unknown token sent by many requests at once is asked about once;
what cannot be a bearer token at all (characters RFC 6750 does not allow, over the size limit) is
refused without asking; at most so many introspections are in flight. A token the issuer calls active
is asked about at every use, so a revocation still counts at the next request.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mnote_mcp.cli import parse
from mnote_mcp.config import ServerConfig
from mnote_mcp.transports.auth.bearer import TokenRefusedError
from mnote_mcp.transports.auth.issuers import IssuerMetadata
from mnote_mcp.transports.auth.oauth import ResourceServer, resolve_oauth
from mnote_mcp.transports.auth.oauth_introspection import IntrospectionVerifier
from tests.support.runtimes import serve_app

pytestmark = pytest.mark.anyio
RESOURCE = "https://mnote.example.org/mcp"
NOT_ACTIVE = "token not active (expired, revoked or unknown to its issuer)"


@dataclass
class FakeIssuer:
    """Metadata naming an introspection endpoint, and the endpoint: `active` tokens are active; every
    token asked about is noted in `asked`; with `hang` it answers once `released` (or the client
    gave up)."""

    active: set[str] = field(default_factory=set)
    url: str = ""
    asked: list[str] = field(default_factory=list)
    hang: bool = False
    released: anyio.Event = field(default_factory=anyio.Event)

    async def metadata(self, request: Request) -> Response:
        return JSONResponse(
            {
                "issuer": self.url,
                "authorization_endpoint": f"{self.url}/authorize",
                "token_endpoint": f"{self.url}/token",
                "introspection_endpoint": f"{self.url}/introspect",
            }
        )

    async def introspect(self, request: Request) -> Response:
        token = str((await request.form())["token"])
        self.asked.append(token)
        while self.hang and not self.released.is_set():  # until released or given up on
            if await request.is_disconnected():
                return Response(status_code=499)
            await anyio.sleep(0.02)
        if token not in self.active:
            return JSONResponse({"active": False})
        claims = {"sub": "user_editor", "aud": RESOURCE, "iss": self.url, "scope": "mnote:read"}
        return JSONResponse({"active": True, "exp": int(time.time()) + 300, **claims})

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/.well-known/oauth-authorization-server", self.metadata),
                Route("/introspect", self.introspect, methods=["POST"]),
            ]
        )


@asynccontextmanager
async def introspecting(*flags: str) -> AsyncIterator[tuple[FakeIssuer, ResourceServer]]:
    issuer = FakeIssuer()
    async with serve_app(issuer.app()) as url:
        issuer.url = url
        command = ["serve", "--transport", "http", "--auth", "oauth", "--oauth-issuer", url]
        command += ["--oauth-resource", RESOURCE, "--oauth-introspection", "--oauth-client-id", "rs"]
        found = parse([*command, *flags], {"MNOTE_OAUTH_CLIENT_SECRET": "rs-secret"})[1]
        assert isinstance(found, ServerConfig)
        server = resolve_oauth(found)
        try:
            yield issuer, server
        finally:
            issuer.released.set()
            await server.aclose()


async def refused(server: ResourceServer, token: str, reason: str | None = None) -> str:
    with pytest.raises(TokenRefusedError) as refusal:
        await server.verifier.verify_token(token)
    if reason is not None:
        assert refusal.value.reason == reason
    return refusal.value.reason


def junk(count: int, prefix: str = "junk") -> Iterator[str]:
    return (f"{prefix}-{index:04d}-AbC+/_.~" for index in range(count))


async def test_a_token_the_issuer_called_inactive_is_not_asked_about_again() -> None:
    """The issue's flood: 50 made-up tokens, each sent 10 times (the 10 rounds one after the other,
    the 50 of a round at once): 50 introspections, not 500."""
    async with introspecting() as (issuer, server):
        for _ in range(10):
            async with anyio.create_task_group() as group:
                for token in junk(50):
                    group.start_soon(refused, server, token, NOT_ACTIVE)
        assert len(issuer.asked) == 50, f"{len(issuer.asked)} introspections for 50 junk tokens"


async def test_the_same_token_sent_at_once_is_asked_about_once() -> None:
    async with introspecting() as (issuer, server):
        async with anyio.create_task_group() as group:
            for _ in range(100):
                group.start_soon(refused, server, "the-same-junk-token", NOT_ACTIVE)
        assert issuer.asked == ["the-same-junk-token"]


@pytest.mark.parametrize(
    "token",
    ["has a space", 'quo"te', "ünïcode-token", "tab\there", "comma,token", "semi;colon", "a=b", "x" * 9000],
    ids=["space", "quote", "non-ascii", "tab", "comma", "semicolon", "inner-equals", "oversized"],
)
async def test_what_cannot_be_a_bearer_token_never_leaves_the_server(token: str) -> None:
    """RFC 6750 §2.1's b64token (letters, digits, `-._~+/`, then `=` padding), at most
    --oauth-max-token-bytes: anything else is refused here."""
    async with introspecting() as (issuer, server):
        reason = await refused(server, token)
        assert reason in ("malformed token", "token too large"), reason
        assert issuer.asked == []


async def test_an_active_token_is_asked_about_at_every_use() -> None:
    """Nothing good is cached: a token revoked at the issuer is refused at its next use."""
    good = "good-token_0123456789+/~.=="
    async with introspecting() as (issuer, server):
        issuer.active.add(good)
        for _ in range(3):
            caller = await server.verifier.verify_token(good)
            assert caller is not None and caller.client_id == "" and caller.subject == "user_editor"
        assert issuer.asked == [good] * 3
        issuer.active.clear()
        await refused(server, good, NOT_ACTIVE)
        assert len(issuer.asked) == 4


@pytest.mark.slow
async def test_introspections_in_flight_are_bounded() -> None:
    """An issuer that stops answering while 40 different tokens arrive: at most
    --oauth-max-introspections (8) reach it while the first are unanswered (looked at half way to
    the timeout, before any is given up on); every token is refused within about --oauth-timeout,
    those that never got a turn saying so; the issuer answering again, the next token is checked."""
    async with introspecting("--oauth-timeout", "2") as (issuer, server):
        issuer.hang = True
        started = time.monotonic()
        reasons: list[str] = []

        async def one(token: str) -> None:
            reasons.append(await refused(server, token))

        async with anyio.create_task_group() as group:
            for token in junk(40):
                group.start_soon(one, token)
            await anyio.sleep(1)
            assert len(issuer.asked) == 8, f"{len(issuer.asked)} introspections in flight at once"
        took = time.monotonic() - started
        assert took < 10, f"refused after {took:.1f}s"
        assert len(reasons) == 40 and set(reasons) <= {
            "the token's issuer could not be reached to check it",
            "too many tokens are being checked at the token's issuer; retry shortly",
        }, set(reasons)
        issuer.hang = False
        issuer.released.set()
        await refused(server, "after-the-outage", NOT_ACTIVE)
        assert issuer.asked[-1] == "after-the-outage"


async def test_the_inactive_tokens_are_kept_briefly_and_boundedly() -> None:
    """--oauth-inactive-cache-seconds (a token is asked about again after it) and
    --oauth-inactive-cache-size (past it, the oldest answer is forgotten first); 0 seconds
    asks every time."""
    async with introspecting("--oauth-inactive-cache-seconds", "0.5", "--oauth-inactive-cache-size", "3") as (
        issuer,
        server,
    ):
        for token in ("a-token", "a-token"):
            await refused(server, token, NOT_ACTIVE)
        assert issuer.asked == ["a-token"]
        await anyio.sleep(0.6)
        await refused(server, "a-token", NOT_ACTIVE)
        assert issuer.asked == ["a-token", "a-token"], "asked again past the time kept"
        for token in ("b-token", "c-token", "d-token", "a-token", "d-token"):
            await refused(server, token, NOT_ACTIVE)
        assert issuer.asked[2:] == ["b-token", "c-token", "d-token", "a-token"], "a-token was forgotten"
    async with introspecting("--oauth-inactive-cache-seconds", "0") as (issuer, server):
        for _ in range(3):
            await refused(server, "a-token", NOT_ACTIVE)
        assert issuer.asked == ["a-token"] * 3


def test_the_bounds_are_settings() -> None:
    found: Any = parse(["serve"], {})[1]
    assert (found.oauth_inactive_cache_seconds, found.oauth_inactive_cache_size) == (30.0, 10_000)
    assert found.oauth_max_introspections == 8


async def test_a_use_held_up_until_the_first_was_refused_is_not_asked_about_again() -> None:
    """The same token's second use, held up (here by the issuer's metadata) until the first use's
    refusal came back, is refused without asking: the merge of issue 33 saw one of 100 uses at once ask
    again at a load of 9, having passed the cache before the refusal and the wait after it."""
    token = "held-up-token-AbC+/_.~"
    async with introspecting() as (issuer, server):
        verifier = server.verifier
        assert isinstance(verifier, IntrospectionVerifier)
        metadata = verifier.issuer.metadata
        first_refused = anyio.Event()
        calls = 0

        async def held_up_metadata() -> IssuerMetadata:
            nonlocal calls
            calls += 1
            if calls > 1:
                await first_refused.wait()
            return await metadata()

        verifier.issuer.metadata = held_up_metadata  # type: ignore[method-assign]

        async def first() -> None:
            await refused(server, token, NOT_ACTIVE)
            first_refused.set()

        async with anyio.create_task_group() as group:
            group.start_soon(first)
            await anyio.sleep(0.01)
            group.start_soon(refused, server, token, NOT_ACTIVE)
        assert issuer.asked == [token]
