"""Token files under pressure (issue 9): `mnote-mcp token` run concurrently loses nothing; the runtime's
service token comes from the environment or a private file, never from the command line."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from mnote_mcp.base.secretfiles import SecretFileError
from mnote_mcp.settings import service_token
from mnote_mcp.transports.auth.tokens import TokenStore
from tests.support.helpers import ROOT
from tests.support.runtimes import RuntimeProcess
from tests.support.timing import patience

pytestmark = pytest.mark.anyio
RUNS = 8


async def test_concurrent_token_runs_store_every_token(tmp_path: Path) -> None:
    auth = tmp_path / "tokens.json"
    printed: list[str] = []

    async def mint(index: int) -> None:
        done = await anyio.run_process(
            [
                sys.executable,
                "-m",
                "mnote_mcp",
                "token",
                "--auth-file",
                str(auth),
                "--actor",
                f"user_{index}",
            ],
            cwd=ROOT,
        )
        printed.append(done.stdout.decode().strip())

    async with anyio.create_task_group() as group:
        for index in range(RUNS):
            group.start_soon(mint, index)
    stored = json.loads(auth.read_text())["tokens"]
    assert len(printed) == len(stored) == RUNS
    assert sorted(entry["actorId"] for entry in stored) == sorted(f"user_{i}" for i in range(RUNS))
    store = TokenStore.from_file(auth)
    assert sorted(grant.actor_id for t in printed if (grant := store.verify(t))) == sorted(
        f"user_{i}" for i in range(RUNS)
    ), "every printed token works"
    assert stat.S_IMODE(auth.stat().st_mode) == 0o600
    assert not list(tmp_path.glob("*.tmp")), "no temporary left"  # noqa: ASYNC240


def test_a_garbled_tokens_file_is_not_overwritten(tmp_path: Path) -> None:
    auth = tmp_path / "tokens.json"
    auth.write_text('{"tokens": [')
    auth.chmod(0o600)
    done = subprocess.run(
        [sys.executable, "-m", "mnote_mcp", "token", "--auth-file", str(auth), "--actor", "u"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=patience(60),
    )
    assert done.returncode == 2 and "fix or remove it" in done.stderr
    assert auth.read_text() == '{"tokens": [', "left as it was"


def test_the_runtime_token_never_rides_the_command_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mnote_mcp", "runtime", "serve", "--token", "s3cret"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=patience(60),
    )
    assert done.returncode == 2
    assert "--token" in done.stderr and "MNOTE_RUNTIME_TOKEN or --token-file" in done.stderr


def test_the_runtime_token_from_a_private_file(db: Path, tmp_path: Path) -> None:
    import httpx2

    secret = tmp_path / "runtime-token"
    secret.write_text("from-a-file\n")
    secret.chmod(0o600)
    runtime = RuntimeProcess(db=db, workdir=tmp_path, token=None)
    runtime.start(env={"MNOTE_RUNTIME_TOKEN_FILE": str(secret)})
    try:
        refused = httpx2.get(f"{runtime.url}/v1/pages?actorId=user_editor", trust_env=False)
        allowed = httpx2.get(
            f"{runtime.url}/v1/pages?actorId=user_editor",
            headers={"Authorization": "Bearer from-a-file"},
            trust_env=False,
        )
    finally:
        runtime.stop()
    assert refused.status_code == 401 and allowed.status_code == 200
    assert "from-a-file" not in runtime.log.read_text()


def test_the_relay_reads_its_token_file_and_refuses_a_loose_one(tmp_path: Path) -> None:
    secret = tmp_path / "runtime-token"
    secret.write_text("t0k\n")
    secret.chmod(0o600)
    assert service_token(None, secret) == "t0k"
    assert service_token(" env ", None) == "env"
    with pytest.raises(ValueError, match="keep one"):
        service_token("env", secret)
    secret.chmod(0o644)
    with pytest.raises(SecretFileError, match="chmod 600"):
        service_token(None, secret)


def _status(url: str, token: str) -> int:
    import httpx2

    from tests.support.helpers import RAW_INITIALIZE

    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {token}",
    }
    return httpx2.post(f"{url}/mcp", json=RAW_INITIALIZE, headers=headers, timeout=patience(10)).status_code


@pytest.mark.e2e
async def test_the_tokens_file_is_reloaded_and_fails_closed(db: Path, tmp_path: Path) -> None:
    """Removed: refused within seconds (and its subscriptions dropped); added: accepted; world-readable
    or garbled: every token refused until the file is fixed. No restart."""
    import httpx2

    from tests.support.http_helpers import http_server, mcp_http, wait_until, write_tokens

    auth = write_tokens(
        tmp_path / "tokens.json", {"tok-a": {"actorId": "user_editor"}, "tok-b": {"actorId": "user_editor"}}
    )
    with http_server(db, "--auth-file", str(auth), "--auth-reload-interval", "0.3") as server:

        def health() -> dict[str, int]:
            answer: dict[str, int] = httpx2.get(f"{server.url}/healthz", timeout=patience(10)).json()
            return answer

        async with mcp_http(server.url, "tok-b") as client:
            await client.subscribe_resource("mnote://workspaces/ws_1/pages/doc_1")
            assert health()["watches"] == 1
            write_tokens(auth, {"tok-a": {"actorId": "user_editor"}, "tok-c": {"actorId": "user_viewer"}})
            assert wait_until(lambda: _status(server.url, "tok-b") == 401, timeout=5), "removed: refused"
            assert wait_until(lambda: health()["watches"] == 0, timeout=5), "its subscription dropped"
        assert _status(server.url, "tok-c") == 200, "added: accepted"
        assert _status(server.url, "tok-a") == 200
        auth.chmod(0o644)
        assert wait_until(lambda: _status(server.url, "tok-a") == 401, timeout=5), "world-readable: closed"
        auth.chmod(0o600)
        assert wait_until(lambda: _status(server.url, "tok-a") == 200, timeout=5), "fixed: open again"
        auth.write_text('{"tokens": [')
        assert wait_until(lambda: _status(server.url, "tok-a") == 401, timeout=5), "garbled: closed"
        write_tokens(auth, {"tok-a": {"actorId": "user_editor"}})
        assert wait_until(lambda: _status(server.url, "tok-a") == 200, timeout=5)
    assert "refusing every token until it is fixed" in server.log and "chmod 600" in server.log
    assert "tok-a" not in server.log, "no token in the log"


# -- the runtime's default: a generated service token (issue 26, finding 6) ------------------------


@pytest.mark.e2e
async def test_a_runtime_given_no_token_requires_a_generated_one_that_local_relays_read(
    db: Path, tmp_path: Path
) -> None:
    """`runtime serve` on loopback with no token configured no longer lets any local process read
    and write as any actor: it generates a service token into a 0600 file in its data directory
    (kept across restarts) and refuses a request without it (401); a relay on the same machine
    (`--kernel http://127.0.0.1:…`, no token given) reads that file and works."""
    import httpx2
    from mcp import Client

    from tests.support.helpers import call, page_args, stdio_params

    runtime = RuntimeProcess(db=db, workdir=tmp_path, token=None)
    runtime.start()
    try:
        pages = f"{runtime.url}/v1/pages?actorId=user_editor"
        refused = httpx2.get(pages, trust_env=False, timeout=patience(10))
        assert refused.status_code == 401, refused.text
        secret = runtime.data_home / "mnote-mcp" / "runtime-token"
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600
        token = secret.read_text().strip()
        auth = {"Authorization": f"Bearer {token}"}
        assert httpx2.get(pages, headers=auth, trust_env=False, timeout=patience(10)).status_code == 200
        relay = stdio_params(
            tmp_path / "unused.db",
            "--kernel",
            runtime.url,
            "--actor",
            "user_editor",
            env={"XDG_DATA_HOME": str(runtime.data_home)},
        )
        async with Client(relay, read_timeout_seconds=60) as client:
            answer = await call(client, "mnote.page.get", **page_args())
        assert answer["ok"], answer
        runtime.stop()
        runtime.start()
        assert secret.read_text().strip() == token, "kept across restarts"
        assert httpx2.get(pages, headers=auth, trust_env=False, timeout=patience(10)).status_code == 200
    finally:
        runtime.stop()
    assert token not in runtime.log.read_text(), "the token is never logged"
    assert not (tmp_path / "unused.db").exists()


@pytest.mark.e2e
def test_a_runtime_without_a_token_only_when_asked_and_only_on_loopback(db: Path, tmp_path: Path) -> None:
    import httpx2

    from tests.support.runtimes import mnote_command

    runtime = RuntimeProcess(db=db, workdir=tmp_path, token=None)
    runtime.start(env={"MNOTE_RUNTIME_UNSAFE_NO_AUTH": "1"})
    try:
        answered = httpx2.get(
            f"{runtime.url}/v1/pages?actorId=user_editor", trust_env=False, timeout=patience(10)
        )
    finally:
        runtime.stop()
    assert answered.status_code == 200
    assert "--unsafe-no-auth" in runtime.log.read_text()
    assert not (runtime.data_home / "mnote-mcp" / "runtime-token").exists()
    beyond = subprocess.run(
        mnote_command(
            "runtime", "serve", "--db", str(db), "--host", "0.0.0.0", "--port", "0", "--unsafe-no-auth"
        ),
        capture_output=True,
        text=True,
        timeout=patience(60),
        cwd=ROOT,
    )
    assert beyond.returncode == 2 and "only allowed on a loopback address" in beyond.stderr


def test_a_relay_reads_the_local_runtime_token_only_for_a_local_runtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mnote_mcp.settings import local_service_token

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert local_service_token("http://127.0.0.1:8766") is None, "no file: no token"
    secret = tmp_path / "mnote-mcp" / "runtime-token"
    secret.parent.mkdir()
    secret.write_text("local-secret\n")
    secret.chmod(0o600)
    assert local_service_token("http://127.0.0.1:8766") == "local-secret"
    assert local_service_token("http://[::1]:8766/base") == "local-secret"
    assert local_service_token("http://localhost:8766") == "local-secret"
    assert local_service_token("https://runtime.example.com:8766") is None, "never sent to another host"
    secret.chmod(0o644)
    with pytest.raises(SecretFileError, match="chmod 600"):
        local_service_token("http://127.0.0.1:8766")


def _mnote(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mnote_mcp", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=patience(60),
    )


@pytest.mark.e2e
def test_token_list_and_a_live_revoke(db: Path, tmp_path: Path) -> None:
    """`token list` names every token (id, actor, scopes, created) and never gives one away;
    `token revoke ID` removes it, and a running server refuses it within --auth-reload-interval while
    the others keep working. Rotation: mint the new token, switch the agent, revoke the old one."""
    from tests.support.http_helpers import http_server, wait_until

    auth = tmp_path / "tokens.json"
    old = _mnote(
        "token", "--auth-file", str(auth), "--actor", "user_editor", "--name", "laptop"
    ).stdout.strip()
    other = _mnote("token", "--auth-file", str(auth), "--actor", "user_viewer", "--scope", "page.read").stdout
    other = other.strip()
    data = json.loads(auth.read_text())
    data["tokens"].append({"token": "hand-written-token", "actorId": "user_owner"})  # no id: written by hand
    auth.write_text(json.dumps(data))

    listed = _mnote("token", "list", "--auth-file", str(auth))
    assert listed.returncode == 0, listed.stderr
    entries = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [entry["actorId"] for entry in entries] == ["user_editor", "user_viewer", "user_owner"]
    assert entries[0]["name"] == "laptop" and entries[1]["scopes"] == ["page.read"]
    assert all(entry["created"].endswith("Z") for entry in entries[:2])
    assert entries[2]["id"].startswith("sha256:") and len(entries[2]["id"]) == len("sha256:") + 12
    for secret in (old, other, "hand-written-token", *(entry["sha256"] for entry in data["tokens"][:2])):
        assert secret not in listed.stdout + listed.stderr

    with http_server(db, "--auth-file", str(auth), "--auth-reload-interval", "0.3") as server:
        assert _status(server.url, old) == 200 and _status(server.url, "hand-written-token") == 200
        new = _mnote("token", "--auth-file", str(auth), "--actor", "user_editor").stdout.strip()
        assert wait_until(lambda: _status(server.url, new) == 200, timeout=10), "the new token: accepted"
        revoked = _mnote("token", "revoke", entries[0]["id"], "--auth-file", str(auth))
        assert revoked.returncode == 0 and "user_editor" in revoked.stderr and old not in revoked.stderr
        assert wait_until(lambda: _status(server.url, old) == 401, timeout=10), "revoked: refused live"
        assert _status(server.url, new) == 200 and _status(server.url, other) == 200
        by_digest = _mnote("token", "revoke", entries[2]["id"], "--auth-file", str(auth))
        assert by_digest.returncode == 0
        assert wait_until(lambda: _status(server.url, "hand-written-token") == 401, timeout=10)
    again = _mnote("token", "revoke", entries[0]["id"], "--auth-file", str(auth))
    assert again.returncode == 1 and "no token" in again.stderr and "token list" in again.stderr
    assert [
        json.loads(line)["actorId"]
        for line in _mnote("token", "list", "--auth-file", str(auth)).stdout.splitlines()
    ] == [
        "user_viewer",
        "user_editor",
    ]
    assert stat.S_IMODE(auth.stat().st_mode) == 0o600
