"""The MCP Python SDK's own OAuth client (`OAuthClientProvider`) signing in to mnote through a real
authorization server (oidc-provider) and calling it, with no person (issue 24, "What it must show" 1).

What the client does is the SDK's: a 401, the Protected Resource Metadata it names, the provider's
metadata, dynamic client registration, authorization code + PKCE with the RFC 8707 `resource`, the
token exchange, the call again with the token. The test only stands in for the person at the
browser (`tests/support/oidc.py`, `sign_in`): the redirect handler follows the authorization URL
through the provider's sign-in and consent forms, the callback handler returns the code it reached.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.to_thread
import httpx2
import jwt
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from mnote_mcp.tools.catalog import ALL_TOOLS
from tests.support.helpers import call, page_args, run_cli, seeded_store, write_args
from tests.support.http_helpers import RunningServer, http_server
from tests.support.oidc import MNOTE_SCOPES, OidcProvider, oidc_provider, require_provider, sign_in
from tests.support.runtimes import free_port
from tests.support.timing import patience

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

REDIRECT = "http://127.0.0.1:1/callback"  # never fetched: the person's browser stops there
READ_TOOLS = {"mnote.page.get", "mnote.page.search", "mnote.page.history"}


@dataclass
class Servers:
    provider: OidcProvider
    full: RunningServer  # resource .../mcp, the provider grants every mnote scope for it
    read_only: RunningServer  # resource = the bare origin (serves /mcp and /sse); only mnote:read
    db: Path

    @property
    def full_resource(self) -> str:
        return f"{self.full.url}/mcp"


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    require_provider()
    base = tmp_path_factory.mktemp("oauth-sdk")
    full_port, read_port = free_port(), free_port()
    full, origin = f"http://127.0.0.1:{full_port}/mcp", f"http://127.0.0.1:{read_port}"
    # At the provider, the bare origin as mnote's metadata names it: with its `/` (docs/deploy.md).
    resources = {full: {"scope": MNOTE_SCOPES}, f"{origin}/": {"scope": "mnote:read"}}
    with oidc_provider(base, resources, registration=True) as provider:
        db = seeded_store(base / "mnote.db")
        with (
            http_server(
                db, "--port", str(full_port), "--auth", "oauth", "--oauth-issuer", provider.issuer,
                "--oauth-resource", full,
            ) as full_server,
            http_server(
                db, "--port", str(read_port), "--auth", "oauth", "--oauth-issuer", provider.issuer,
                "--oauth-resource", origin,
            ) as read_server,
        ):  # fmt: skip
            yield Servers(provider, full_server, read_server, db)


@dataclass
class MemoryStorage(TokenStorage):
    tokens: OAuthToken | None = None
    client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


@dataclass
class Person:
    """Who signs in at the provider when the client sends them there."""

    login: str
    reached: list[str] = field(default_factory=list)

    async def redirect(self, authorization_url: str) -> None:
        self.reached.append(await anyio.to_thread.run_sync(sign_in, authorization_url, REDIRECT, self.login))

    async def callback(self) -> AuthorizationCodeResult:
        query = parse_qs(urlsplit(self.reached[-1]).query)
        return AuthorizationCodeResult(
            code=query["code"][0], state=query.get("state", [None])[0], iss=query.get("iss", [None])[0]
        )


def oauth_client(server_url: str, person: Person, storage: MemoryStorage) -> OAuthClientProvider:
    metadata = OAuthClientMetadata.model_validate(
        {"redirect_uris": [REDIRECT], "client_name": "mnote tests", "token_endpoint_auth_method": "none"}
    )
    redirect: Callable[[str], Awaitable[None]] = person.redirect
    return OAuthClientProvider(server_url, metadata, storage, redirect, person.callback)


async def test_the_sdk_client_signs_in_and_calls(servers: Servers) -> None:
    person, storage = Person("user_editor"), MemoryStorage()
    asked: list[str] = []

    async def record(request: httpx2.Request) -> None:
        asked.append(f"{request.method} {request.url}")

    auth = oauth_client(servers.full_resource, person, storage)
    async with (
        httpx2.AsyncClient(auth=auth, timeout=patience(30), event_hooks={"request": [record]}) as http,
        Client(streamable_http_client(servers.full_resource, http_client=http), mode="legacy") as client,
    ):
        listed = {tool.name for tool in (await client.list_tools()).tools}
        page = await call(client, "mnote.page.get", **page_args())
        note = await call(client, "mnote.artifact.create_ai_note", **write_args("sdk-oauth", content="hello"))

    # Discovery: the resource's metadata (named by the 401), the provider's, registration, the token.
    issuer = servers.provider.issuer
    assert f"GET {servers.full.url}/.well-known/oauth-protected-resource/mcp" in asked
    assert f"GET {issuer}/.well-known/oauth-authorization-server" in asked
    assert f"POST {issuer}/reg" in asked and f"POST {issuer}/token" in asked
    # The token: issued for this resource (RFC 8707), to the person who signed in.
    assert storage.tokens is not None
    claims = jwt.decode(storage.tokens.access_token, options={"verify_signature": False})
    assert claims["aud"] == servers.full_resource and claims["sub"] == "user_editor"
    assert set(claims["scope"].split()) == set(MNOTE_SCOPES.split())
    assert len(person.reached) == 1, "signed in once"
    # Every scope granted: every tool; a read and a write, the write audited under the person.
    assert len(listed) == len(ALL_TOOLS) and page["ok"] and note["ok"], note
    records = [json.loads(line) for line in run_cli("audit", "--db", str(servers.db)).stdout.splitlines()]
    mine = [record for record in records if record.get("commandId") == note["audit"]["commandId"]]
    assert [record["actorId"] for record in mine] == ["user_editor"]


async def test_a_read_only_grant_over_sse(servers: Servers) -> None:
    """The bare origin as the resource: one token for `/mcp` and `/sse` alike. The provider grants
    only `mnote:read` for it, so the client sees the read tools, and a write is refused."""
    person, storage = Person("user_editor"), MemoryStorage()
    auth = oauth_client(servers.read_only.url, person, storage)
    async with Client(
        sse_client(f"{servers.read_only.url}/sse", auth=auth, timeout=patience(30)), mode="legacy"
    ) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        refused = await call(client, "mnote.page.save", **write_args("sdk-ro", content=[], mode="append"))
    assert listed == READ_TOOLS and len(person.reached) == 1
    assert refused["error"]["code"] == "mnote_tool_permission_denied"
    assert storage.tokens is not None
    claims = jwt.decode(storage.tokens.access_token, options={"verify_signature": False})
    # The resource the client asked for is the one mnote publishes: the origin with its `/` (issue 31).
    assert claims["aud"] == servers.read_only.url + "/" and claims["scope"] == "mnote:read"
