"""`--auth oauth` (issue 24): the server as an OAuth 2.1 resource server in front of a real
authorization server (oidc-provider, `tests/support/oidc.py`), over real sockets.

Discovery (RFC 9728 metadata, `resource_metadata` in every challenge, on `/mcp` and `/sse`), every bad
token a clean 401 with its reason (the issue's table; the odd tokens the provider would never issue are
signed with the provider's own published key, which the test generated), 403 naming the missing scope,
a token for another resource refused, scopes deciding the tools listed, writes audited under the
token's actor, sessions bound to their user, a token expiring mid-session, key rotation picked up
without a restart, an issuer down or hanging (cached keys keep working, unknown keys refused within the
bound), opaque tokens by introspection (revoked at the provider: refused at the next request), and no
token or claim value in the log.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import re
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2
import pytest
from mcp.client.subscriptions import SubscriptionLost

from mnote_mcp.tools.catalog import ALL_TOOLS
from tests.support.helpers import RAW_INITIALIZE, call, run_cli, seeded_store, write_args
from tests.support.http_helpers import (
    RunningServer,
    http_server,
    mcp_http,
    raw_connection,
    read_until_closed,
    wait_until,
)
from tests.support.oidc import (
    MNOTE_SCOPES,
    OidcProvider,
    SigningKey,
    confidential_client,
    introspecting_client,
    oidc_provider,
    require_provider,
)
from tests.support.runtimes import free_port
from tests.support.timing import patience

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

SECRET = "client-secret-0123456789"
ACTORS = ("user_editor", "user_viewer", "user_owner")  # client-credentials clients, named as members
OTHER_RESOURCE = "http://127.0.0.1:9/other"
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
READ_TOOLS = {"mnote.page.get", "mnote.page.search", "mnote.page.history"}
CANARY = "CANARY-claim-value-5e1f"
PAGE_URI = "mnote://workspaces/ws_1/pages/doc_1"


@dataclass
class Setup:
    provider: OidcProvider
    server: RunningServer
    resource: str
    db: Path

    @property
    def url(self) -> str:
        return self.server.url

    def token(
        self, actor: str = "user_editor", scope: str = MNOTE_SCOPES, resource: str | None = None
    ) -> str:
        """A real access token from the provider (client credentials; the client is named as a member)."""
        return self.provider.client_credentials(actor, SECRET, resource or self.resource, scope)

    def claims(self, **changes: Any) -> dict[str, Any]:
        """What a good token of this provider for this server says (for tokens signed by the test)."""
        now = int(time.time())
        good = {
            "iss": self.provider.issuer,
            "aud": self.resource,
            "sub": "user_editor",
            "client_id": "local",
            "iat": now,
            "exp": now + 300,
            "scope": MNOTE_SCOPES,
            "jti": CANARY + "-jti",
        }
        return {key: value for key, value in {**good, **changes}.items() if value is not None}

    def signed(self, **changes: Any) -> str:
        return self.provider.keys[0].sign(self.claims(**changes))


def serve_oauth(
    db: Path, port: int, issuer: str, resource: str, *extra: str, env: dict[str, str] | None = None
) -> Any:
    return http_server(
        db,
        "--port",
        str(port),
        "--auth",
        "oauth",
        "--oauth-issuer",
        issuer,
        "--oauth-resource",
        resource,
        "--log-level",
        "debug",
        *extra,
        env=env,
    )


@pytest.fixture(scope="module")
def oauth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    require_provider()
    base = tmp_path_factory.mktemp("oauth")
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    resources = {resource: {"scope": MNOTE_SCOPES}, OTHER_RESOURCE: {"scope": MNOTE_SCOPES}}
    clients = [confidential_client(actor, SECRET) for actor in ACTORS]
    with oidc_provider(base, resources, clients=clients, short_lived_clients={"user_owner": 2}) as provider:
        db = seeded_store(base / "mnote.db")
        with serve_oauth(db, port, provider.issuer, resource, "--oauth-leeway", "1") as server:
            yield Setup(provider, server, resource, db)


def challenge(response: httpx2.Response) -> dict[str, str]:
    """The attributes of a `WWW-Authenticate: Bearer ...` challenge."""
    value = response.headers["www-authenticate"]
    assert value.startswith("Bearer"), value
    return dict(re.findall(r'(\w+)="([^"]*)"', value))


def initialize(url: str, token: str | None, *, endpoint: str = "/mcp", **headers: str) -> httpx2.Response:
    """One request to an MCP endpoint: POST initialize to `/mcp`, or open the `/sse` stream (its
    status only: the stream is closed at once)."""
    sent = {**JSON_HEADERS, **({"Authorization": f"Bearer {token}"} if token else {}), **headers}
    if endpoint == "/mcp":
        return httpx2.post(f"{url}/mcp", json=RAW_INITIALIZE, headers=sent, timeout=patience(30))
    with httpx2.stream("GET", f"{url}{endpoint}", headers=sent, timeout=patience(30)) as response:
        if response.status_code != 200:
            response.read()
        return response


def ping(url: str, token: str, session: str) -> httpx2.Response:
    """A request within a session (2025-11-25 protocol)."""
    return httpx2.post(
        f"{url}/mcp",
        json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
        headers={
            **JSON_HEADERS,
            "Authorization": f"Bearer {token}",
            "Mcp-Session-Id": session,
            "Mcp-Protocol-Version": "2025-11-25",
        },
        timeout=patience(30),
    )


# -- discovery ---------------------------------------------------------------------------------------


def test_metadata_is_published_where_clients_look(oauth: Setup) -> None:
    """RFC 9728 §3.1 (the resource's path appended) and the root form: the same document."""
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        answer = httpx2.get(oauth.url + path, timeout=patience(10))
        assert answer.status_code == 200, path
        metadata = answer.json()
        assert metadata["resource"] == oauth.resource
        assert metadata["authorization_servers"] == [oauth.provider.issuer]
        assert metadata["scopes_supported"] == ["mnote:read", "mnote:write", "mnote:artifacts"]
        assert metadata["bearer_methods_supported"] == ["header"]


@pytest.mark.parametrize("endpoint", ["/mcp", "/sse"])
def test_a_request_without_a_token_is_told_where_to_sign_in(oauth: Setup, endpoint: str) -> None:
    for sent in ({}, {"Authorization": "Basic dXNlcjpwYXNz"}):
        refused = initialize(oauth.url, None, endpoint=endpoint, **sent)
        assert refused.status_code == 401
        found = challenge(refused)
        # RFC 6750 §3.1: no error code when no token came; where to find the authorization server.
        assert "error" not in found
        assert found["resource_metadata"] == f"{oauth.url}/.well-known/oauth-protected-resource/mcp"


# -- every bad token ---------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unsigned(setup: Setup) -> str:
    header = _b64(json.dumps({"alg": "none", "typ": "JWT"}).encode())
    return f"{header}.{_b64(json.dumps(setup.claims()).encode())}."


def _hmac_with_the_public_key(setup: Setup) -> str:
    """The key-confusion attack: HS256 keyed with the issuer's public key, which anyone can fetch."""
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": setup.provider.keys[0].kid}).encode())
    signing_input = f"{header}.{_b64(json.dumps(setup.claims()).encode())}"
    mac = hmac.new(setup.provider.keys[0].public_pem(), signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(mac)}"


def _tampered(setup: Setup) -> str:
    header, _, signature = setup.signed(scope="mnote:read").split(".")
    return ".".join([header, _b64(json.dumps(setup.claims()).encode()), signature])


BAD_TOKENS: dict[str, tuple[Callable[[Setup], str], str]] = {
    "expired": (
        lambda s: s.signed(iat=int(time.time()) - 7200, exp=int(time.time()) - 3600),
        "token expired",
    ),
    "not yet valid": (lambda s: s.signed(nbf=int(time.time()) + 3600), "token not yet valid"),
    "wrong audience": (lambda s: s.signed(aud=OTHER_RESOURCE), "token not issued for this resource"),
    "no audience": (lambda s: s.signed(aud=None), "token lacks the aud claim"),
    "no expiry": (lambda s: s.signed(exp=None), "token lacks the exp claim"),
    "wrong issuer": (
        lambda s: s.signed(iss="http://127.0.0.1:1"),
        "token from an issuer this server does not accept",
    ),
    "unknown kid": (
        lambda s: SigningKey.rsa("rogue-key").sign(s.claims()),
        "token signed with a key the issuer does not publish",
    ),
    "alg none": (_unsigned, "token signature algorithm not accepted"),
    "HS256 keyed with the public key": (_hmac_with_the_public_key, "token signature algorithm not accepted"),
    "signature of other claims": (_tampered, "token signature does not verify"),
    "no actor": (lambda s: s.signed(sub=None), "token has no sub claim naming an actor"),
    "malformed": (lambda s: "not-a-jwt." + CANARY, "malformed token"),
    "oversized": (lambda s: "x" * 9000, "token too large"),
}


@pytest.mark.parametrize("endpoint", ["/mcp", "/sse"])
@pytest.mark.parametrize("case", sorted(BAD_TOKENS))
def test_every_bad_token_is_a_clean_401(oauth: Setup, case: str, endpoint: str) -> None:
    make, reason = BAD_TOKENS[case]
    refused = initialize(oauth.url, make(oauth), endpoint=endpoint)
    assert refused.status_code == 401, refused.text
    assert challenge(refused) == {
        "realm": "mnote",
        "error": "invalid_token",
        "error_description": reason,
        "resource_metadata": f"{oauth.url}/.well-known/oauth-protected-resource/mcp",
    }
    assert refused.json() == {"error": "invalid_token", "error_description": reason}


@pytest.mark.parametrize("endpoint", ["/mcp", "/sse"])
def test_a_good_token_is_let_in(oauth: Setup, endpoint: str) -> None:
    """The table's control: the same claims, signed right, from the provider and from its key."""
    for token in (oauth.signed(), oauth.token()):
        assert initialize(oauth.url, token, endpoint=endpoint).status_code == 200


@pytest.mark.parametrize("endpoint", ["/mcp", "/sse"])
def test_a_token_without_the_required_scope_is_403_naming_it(oauth: Setup, endpoint: str) -> None:
    refused = initialize(oauth.url, oauth.token(scope="mnote:write mnote:artifacts"), endpoint=endpoint)
    assert refused.status_code == 403
    assert challenge(refused) == {
        "realm": "mnote",
        "error": "insufficient_scope",
        "error_description": "the token lacks the scope mnote:read",
        "scope": "mnote:read",
        "resource_metadata": f"{oauth.url}/.well-known/oauth-protected-resource/mcp",
    }


def test_a_bad_token_is_refused_before_its_body_is_read(oauth: Setup) -> None:
    """Announcing 4 MiB and sending none of it: 401 from the headers, the connection closed."""
    port = oauth.url.rsplit(":", 1)[1]
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {oauth.signed(exp=int(time.time()) - 3600)}\r\n"
        f"Content-Length: {4 * 1024 * 1024}\r\n\r\n"
    ).encode()
    received, took = read_until_closed(raw_connection(oauth.url, head, timeout=patience(30)))
    assert received.startswith(b"HTTP/1.1 401"), received[:200]
    assert b'error_description="token expired"' in received
    assert took < patience(20)


def test_a_token_the_provider_issued_for_another_resource_is_refused(oauth: Setup) -> None:
    other = oauth.token(resource=OTHER_RESOURCE)
    refused = initialize(oauth.url, other, endpoint="/mcp")
    assert refused.status_code == 401
    assert challenge(refused)["error_description"] == "token not issued for this resource"


# -- what an accepted token may do -------------------------------------------------------------------


async def test_scopes_decide_the_tools_listed_and_usable(oauth: Setup) -> None:
    async with mcp_http(oauth.url, oauth.token(scope="mnote:read")) as reader:
        listed = {tool.name for tool in (await reader.list_tools()).tools}
        assert listed == READ_TOOLS
        refused = await call(reader, "mnote.page.save", **write_args("read-only", content=[], mode="append"))
        assert refused["error"]["code"] == "mnote_tool_permission_denied"
    async with mcp_http(oauth.url, oauth.token(scope="mnote:read mnote:write")) as writer:
        listed = {tool.name for tool in (await writer.list_tools()).tools}
        assert listed > READ_TOOLS and not any(name.startswith("mnote.artifact.") for name in listed)
    async with mcp_http(oauth.url, oauth.token()) as everything:
        assert len((await everything.list_tools()).tools) == len(ALL_TOOLS)


async def test_a_write_is_audited_under_the_tokens_actor(oauth: Setup) -> None:
    async with mcp_http(oauth.url, oauth.token("user_editor")) as client:
        note = await call(client, "mnote.artifact.create_ai_note", **write_args("oauth-note", content="hi"))
    assert note["ok"], note
    records = [json.loads(line) for line in run_cli("audit", "--db", str(oauth.db)).stdout.splitlines()]
    mine = [record for record in records if record.get("commandId") == note["audit"]["commandId"]]
    assert [record["actorId"] for record in mine] == ["user_editor"]


def test_a_session_belongs_to_its_user(oauth: Setup) -> None:
    session = initialize(oauth.url, oauth.token("user_editor")).headers["mcp-session-id"]
    # Another user's token: the session is not theirs.
    assert ping(oauth.url, oauth.token("user_viewer"), session).status_code == 404
    # A new token of the same user (as after a refresh): the same principal (issuer, client,
    # subject), so the session goes on.
    assert ping(oauth.url, oauth.token("user_editor"), session).status_code == 200


def test_a_token_that_expires_mid_session_gets_401_on_its_next_request(oauth: Setup) -> None:
    token = oauth.token("user_owner")  # this client's tokens live 2 s; the server allows 1 s of skew
    expires = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))["exp"]
    session = initialize(oauth.url, token).headers["mcp-session-id"]
    assert ping(oauth.url, token, session).status_code == 200
    time.sleep(max(0.0, expires + 1.5 - time.time()))  # the token's own lifetime, not a wait for an event
    refused = ping(oauth.url, token, session)
    assert refused.status_code == 401
    assert challenge(refused)["error_description"] == "token expired"


async def test_a_subscription_ends_when_its_token_expires(oauth: Setup) -> None:
    """A resource subscription is re-checked before each poll: past its token's expiry (and the
    allowed skew) it is dropped, as a revoked file token's is."""
    token = oauth.token("user_owner")  # 2 s, and 1 s of skew
    expires = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))["exp"]

    def watches() -> int:
        count: int = httpx2.get(f"{oauth.url}/healthz", timeout=patience(10)).json()["watches"]
        return count

    async with mcp_http(oauth.url, token) as client:
        await client.subscribe_resource("mnote://workspaces/ws_1/pages/doc_1")
        assert watches() == 1
        assert await anyio.to_thread.run_sync(lambda: wait_until(lambda: watches() == 0, timeout=30))
        assert time.time() > expires + 1, "dropped only once the token had expired"


def _expiry(token: str) -> float:
    expires: float = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))["exp"]
    return expires


@asynccontextmanager
async def _open_stream(setup: Setup, kind: str) -> AsyncIterator[tuple[AsyncIterator[Any], float]]:
    """A stream of `kind` held open with a short-lived token of the provider (2 s, 1 s of skew): the
    stream's items and the instant past which the server refuses its token. A token that expired
    before its stream was open (a loaded machine) is replaced by a fresh one."""
    for _ in range(3):
        token = setup.token("user_owner")
        async with contextlib.AsyncExitStack() as held:
            if kind == "listen":
                client = await held.enter_async_context(mcp_http(setup.url, token, mode="auto"))
                sub = await held.enter_async_context(client.listen(resource_subscriptions=[PAGE_URI]))
                items: AsyncIterator[Any] = sub.__aiter__()
            else:
                http = await held.enter_async_context(httpx2.AsyncClient(base_url=setup.url, timeout=60))
                auth = {"Authorization": f"Bearer {token}"}
                path, headers = "/sse", auth
                if kind == "get":
                    opened = await http.post("/mcp", json=RAW_INITIALIZE, headers={**JSON_HEADERS, **auth})
                    if opened.status_code == 401:
                        continue
                    session = {**auth, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
                    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                    await http.post("/mcp", json=initialized, headers={**JSON_HEADERS, **session})
                    path, headers = "/mcp", {**session, "Accept": "text/event-stream"}
                stream = await held.enter_async_context(http.stream("GET", path, headers=headers))
                if stream.status_code == 401:
                    continue
                assert stream.status_code == 200, stream.status_code
                items = stream.aiter_bytes()
            yield items, _expiry(token) + 1
            return
    raise AssertionError("no stream could be opened before its token expired")


@pytest.mark.parametrize("kind", ["listen", "get", "sse"])
async def test_an_expired_tokens_open_streams_end_at_its_expiry(oauth: Setup, kind: str) -> None:
    """The 2026-era `subscriptions/listen` stream, a session's GET stream and a legacy `/sse` stream
    end once their token is past `exp` and the allowed skew, as a revoked file token's do at a reload
    (issue 30: they stayed open, delivering nothing, until the client left)."""
    async with _open_stream(oauth, kind) as (items, refused_from):
        with (
            anyio.fail_after(max(0.0, refused_from - time.time()) + 10),
            contextlib.suppress(httpx2.HTTPError, SubscriptionLost),
        ):
            async for _ in items:
                pass
        ended = time.time()
    assert ended >= refused_from - 0.2, f"ended {refused_from - ended:.1f}s before the token expired"
    assert "Traceback" not in oauth.server.log


def test_no_token_or_claim_value_is_logged(oauth: Setup) -> None:
    """Every token the tests sent, and the claim values of refused ones, are absent from the server's
    log at debug level (the actor of an accepted call is logged by design: the call log names it)."""
    sent = [make(oauth) for make, _ in BAD_TOKENS.values()] + [oauth.token(), oauth.signed()]
    for token in sent:
        initialize(oauth.url, token)
    log = oauth.server.log
    assert "DEBUG" in log, "the server logs at debug level"
    for token in sent:
        assert token not in log
        for part in token.split("."):
            assert len(part) < 16 or part not in log
    assert CANARY not in log


# -- the issuer's keys: rotation, the issuer down or hanging -----------------------------------------


@pytest.fixture
def restartable(tmp_path: Path) -> Iterator[Setup]:
    require_provider()
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    clients = [confidential_client("user_editor", SECRET)]
    keys = [SigningKey.rsa("key-A")]
    with oidc_provider(tmp_path, {resource: {"scope": MNOTE_SCOPES}}, clients=clients, keys=keys) as provider:
        db = seeded_store(tmp_path / "mnote.db")
        extra = ("--oauth-timeout", "2", "--oauth-refetch-interval", "0.2")
        with serve_oauth(db, port, provider.issuer, resource, *extra) as server:
            yield Setup(provider, server, resource, db)


def test_rotation_is_picked_up_and_an_unreachable_issuer_is_bounded(restartable: Setup) -> None:
    setup, provider = restartable, restartable.provider
    old = setup.token()
    assert initialize(setup.url, old).status_code == 200

    # Rotation: the provider now signs with key B and still publishes key A. No restart of ours.
    provider.restart(keys=[SigningKey.rsa("key-B"), provider.keys[0]])
    new = setup.token()
    assert json.loads(base64.urlsafe_b64decode(new.split(".")[0] + "=="))["kid"] == "key-B"
    assert initialize(setup.url, new).status_code == 200
    assert initialize(setup.url, old).status_code == 200

    # The issuer down (nothing listens): tokens signed with keys already fetched keep working; a
    # token naming a key never fetched is refused, and at once.
    provider.stop()
    unknown = SigningKey.rsa("key-C").sign(setup.claims())
    time.sleep(0.3)  # past --oauth-refetch-interval: the unknown key does make the server try
    assert initialize(setup.url, new).status_code == 200
    started = time.monotonic()
    refused = initialize(setup.url, unknown)
    assert refused.status_code == 401
    assert challenge(refused)["error_description"] == "token signed with a key the issuer does not publish"
    assert time.monotonic() - started < patience(10)

    # The issuer hanging (it accepts and never answers): the same, within --oauth-timeout (2 s).
    with _hanging_listener(provider.port):
        time.sleep(0.3)
        started = time.monotonic()
        refused = initialize(setup.url, unknown)
        took = time.monotonic() - started
        assert refused.status_code == 401 and 1.5 < took < patience(12), took
        assert initialize(setup.url, new).status_code == 200
    assert "did not arrive within 2.0 s" in setup.server.log


class _hanging_listener:  # noqa: N801  (a context manager used like a function)
    """A socket on `port` that accepts connections and never answers."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_server(("127.0.0.1", port), reuse_port=False)
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(connection)

    def __enter__(self) -> _hanging_listener:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()
        for connection in self.held:
            connection.close()


# -- opaque tokens, by introspection -----------------------------------------------------------------


def test_opaque_tokens_are_checked_by_introspection(tmp_path: Path) -> None:
    require_provider()
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    opaque = {"scope": MNOTE_SCOPES, "format": "opaque"}
    resources = {resource: opaque, OTHER_RESOURCE: opaque}
    clients = [confidential_client("user_editor", SECRET), introspecting_client("mnote-rs", "rs-secret")]
    with oidc_provider(tmp_path, resources, clients=clients) as provider:
        db = seeded_store(tmp_path / "mnote.db")
        extra = (
            "--oauth-introspection",
            "--oauth-client-id",
            "mnote-rs",
            "--oauth-actor-claim",
            "client_id",  # the provider's client-credentials tokens name no `sub` when introspected
        )
        env = {"MNOTE_OAUTH_CLIENT_SECRET": "rs-secret"}
        with serve_oauth(db, port, provider.issuer, resource, *extra, env=env) as server:
            token = provider.client_credentials("user_editor", SECRET, resource, MNOTE_SCOPES)
            assert "." not in token, "an opaque token"
            assert initialize(server.url, token).status_code == 200

            # Revoked at the provider: refused at its next use (an active answer is never kept).
            revoked = httpx2.post(
                f"{provider.issuer}/token/revocation",
                data={"token": token},
                auth=("user_editor", SECRET),
                timeout=patience(30),
            )
            assert revoked.status_code == 200
            refused = initialize(server.url, token)
            assert challenge(refused)["error_description"] == (
                "token not active (expired, revoked or unknown to its issuer)"
            )

            # Active, but issued for another resource.
            other = provider.client_credentials("user_editor", SECRET, OTHER_RESOURCE, MNOTE_SCOPES)
            refused = initialize(server.url, other)
            assert challenge(refused)["error_description"] == "token not issued for this resource"

            # A JWT, or anything else the provider does not vouch for.
            for stranger in ("garbage", SigningKey.rsa("any").sign({"sub": "user_editor"})):
                refused = initialize(server.url, stranger)
                assert challenge(refused)["error_description"] == (
                    "token not active (expired, revoked or unknown to its issuer)"
                )
            # What cannot be a bearer token is refused without asking the provider (issue 30).
            assert challenge(initialize(server.url, "not-a-token;" + CANARY))["error_description"] == (
                "malformed token"
            )
            assert "rs-secret" not in server.log and token not in server.log
