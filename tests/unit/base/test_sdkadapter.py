"""sdkadapter.py: every private name of the MCP SDK the package uses, driven on the real SDK, so an
upgrade that moves one fails here (and nowhere else in the package reaches past the SDK's public
names: the last test reads the source for that)."""

from __future__ import annotations

import ast
import json
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as types
import pytest
from mcp import Client
from mcp.server import Server
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, AuthorizationContext
from mcp.server.auth.provider import AccessToken
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from starlette.types import Receive, Scope, Send

from mnote_mcp.base.sdkadapter import SessionManager, connection_of
from tests.support.helpers import ROOT

pytestmark = pytest.mark.anyio
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


class Recording(SessionManager):
    """Records each session it admits, renaming it when told to."""

    def __init__(self, *args: Any, prefix: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.prefix = prefix
        self.admissions: list[str] = []

    def admitted(self, transport: StreamableHTTPServerTransport) -> None:
        assert transport.mcp_session_id is not None
        if self.prefix is not None:
            self.rename_session(transport, self.prefix + transport.mcp_session_id)
        self.admissions.append(transport.mcp_session_id)


def owned_by(app: StreamableHTTPASGIApp) -> Any:
    """The app with each request authenticated as the subject its `x-owner` header names (as the
    bearer middleware would)."""

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        owner = dict(scope["headers"]).get(b"x-owner")
        if owner is not None:
            token = AccessToken(token="t", client_id="c", scopes=[], subject=owner.decode())
            scope = {**scope, "user": AuthenticatedUser(token)}
        await app(scope, receive, send)

    return asgi


@asynccontextmanager
async def serving(manager: SessionManager) -> AsyncIterator[httpx2.AsyncClient]:
    transport = httpx2.ASGITransport(app=owned_by(StreamableHTTPASGIApp(manager)))
    async with manager.run(), httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client


async def open_session(client: httpx2.AsyncClient, owner: str | None) -> str:
    headers = {**MCP_HEADERS, **({"x-owner": owner} if owner is not None else {})}
    answer = await client.post("/mcp", content=json.dumps(INITIALIZE), headers=headers)
    assert answer.status_code == 200, answer.text
    return answer.headers["mcp-session-id"]


async def ping(client: httpx2.AsyncClient, session_id: str, owner: str | None) -> int:
    headers = {**MCP_HEADERS, "mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}
    if owner is not None:
        headers["x-owner"] = owner
    body = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    return (await client.post("/mcp", content=json.dumps(body), headers=headers)).status_code


async def test_the_registry_of_sessions_and_their_owners_is_read_and_a_session_ended() -> None:
    manager = Recording(app=Server("fence"), json_response=True)
    async with serving(manager) as client:
        first = await open_session(client, "digest-a")
        second = await open_session(client, "digest-b")
        anonymous = await open_session(client, None)
        assert manager.admissions == [first, second, anonymous], "admitted() heard each new session"
        assert manager.session_count() == 3
        owners: dict[str, Hashable] = {first: "digest-a", second: "digest-b"}
        assert manager.session_owners() == owners
        assert await ping(client, first, "digest-a") == 200

        await manager.end_session(first)
        assert await ping(client, first, "digest-a") == 404, "ended the SDK's way: forgotten, 404"
        assert manager.session_count() == 2 and manager.session_owners() == {second: "digest-b"}
        await manager.end_session("no-such-session")  # nothing to end: nothing happens
        assert await ping(client, second, "digest-b") == 200


async def test_a_session_renamed_when_admitted_is_served_under_its_new_id_only() -> None:
    manager = Recording(app=Server("fence"), json_response=True, prefix="tag.")
    async with serving(manager) as client:
        session_id = await open_session(client, "digest-a")
        assert session_id.startswith("tag.") and manager.admissions == [session_id]
        assert manager.session_owners() == {session_id: "digest-a"}
        assert await ping(client, session_id, "digest-a") == 200
        assert await ping(client, session_id.removeprefix("tag."), "digest-a") == 404
        assert await ping(client, session_id, "digest-b") == 404, "still owned: another owner is refused"


async def test_the_connection_a_request_session_wraps_outlives_the_request() -> None:
    """The SDK builds a `ServerSession` per request; `connection_of` gives the one connection beneath
    them, whose exit stack runs when the client goes."""
    seen: list[Connection] = []
    closed = anyio.Event()

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        connection = connection_of(ctx.session)
        if not seen:
            connection.exit_stack.callback(closed.set)
        seen.append(connection)
        return types.CallToolResult(content=[types.TextContent(type="text", text="ok")])

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="any", input_schema={"type": "object"})])

    server: Server[Any] = Server("fence", on_call_tool=call_tool, on_list_tools=list_tools)
    async with Client(server, mode="legacy") as client:  # a handshake-era connection: one for both calls
        await client.call_tool("any", {})
        await client.call_tool("any", {})
        assert not closed.is_set()
    assert len(seen) == 2 and isinstance(seen[0], Connection) and seen[0] is seen[1]
    assert closed.is_set(), "the connection's exit stack ran when the client went"


def private_reaches(package: Path) -> list[str]:
    """Attributes starting with one underscore, read on anything but `self`/`cls`, that the package
    does not define itself: a library's private names."""
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in sorted(package.rglob("*.py"))}
    own = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                own.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                own.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                own.add(node.id)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                own.add(node.target.id)
    found = []
    for path, tree in trees.items():
        if path.name == "sdkadapter.py":
            continue
        for node in ast.walk(tree):
            if (
                not isinstance(node, ast.Attribute)
                or not node.attr.startswith("_")
                or node.attr.startswith("__")
            ):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            if node.attr not in own and node.attr not in PUBLIC_DESPITE_UNDERSCORE:
                found.append(f"{path.relative_to(package.parent)}:{node.lineno} .{node.attr}")
    return sorted(found)


# os._exit and namedtuple's _replace are public API despite the underscore; logging._srcfile is the
# documented way to skip finding the caller's frame.
PUBLIC_DESPITE_UNDERSCORE = frozenset({"_exit", "_replace", "_srcfile"})


@pytest.mark.slow  # every module of the package parsed: 0.86 s of CPU
def test_no_module_but_the_adapter_reaches_past_a_librarys_public_names() -> None:
    assert private_reaches(ROOT / "mnote_mcp") == []


def test_a_reach_past_the_sdk_anywhere_else_is_found(tmp_path: Path) -> None:
    """What the check above would say of the reaches this adapter took over (transports/http.py and
    resources/pages.py before it)."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "own.py").write_text("class Kept:\n    def __init__(self):\n        self._mine = 1\n")
    (package / "reach.py").write_text(
        "def f(ctx, manager, kept):\n"
        "    kept._mine\n"
        "    manager._session_owners.values()\n"
        "    return ctx.session._connection\n"
    )
    assert private_reaches(package) == ["pkg/reach.py:3 ._session_owners", "pkg/reach.py:4 ._connection"]


def test_a_new_session_is_admitted_as_the_sdks_own_code_admits_it() -> None:
    """The adapter builds a new session's transport itself (`new_transport`, for the consent transport),
    so its `_admit_session` is the SDK's, rewritten: the same transport settings, the owner filed, the
    cap kept. Compared with the SDK's own, on the same manager settings, so an SDK whose admission
    changes fails here."""
    settings: dict[str, Any] = {"json_response": True, "session_idle_timeout": 30.0, "max_sessions": 1}
    ours = SessionManager(app=Server("fence"), **settings)
    sdks = StreamableHTTPSessionManager(app=Server("fence"), **settings)
    owner = AuthorizationContext(client_id="c", issuer=None, subject="digest-a")
    made = [manager._admit_session(owner) for manager in (ours, sdks)]
    mine, theirs = (transport for transport in made if transport is not None)
    compared = ("is_json_response_enabled", "_event_store", "_retry_interval", "_idle_timeout")
    assert [getattr(mine, name) for name in compared] == [getattr(theirs, name) for name in compared]
    assert type(mine) is type(theirs) is StreamableHTTPServerTransport
    for manager, transport in zip((ours, sdks), made, strict=True):
        assert transport is not None and transport.mcp_session_id is not None
        assert manager._server_instances == {transport.mcp_session_id: transport}
        assert manager._session_owners == {transport.mcp_session_id: owner}
        assert manager._admit_session(None) is None, "the cap, one session"
