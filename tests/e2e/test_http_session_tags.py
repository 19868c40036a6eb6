"""`--session-tag`: a replica's stateful sessions say which replica holds them, so a proxy can route
them (docs/deploy.md; nginx in front of two replicas: tests/deploy/test_nginx.py).

A streamable-HTTP session id is `TAG.<32 hex digits>` and works for the whole session through the SDK
client; the legacy SSE transport announces `/messages/TAG/` as its message path and works there;
another replica's id answers 404 (as any unknown id); a tag that would not fit a header, a path or an
nginx regex is a usage error.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.support.helpers import RAW_INITIALIZE, call, page_args, run_cli
from tests.support.http_helpers import http_server, mcp_http, mcp_sse, write_tokens
from tests.support.timing import patience

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
TOKENS: dict[str, dict[str, Any]] = {"tok-editor": {"actorId": "user_editor"}}
HEADERS = {
    "Authorization": "Bearer tok-editor",
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
}


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    return write_tokens(tmp_path / "tokens.json", TOKENS)


async def test_a_stateful_session_id_starts_with_the_replica_tag_and_serves_the_session(
    db: Path, tokens: Path
) -> None:
    with http_server(db, "--auth-file", str(tokens), "--session-tag", "replica-a") as server:
        opened = httpx2.post(f"{server.url}/mcp", json=RAW_INITIALIZE, headers=HEADERS, timeout=patience(30))
        assert opened.status_code == 200, opened.text
        assert re.fullmatch(r"replica-a\.[0-9a-f]{32}", opened.headers["mcp-session-id"])
        session = {**HEADERS, "mcp-protocol-version": "2025-11-25"}
        other = opened.headers["mcp-session-id"].replace("replica-a.", "replica-b.")
        stranger = httpx2.post(
            f"{server.url}/mcp",
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            headers={**session, "mcp-session-id": other},
            timeout=patience(30),
        )
        assert stranger.status_code == 404, "another replica's session is unknown here"
        async with mcp_http(server.url, "tok-editor", "legacy") as client:
            envelope = await call(client, "mnote.page.get", **page_args())
        assert envelope["ok"] is True


async def test_an_sse_session_posts_to_the_tagged_message_path(db: Path, tokens: Path) -> None:
    with http_server(db, "--auth-file", str(tokens), "--session-tag", "b") as server:
        with httpx2.stream("GET", f"{server.url}/sse", headers=HEADERS, timeout=patience(30)) as stream:
            endpoint = next(line for line in stream.iter_lines() if line.startswith("data:"))
        assert re.fullmatch(r"data: /messages/b/\?session_id=[0-9a-f]{32}", endpoint), endpoint
        async with mcp_sse(server.url, "tok-editor") as client:
            envelope = await call(client, "mnote.page.get", **page_args())
        assert envelope["ok"] is True


@pytest.mark.parametrize("tag", ["a.b", "a/b", "x" * 33, "ü"])
def test_a_tag_that_does_not_fit_a_header_a_path_and_a_regex_is_a_usage_error(tag: str) -> None:
    done = run_cli("serve", "--transport", "http", "--session-tag", tag)
    assert done.returncode == 2, done.stderr
    assert "--session-tag" in done.stderr and "not a session tag" in done.stderr
