"""The permission matrix: every caller (`tools.permissions.Caller`: roles, a non-member, a page that
does not list the caller, no actor, a read-only server, narrowed scopes) against every registered tool,
each answer held to the tool's declared permission case (allowed, or the refusal's code and words);
no response, to anyone, ever shows a forbidden page's title or body; and no permitted write on a
restricted page lets anyone else read any of it. The tools and their calls come from the registry
(tests/support/tool_calls.py), so a new tool is in all of it by construction."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mnote_mcp.kernel.errors import MnoteError
from mnote_mcp.tools.catalog import ALL_TOOLS
from mnote_mcp.tools.examples import Target
from mnote_mcp.tools.permissions import Caller
from mnote_mcp.vocabulary.messages import render_error
from tests.support.helpers import FIXTURE, IDS, MODES, SECRETS, call, connect, dump, page_args, write_args
from tests.support.postgres import STORES, store_fixture
from tests.support.tool_calls import READS, arguments, call_example, calls, target

pytestmark = pytest.mark.anyio


@pytest.fixture(params=STORES)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """Every test here runs on SQLite and on PostgreSQL (the MCP end-to-end slice on both stores)."""
    return store_fixture(request, tmp_path, FIXTURE)


DOC_1 = target("doc_1")
# caller -> (server config, extra call arguments, the page the calls are aimed at)
ROWS: dict[Caller, tuple[dict[str, Any], dict[str, Any], Target]] = {
    Caller.OWNER: ({"actor": "user_owner"}, {}, DOC_1),
    Caller.EDITOR: ({"actor": "user_editor"}, {}, DOC_1),
    Caller.COMMENTER: ({"actor": "user_commenter"}, {}, DOC_1),
    Caller.VIEWER: ({"actor": "user_viewer"}, {}, DOC_1),
    Caller.NON_MEMBER: ({"actor": "user_stranger"}, {}, DOC_1),
    Caller.NOT_LISTED: ({"actor": "user_editor"}, {}, target("doc_secret")),
    Caller.ANONYMOUS: ({"actor": None}, {}, DOC_1),
    Caller.READ_ONLY_SERVER: ({"actor": "user_owner", "read_only": True}, {}, DOC_1),
    Caller.PAGE_READ_SCOPE: ({"actor": "user_owner"}, {"capabilityScope": ["page.read"]}, DOC_1),
    Caller.ARTIFACT_SCOPE: ({"actor": "user_owner"}, {"capabilityScope": ["artifact.write"]}, DOC_1),
}


def test_every_caller_has_a_row() -> None:
    assert set(ROWS) == set(Caller)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("caller", list(Caller))
async def test_permission_matrix(db: Path, mode: str, caller: Caller) -> None:
    """Each tool's first example, for real, in declaration order: allowed where the tool says so, and
    everywhere else refused with the declared code and the words of the declared reason."""
    config, extra, page = ROWS[caller]
    async with connect(db, mode, **config) as client:
        for spec in ALL_TOOLS:
            envelope = await call_example(client, spec, page, f"matrix-{caller.name}", **extra)
            refusal = spec.permissions.refusal(caller)
            if refusal is None:
                assert envelope["ok"], (caller, spec.name, envelope["error"])
                continue
            error = envelope["error"]
            assert error is not None and envelope["result"] is None, (caller, spec.name, envelope)
            said = MnoteError(refusal.code, refusal.reason, error.get("details"))
            assert error == render_error(said, "en"), (caller, spec.name, str(refusal), error)


# actor -> what it may not read (the stranger owns ws_other, and finds its own pages there)
FORBIDDEN = {
    "user_viewer": (*SECRETS, "OTHER-WORKSPACE-NAME"),
    "user_commenter": (*SECRETS, "OTHER-WORKSPACE-NAME"),
    "user_editor": (*SECRETS, "OTHER-WORKSPACE-NAME"),
    "user_stranger": SECRETS[:2],
    "nobody": (*SECRETS, "OTHER-WORKSPACE-NAME"),
}


@pytest.mark.parametrize("mode", MODES)
async def test_forbidden_pages_never_leak(db: Path, mode: str) -> None:
    """Every actor, every tool and every example, dry run or not, on every page it may not read: no
    secret anywhere (a tool that names no page is called all the same, and must not show one either)."""
    before = dump(db)
    targets = [target("doc_secret"), target("doc_other"), target("doc_missing", "ws_other")]
    for actor, forbidden in FORBIDDEN.items():
        seen: list[str] = []
        async with connect(db, mode, actor=actor, locale="zh-CN") as client:
            for page in targets:
                if actor == "user_stranger" and page.workspace_id == "ws_other":
                    continue  # the stranger owns ws_other
                for spec in ALL_TOOLS:
                    for dry_run in (False, True) if spec.writes else (False,):
                        for example in spec.examples:
                            for name, made in calls(spec, page, "leak", dry_run=dry_run, example=example):
                                result = await client.call_tool(name, {**IDS, **made})
                                if spec.page_bound:
                                    assert result.is_error, (actor, page, name)
                                seen.append(result.model_dump_json())
            listing = await client.list_tools()
            seen.append(listing.model_dump_json())
        text = "\n".join(seen)
        for secret in forbidden:
            assert secret not in text, (actor, secret)
            assert json.dumps(secret)[1:-1] not in text, (actor, secret)
    assert dump(db) == before


VAULT_SECRETS = ("VAULT-TITLE-3b9d", "VAULT-BODY-ONE-5a1e", "VAULT-BODY-TWO-7c4f", "VAULT-BODY-THREE-e02b")
VAULT = {
    "id": "doc_vault",
    "title": VAULT_SECRETS[0],
    "members": [{"actorId": "user_owner", "role": "owner"}],
    "blocks": [
        {"id": f"v_{n}", "type": "paragraph", "text": secret} for n, secret in enumerate(VAULT_SECRETS[1:], 1)
    ],
}


@pytest.fixture(params=STORES)
def vault_db(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """The test workspace plus a restricted page of three blocks that only its owner may read."""
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    data["workspaces"][0]["pages"].append(VAULT)
    fixture = tmp_path / "vault.json"
    fixture.write_text(json.dumps(data), encoding="utf-8")
    return store_fixture(request, tmp_path, fixture)


@pytest.mark.parametrize("mode", MODES)
async def test_a_permitted_write_never_widens_who_may_read(vault_db: Path, mode: str) -> None:
    """The owner makes every tool's every example on the restricted page, for real (a copy, a move or
    an artifact of it included, whatever tools there are); then nobody else reads any of it through any
    read tool's any example, aimed at any page, nor through the resources."""
    vault = Target("ws_1", "doc_vault", ("v_1", "v_2", "v_3"))
    async with connect(vault_db, mode, actor="user_owner") as owner:
        for spec in (spec for spec in ALL_TOOLS if spec.permissions.refusal(Caller.OWNER) is None):
            for index, example in enumerate(spec.examples):
                envelope = await call_example(owner, spec, vault, f"vault-{index}", example=example)
                assert envelope["ok"], (spec.name, example, envelope["error"])
    pages = [vault, DOC_1, target("doc_secret"), target("doc_other")]
    seen: list[str] = []
    for actor in ("user_viewer", "user_commenter", "user_editor", "user_stranger", "nobody"):
        async with connect(vault_db, mode, actor=actor) as client:
            for spec in READS:
                for example in spec.examples:
                    for page in pages:
                        result = await client.call_tool(
                            spec.name, {**IDS, **arguments(spec, page, example=example)}
                        )
                        seen.append(result.model_dump_json())
            for secret in VAULT_SECRETS:
                found = await client.call_tool("mnote.page.search", {**IDS, "query": secret})
                seen.append(found.model_dump_json())
            seen.append((await client.list_resources()).model_dump_json())
    text = "\n".join(seen)
    for secret in VAULT_SECRETS:
        assert secret not in text, secret


@pytest.mark.parametrize("mode", MODES)
async def test_a_non_member_cannot_tell_missing_from_forbidden(db: Path, mode: str) -> None:
    async with connect(db, mode, actor="user_stranger") as client:
        existing = await call(client, "mnote.page.get", **page_args("doc_1"))
        missing = await call(client, "mnote.page.get", **page_args("doc_does_not_exist"))
        secret = await call(client, "mnote.page.get", **page_args("doc_secret"))
        no_ws = await call(client, "mnote.page.get", **page_args("doc_1", "ws_missing"))
    assert existing["error"] == missing["error"] == secret["error"]
    assert {k: v for k, v in no_ws["error"].items() if k != "details"} == {
        k: v for k, v in existing["error"].items() if k != "details"
    }


async def test_restricted_page_admits_only_its_members(db: Path) -> None:
    async with connect(db, actor="user_owner") as client:
        owner = await call(client, "mnote.page.get", **page_args("doc_secret"))
    async with connect(db, actor="user_editor") as client:
        editor = await call(client, "mnote.page.get", **page_args("doc_secret"))
    assert owner["ok"] and owner["result"]["title"] == "SECRET-TITLE-7f3a"
    assert editor["error"]["code"] == "mnote_tool_permission_denied"


@pytest.mark.parametrize("mode", MODES)
async def test_a_forbidden_pages_history_never_leaks(db: Path, mode: str) -> None:
    """The owner's writes to the restricted page are in its history; nobody else sees any of it."""
    marker = "run-SECRET-HISTORY-5e1f"
    async with connect(db, mode, actor="user_owner") as owner:
        wrote = await call(
            owner,
            "mnote.block.update",
            **write_args("k_secret", document_id="doc_secret", blockId="s_1", text="x", runId=marker),
        )
        own = await call(owner, "mnote.page.history", **page_args("doc_secret"))
    assert wrote["ok"] and [e["runId"] for e in own["result"]["entries"]] == [marker]
    seen: list[str] = []
    for actor in ("user_viewer", "user_editor", "user_stranger", "nobody"):
        async with connect(db, mode, actor=actor) as client:
            for arguments_ in (
                page_args("doc_secret"),
                page_args("doc_secret", filter={"runId": marker}),
                page_args("doc_1", filter={"runId": marker}),
            ):
                result = await client.call_tool("mnote.page.history", arguments_)
                seen.append(result.model_dump_json())
            undo = await client.call_tool(
                "mnote.page.revert", write_args("k_undo", document_id="doc_secret", undoRunId=marker)
            )
            assert undo.is_error
            seen.append(undo.model_dump_json())
    text = "\n".join(seen)
    for secret in (*SECRETS, marker, wrote["audit"]["commandId"]):
        assert secret not in text


@pytest.mark.parametrize("mode", MODES)
async def test_undoing_a_run_never_undoes_another_actors_writes(db: Path, mode: str) -> None:
    """A run is the caller's (actor, runId) (issue 26): two actors writing under one runId (clients
    choose run ids) each undo their own writes, never the other's."""
    async with connect(db, mode, actor="user_owner") as owner:
        theirs = await call(
            owner,
            "mnote.block.insert",
            **write_args("k_owner", blocks=[{"id": "owners", "type": "paragraph"}], runId="shared"),
        )
        assert theirs["ok"], theirs["error"]
    async with connect(db, mode, actor="user_editor") as editor:
        plan = await call(
            editor, "mnote.page.revert", **write_args("k_none", dry_run=True, undoRunId="shared")
        )
        mine = await call(
            editor,
            "mnote.block.insert",
            **write_args("k_editor", blocks=[{"id": "editors", "type": "paragraph"}], runId="shared"),
        )
        undo = await call(editor, "mnote.page.revert", **write_args("k_undo", undoRunId="shared"))
        page = await call(editor, "mnote.page.get", **page_args())
    # before the editor wrote under it, "shared" is a run of no write of theirs: nothing to undo (issue 30)
    assert plan["error"]["code"] == "mnote_tool_not_found", plan
    assert undo["ok"], undo["error"]
    assert undo["result"]["revertedRevisions"] == [mine["result"]["revision"]]
    assert undo["result"]["blockIds"] == ["editors"]
    ids = [block["id"] for block in page["result"]["blocks"]]
    assert "owners" in ids and "editors" not in ids
    async with connect(db, mode, actor="user_owner") as owner:
        own = await call(owner, "mnote.page.revert", **write_args("k_undo_owner", undoRunId="shared"))
    assert own["ok"] and own["result"]["revertedRevisions"] == [theirs["result"]["revision"]]
