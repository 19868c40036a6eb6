"""A rolling upgrade across one schema version, as docs/deploy.md tells it (issue 23): the previous
release (the last commit at PostgreSQL schema version 3, taken from this repository's history) serves
a database; this release's `mnote-mcp migrate` brings it to version 4 while that replica runs; the old
replica goes on answering reads and writes, a replica of this release serves beside it, each sees the
other's writes, an idempotency key sent to one replays on the other, a search on the new one finds
what the old one wrote after the migration; and an old replica started after the migration is
refused (exit 3), so the roll only goes forward.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import FIXTURE, ROOT, call, page_args, run_cli, write_args
from tests.support.http_helpers import http_server, mcp_http, write_tokens
from tests.support.postgres import PgServer

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
# The last commit whose PostgreSQL schema is version 3 (its successor added version 4, page_history.txid).
PREVIOUS_RELEASE = "84b7c4cf40ceddc83009418c5af28a485f154a44"
TOKENS: dict[str, dict[str, Any]] = {"tok-editor": {"actorId": "user_editor"}}


@pytest.fixture(scope="module")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The previous release's `mnote_mcp` package, extracted from git (it runs on this environment)."""
    tree = tmp_path_factory.mktemp("previous-release")
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed: the previous release comes from this repository's history")
    found = subprocess.run(
        [git, "cat-file", "-e", f"{PREVIOUS_RELEASE}^{{commit}}"], cwd=ROOT, capture_output=True
    )
    if found.returncode != 0:
        pytest.skip(f"commit {PREVIOUS_RELEASE[:12]} is not in this checkout (a shallow clone?)")
    archive = subprocess.run(
        [git, "archive", PREVIOUS_RELEASE, "mnote_mcp"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


async def test_old_and_new_replicas_serve_side_by_side_across_a_migration(
    pg_server: PgServer, previous_release: Path, tmp_path: Path
) -> None:
    db = pg_server.database()
    tokens = write_tokens(tmp_path / "tokens.json", TOKENS)
    created = run_cli("migrate", "--db", db, root=previous_release)
    assert created.returncode == 0 and json.loads(created.stdout)["schemaVersion"] == 3, created.stderr
    assert run_cli("seed", "--db", db, str(FIXTURE), root=previous_release).returncode == 0

    replica = ["--auth-file", str(tokens), "--stateless"]
    with http_server(db, *replica, root=previous_release) as old:
        async with mcp_http(old.url, "tok-editor") as client:
            first = await call(
                client, "mnote.block.update", **write_args("k_old_1", blockId="p_1", text="old 1")
            )
        assert first["ok"], first["error"]

        migrated = run_cli("migrate", "--db", db)  # this release, while the old replica serves
        report = json.loads(migrated.stdout)
        assert report["schemaVersion"] == 4 and report["migrations"][-1]["version"] == 4, migrated.stderr

        async with mcp_http(old.url, "tok-editor") as client:
            second = await call(
                client,
                "mnote.block.update",
                **write_args("k_old_2", blockId="p_2", text="written by the old"),
            )
        assert second["ok"], second["error"]
        with http_server(db, *replica) as new:
            async with mcp_http(new.url, "tok-editor") as client:
                third = await call(
                    client, "mnote.block.update", **write_args("k_new_1", blockId="p_1", text="new 1")
                )
                again = await call(
                    client,
                    "mnote.block.update",
                    **write_args("k_old_2", blockId="p_2", text="written by the old"),
                )
                found = await call(client, "mnote.page.search", query="written", workspaceId="ws_1")
            async with mcp_http(old.url, "tok-editor") as client:
                seen_by_old = await call(client, "mnote.page.get", **page_args())
    assert third["ok"], third["error"]
    assert again["ok"] and again["result"]["idempotentReplay"] is True
    assert again["audit"]["commandId"] == second["audit"]["commandId"], "one ledger across releases"
    assert [hit["documentId"] for hit in found["result"]["hits"]] == ["doc_1"]
    texts = {block["id"]: block["text"] for block in seen_by_old["result"]["blocks"]}
    assert (texts["p_1"], texts["p_2"]) == ("new 1", "written by the old")

    late = run_cli("serve", "--transport", "http", "--port", "0", "--db", db, *replica, root=previous_release)
    assert late.returncode == 3, late.stderr
    assert "schema version 4" in late.stderr and "knows 3" in late.stderr
