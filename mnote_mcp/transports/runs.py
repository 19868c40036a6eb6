"""Which run a call over HTTP belongs to when nothing names one: the session's, or the HTTP client's.

A 2025-11-25 session (`Mcp-Session-Id`, an `/sse` connection) is one run (`run_<session id>`,
`transports/headers.py`). A request without a session (the 2026-07-28 era, which fastmcp and the OpenAI
Agents SDK speak over `/mcp`, or `--stateless`) had nothing to join it to the calls before it, so a
client that named no run got a run per call, and undoing "my run" undid one write of several (issue
31). Such a request's answer now sets a cookie, `mnote-run`, naming a generated run; an HTTP client
that keeps cookies (httpx in the MCP Python SDKs, fastmcp, the OpenAI Agents SDK, pydantic-ai) sends
it with its next requests, so its calls share one run for as long as it lives, on any replica. A run
named by the client (`X-Mnote-Run-Id`, `_meta`, the arguments) still comes first; a client that keeps
no cookies (Node's `fetch`) gets a run per call unless it names one, as before.

The cookie names nothing secret (a run id, which a client may choose freely anyway) and grants
nothing: who the caller is still comes from its token.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Mapping

from starlette.types import ASGIApp, Message, Receive, Scope, Send

RUN_COOKIE = "mnote-run"
_ID = re.compile(r"[0-9a-f]{16}")
_COOKIE = re.compile(rf"(?:^|;)\s*{RUN_COOKIE}=([^;\s]*)")


def client_run(headers: Mapping[str, str]) -> str | None:
    """The run id the `mnote-run` cookie names (16 hex digits), if the request carries one."""
    found = _COOKIE.search(headers.get("cookie", ""))
    return found.group(1) if found and _ID.fullmatch(found.group(1)) else None


class ClientRuns:
    """Gives a request without a session (`sessionless`) that carries no `mnote-run` cookie a run:
    the cookie is added to the request as if the client had sent it, and set on the answer."""

    def __init__(self, app: ASGIApp, sessionless: Callable[[Scope], bool]) -> None:
        self.app = app
        self.sessionless = sessionless

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.sessionless(scope):
            await self.app(scope, receive, send)
            return
        headers = {key.decode("latin-1"): value.decode("latin-1") for key, value in scope["headers"]}
        if client_run(headers) is not None:
            await self.app(scope, receive, send)
            return
        run = secrets.token_hex(8)
        cookie = f"{RUN_COOKIE}={run}"
        sent = headers.get("cookie")
        kept = [(key, value) for key, value in scope["headers"] if key != b"cookie"]
        cookies = f"{sent}; {cookie}" if sent else cookie
        scope = {**scope, "headers": [*kept, (b"cookie", cookies.encode("latin-1"))]}
        setting = f"{cookie}; Path=/; HttpOnly; SameSite=Strict".encode("latin-1")

        async def setting_the_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", setting)]}
            await send(message)

        await self.app(scope, receive, setting_the_cookie)
