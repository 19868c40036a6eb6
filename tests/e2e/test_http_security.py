"""HTTP hardening: tokens, scopes, Host/Origin validation, body limits, health check, startup refusals.
None of the refusals shows page content."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from mnote_mcp.tools.catalog import ALL_TOOLS
from mnote_mcp.tools.permissions import Caller
from tests.support.helpers import RAW_INITIALIZE, SECRETS, call, page_args, seeded_store, write_args
from tests.support.http_helpers import RunningServer, http_server, mcp_http, start_failure, write_tokens
from tests.support.timing import patience
from tests.support.tool_calls import allowed

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
INIT = RAW_INITIALIZE
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
TOKENS: dict[str, dict[str, Any]] = {
    "tok-editor": {"actorId": "user_editor"},
    "tok-viewer": {"actorId": "user_viewer", "scopes": ["page.read"]},
    "tok-artifacts-only": {"actorId": "user_editor", "scopes": ["artifact.write"]},
    "tok-other-ws": {"actorId": "user_owner", "workspaces": ["ws_other"]},
    "tok-owner": {"actorId": "user_owner"},
}


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    return write_tokens(tmp_path / "tokens.json", TOKENS)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """The server of `--auth-file` and nothing else, made once for the tests that only need it: none
    counts sessions or reads the log, and the one that writes uses its own run and keys."""
    base = tmp_path_factory.mktemp("http-security")
    tokens = write_tokens(base / "tokens.json", TOKENS)
    with http_server(seeded_store(base / "mnote.db"), "--auth-file", str(tokens)) as running:
        yield running


def _post(url: str, token: str | None = None, **headers: str) -> httpx2.Response:
    sent = {**JSON_HEADERS, **({"Authorization": f"Bearer {token}"} if token else {}), **headers}
    return httpx2.post(f"{url}/mcp", json=INIT, headers=sent, timeout=patience(10))


def _no_secret(response: httpx2.Response) -> None:
    for secret in SECRETS:
        assert secret not in response.text


def test_tokens_are_required_and_checked(server: RunningServer) -> None:
    missing = _post(server.url)
    wrong = _post(server.url, "tok-nope")
    good = _post(server.url, "tok-editor")
    sse_missing = httpx2.get(f"{server.url}/sse", timeout=patience(10))
    messages_missing = httpx2.post(f"{server.url}/messages/?session_id=x", json=INIT, timeout=patience(10))
    health = httpx2.get(f"{server.url}/healthz", timeout=patience(10))
    no_scope = _post(server.url, "tok-artifacts-only")
    for refused in (missing, wrong, sse_missing, messages_missing):
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Bearer ")
        _no_secret(refused)
    assert good.status_code == 200
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert no_scope.status_code == 403
    assert 'error="insufficient_scope"' in no_scope.headers["www-authenticate"]


async def test_a_viewer_token_cannot_write(server: RunningServer) -> None:
    async with mcp_http(server.url, "tok-viewer") as client:
        write = await call(client, "mnote.page.save", **write_args("v", content=[{"type": "paragraph"}]))
        read = await call(client, "mnote.page.get", **page_args())
        secret = await call(client, "mnote.page.get", **page_args("doc_secret"))
    assert write["error"]["code"] == "mnote_tool_permission_denied"
    assert write["error"]["details"] == {"scope": "page.write"}
    assert read["ok"]
    assert secret["error"]["code"] == "mnote_tool_permission_denied"
    assert not any(s in json.dumps([write, secret]) for s in SECRETS)


async def test_a_run_id_header_does_not_let_one_token_undo_anothers_writes(server: RunningServer) -> None:
    """Issue 26: token B writes under `X-Mnote-Run-Id: shared`; token A's `undoRunId: "shared"` undoes
    A's own writes of that run only (a run is the caller's actor and run id), B's block stays."""
    shared = {"X-Mnote-Run-Id": "shared"}
    block = {"id": "from_b", "type": "paragraph", "text": "B"}
    async with mcp_http(server.url, "tok-owner", **shared) as b:
        wrote = await call(b, "mnote.block.insert", **_headers_only(write_args("b", blocks=[block])))
    async with mcp_http(server.url, "tok-editor", **shared) as a:
        undo = await call(a, "mnote.page.revert", **_headers_only(write_args("a", undoRunId="shared")))
        page = await call(a, "mnote.page.get", **page_args())
        history = await call(a, "mnote.page.history", **page_args(filter={"runId": "shared"}))
    assert wrote["ok"], wrote["error"]
    assert [entry["actorId"] for entry in history["result"]["entries"]] == ["user_owner"]
    assert undo["error"]["code"] == "mnote_tool_not_found", undo  # A wrote nothing in that run (issue 30)
    assert "from_b" in [item["id"] for item in page["result"]["blocks"]]


def _headers_only(arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments without a runId, so that the connection's `X-Mnote-Run-Id` names the run."""
    return {name: value for name, value in arguments.items() if name != "runId"}


async def test_a_workspace_limited_token_sees_nothing_else(server: RunningServer) -> None:
    async with mcp_http(server.url, "tok-other-ws") as client:
        limited = await call(client, "mnote.page.get", **page_args("doc_secret"))
        missing = await call(client, "mnote.page.get", **page_args("doc_nope"))
    assert limited["error"] == missing["error"]
    assert limited["error"]["message"] == "not a member of this workspace"


async def test_read_only_server_caps_every_token(db: Path, tokens: Path) -> None:
    with http_server(db, "--auth-file", str(tokens), "--read-only") as server:
        async with mcp_http(server.url, "tok-editor") as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            write = await call(client, "mnote.page.update_title", **write_args("r", title="x"))
    assert names == [spec.name for spec in ALL_TOOLS if spec.name in allowed(Caller.READ_ONLY_SERVER)]
    assert write["error"]["code"] == "mnote_tool_permission_denied"


def test_bad_host_and_origin_are_refused(server: RunningServer) -> None:
    bad_host = _post(server.url, "tok-editor", Host="evil.example:80")
    bad_origin = _post(server.url, "tok-editor", Origin="http://evil.example")
    good_origin = _post(server.url, "tok-editor", Origin="http://localhost:5173")
    sse_bad_host = httpx2.get(
        f"{server.url}/sse",
        headers={"Authorization": "Bearer tok-editor", "Host": "evil.example"},
        timeout=patience(10),
    )
    assert bad_host.status_code == 421
    assert bad_origin.status_code == 403
    assert sse_bad_host.status_code == 421
    assert good_origin.status_code == 200
    for response in (bad_host, bad_origin, sse_bad_host):
        _no_secret(response)


def test_oversized_bodies_are_refused(db: Path, tokens: Path) -> None:
    with http_server(db, "--auth-file", str(tokens), "--max-body-bytes", "2048") as server:
        body = {**INIT, "params": {**INIT["params"], "padding": "x" * 4096}}
        response = httpx2.post(
            f"{server.url}/mcp",
            json=body,
            headers={**JSON_HEADERS, "Authorization": "Bearer tok-editor"},
            timeout=patience(10),
        )
        sse_post = httpx2.post(
            f"{server.url}/messages/?session_id=0",
            json=body,
            headers={**JSON_HEADERS, "Authorization": "Bearer tok-editor"},
            timeout=patience(10),
        )
    assert response.status_code == 413
    assert sse_post.status_code == 413


def test_a_group_readable_tokens_file_is_refused(db: Path, tmp_path: Path) -> None:
    loose = write_tokens(tmp_path / "loose.json", TOKENS)
    loose.chmod(0o644)
    result = start_failure(db, "--auth-file", str(loose))
    assert result.returncode == 2
    assert "chmod 600" in result.stderr


async def test_without_any_token_one_is_generated_into_a_private_file(db: Path, tmp_path: Path) -> None:
    token_file = tmp_path / "secret" / "http-token"
    with http_server(db, "--token-file", str(token_file), "--actor", "user_editor") as server:
        assert f"generated a bearer token for user_editor in {token_file}" in server.log
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        assert token not in server.log, "the token itself is never logged"
        async with mcp_http(server.url, token) as client:
            assert (await call(client, "mnote.page.get", **page_args()))["ok"]
    with http_server(db, "--token-file", str(token_file)) as again:
        assert "using the bearer token" in again.log
    assert token_file.read_text().strip() == token


async def test_mnote_token_environment_variable(db: Path) -> None:
    with http_server(db, "--actor", "user_viewer", env={"MNOTE_TOKEN": "env-token"}) as server:
        assert _post(server.url, "env-token").status_code == 200
        assert _post(server.url, "other").status_code == 401


async def test_unsafe_no_auth_only_on_loopback(db: Path) -> None:
    refused = start_failure(db, "--unsafe-no-auth", "--host", "0.0.0.0", "--allowed-hosts", "example.org")
    assert refused.returncode == 2 and "loopback" in refused.stderr
    with http_server(db, "--unsafe-no-auth", "--actor", "user_editor") as server:
        assert "--unsafe-no-auth" in server.log and "WARNING" in server.log
        async with mcp_http(server.url, None) as client:
            assert (await call(client, "mnote.page.get", **page_args()))["ok"]


def test_binding_beyond_loopback_needs_allowed_hosts(db: Path, tokens: Path) -> None:
    refused = start_failure(db, "--host", "0.0.0.0", "--auth-file", str(tokens))
    assert refused.returncode == 2 and "--allowed-hosts" in refused.stderr
    with http_server(
        db, "--host", "0.0.0.0", "--allowed-hosts", "127.0.0.1:*", "--auth-file", str(tokens)
    ) as server:
        assert "reachable from other machines" in server.log
        url = server.url.replace("0.0.0.0", "127.0.0.1")
        assert _post(url, "tok-editor").status_code == 200
        assert _post(url, "tok-editor", Host="mnote.internal").status_code == 421


async def test_minted_tokens_are_stored_hashed_and_work(db: Path, tmp_path: Path) -> None:
    import sys

    import anyio

    from tests.support.helpers import ROOT

    auth = tmp_path / "minted.json"
    minted = await anyio.run_process(
        [
            sys.executable,
            "-m",
            "mnote_mcp",
            "token",
            "--auth-file",
            str(auth),
            "--actor",
            "user_viewer",
            "--scope",
            "page.read",
            "--workspaces",
            "ws_1",
        ],
        cwd=ROOT,
    )
    token = minted.stdout.decode().strip()
    assert stat.S_IMODE(auth.stat().st_mode) == 0o600
    stored = json.loads(auth.read_text())["tokens"][0]
    assert token not in auth.read_text() and stored["actorId"] == "user_viewer"
    assert stored["scopes"] == ["page.read"] and stored["workspaces"] == ["ws_1"]
    with http_server(db, "--auth-file", str(auth)) as server:
        async with mcp_http(server.url, token) as client:
            read = await call(client, "mnote.page.get", **page_args())
    assert read["ok"]
