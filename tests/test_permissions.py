"""The permission matrix: roles, a non-member, a read-only server and a narrowed scope, against every
tool; and no response, to anyone, ever shows a forbidden page's title or body."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import FIXTURE, MODES, SECRETS, call, connect, dump, page_args, write_args
from tests.postgres import STORES, store_fixture

pytestmark = pytest.mark.anyio


@pytest.fixture(params=STORES)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """Every test here runs on SQLite and on PostgreSQL (the MCP end-to-end slice on both stores)."""
    return store_fixture(request, tmp_path, FIXTURE)


TOOLS: dict[str, dict[str, Any]] = {
    "mnote.page.get": {},
    "mnote.page.save": {"content": [{"type": "paragraph", "text": "x"}], "mode": "append"},
    "mnote.page.update_title": {"title": "x"},
    "mnote.page.update_options": {"options": {"showToc": True}},
    "mnote.artifact.create_summary": {"summary": "x"},
    "mnote.artifact.create_ai_note": {"content": "x"},
    "mnote.block.insert": {"blocks": [{"type": "paragraph", "text": "x"}], "afterBlockId": "p_1"},
    "mnote.block.update": {"blockId": "p_1", "text": "x"},
    "mnote.block.delete": {"blockIds": ["p_2"]},
    "mnote.block.move": {"blockId": "heading_1", "position": "end"},
    "mnote.page.history": {},
    "mnote.page.revert": {"toRevision": 1},
}
READS = {"mnote.page.get", "mnote.page.history"}
ALL = set(TOOLS)
PAGE_WRITES = {"mnote.page.save", "mnote.page.update_title", "mnote.page.update_options"}
ARTIFACTS = {"mnote.artifact.create_summary", "mnote.artifact.create_ai_note"}

# row -> (server config, extra call arguments, tools allowed on doc_1)
MATRIX: dict[str, tuple[dict[str, Any], dict[str, Any], set[str]]] = {
    "viewer": ({"actor": "user_viewer"}, {}, READS),
    "commenter": ({"actor": "user_commenter"}, {}, {*READS, *ARTIFACTS}),
    "editor": ({"actor": "user_editor"}, {}, ALL),
    "owner": ({"actor": "user_owner"}, {}, ALL),
    "non-member": ({"actor": "user_stranger"}, {}, set()),
    "read-only server": ({"actor": "user_owner", "read_only": True}, {}, READS),
    "narrowed scope": ({"actor": "user_owner"}, {"capabilityScope": ["page.read"]}, READS),
    "artifact scope": ({"actor": "user_owner"}, {"capabilityScope": ["artifact.write"]}, ARTIFACTS),
}


def _arguments(tool: str, document_id: str, workspace_id: str, extra: dict[str, Any]) -> dict[str, Any]:
    if tool in READS:
        return page_args(document_id, workspace_id, **extra)
    return write_args(f"k_{tool}", document_id=document_id, workspaceId=workspace_id, **TOOLS[tool], **extra)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("row", sorted(MATRIX))
async def test_permission_matrix(db: Path, mode: str, row: str) -> None:
    config, extra, allowed = MATRIX[row]
    outcomes: dict[str, bool] = {}
    async with connect(db, mode, **config) as client:
        for tool in TOOLS:
            args = _arguments(tool, "doc_1", "ws_1", extra)
            args.pop("workspaceId", None)
            envelope = await call(client, tool, workspaceId="ws_1", **args)
            outcomes[tool] = envelope["ok"]
            if not envelope["ok"]:
                assert envelope["error"]["code"] == "mnote_tool_permission_denied", (
                    row,
                    tool,
                    envelope["error"],
                )
                assert envelope["result"] is None
    assert {tool for tool, ok in outcomes.items() if ok} == allowed, row


@pytest.mark.parametrize("mode", MODES)
async def test_forbidden_pages_never_leak(db: Path, mode: str) -> None:
    """Every actor, every tool, dry run or not, on every page it may not read: no secret anywhere."""
    seen: list[str] = []
    before = dump(db)
    targets = [("ws_1", "doc_secret"), ("ws_other", "doc_other"), ("ws_other", "doc_missing")]
    for actor in ("user_viewer", "user_commenter", "user_editor", "user_stranger", "nobody"):
        async with connect(db, mode, actor=actor, locale="zh-CN") as client:
            for workspace_id, document_id in targets:
                if actor == "user_stranger" and workspace_id == "ws_other":
                    continue  # the stranger owns ws_other
                for tool in TOOLS:
                    for dry_run in (False, True):
                        args = _arguments(tool, document_id, workspace_id, {})
                        if tool not in READS:
                            args["dryRun"] = dry_run
                        result = await client.call_tool(tool, args)
                        assert result.is_error, (actor, workspace_id, document_id, tool)
                        seen.append(result.model_dump_json())
            listing = await client.list_tools()
            seen.append(listing.model_dump_json())
    text = "\n".join(seen)
    for secret in (*SECRETS, "OTHER-WORKSPACE-NAME"):
        assert secret not in text
        assert json.dumps(secret)[1:-1] not in text
    assert dump(db) == before


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
            for arguments in (
                page_args("doc_secret"),
                page_args("doc_secret", filter={"runId": marker}),
                page_args("doc_1", filter={"runId": marker}),
            ):
                result = await client.call_tool("mnote.page.history", arguments)
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
    assert plan["ok"] and plan["result"]["changed"] is False and plan["result"]["revertedRevisions"] == []
    assert undo["ok"], undo["error"]
    assert undo["result"]["revertedRevisions"] == [mine["result"]["revision"]]
    assert undo["result"]["blockIds"] == ["editors"]
    ids = [block["id"] for block in page["result"]["blocks"]]
    assert "owners" in ids and "editors" not in ids
    async with connect(db, mode, actor="user_owner") as owner:
        own = await call(owner, "mnote.page.revert", **write_args("k_undo_owner", undoRunId="shared"))
    assert own["ok"] and own["result"]["revertedRevisions"] == [theirs["result"]["revision"]]
