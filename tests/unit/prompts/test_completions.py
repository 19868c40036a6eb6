"""`completion/complete` (`prompts/completions.py`) through the SDK client in both eras: workspaces and
pages by prefix (Chinese included) for the prompts' and the page template's arguments, and a canary:
a page the caller cannot read never completes, whatever is typed."""

from __future__ import annotations

from pathlib import Path

import mcp.types as types
import pytest
from mcp import Client

from mnote_mcp.resources.uris import PAGE_URI_TEMPLATE
from tests.support.helpers import FIXTURE, MODES, SECRETS, connect, store_with_pages

pytestmark = pytest.mark.anyio

PROMPT = types.PromptReference(type="ref/prompt", name="summarise_page")
TEMPLATE = types.ResourceTemplateReference(type="ref/resource", uri=PAGE_URI_TEMPLATE)
CHINESE = {
    "id": "doc_zh",
    "title": "项目计划书",
    "blocks": [{"id": "zh_1", "type": "paragraph", "text": "正文"}],
}


async def _complete(
    client: Client,
    ref: types.PromptReference | types.ResourceTemplateReference,
    name: str,
    value: str,
    context: dict[str, str] | None = None,
) -> types.Completion:
    return (await client.complete(ref, {"name": name, "value": value}, context)).completion


@pytest.mark.parametrize("mode", MODES)
async def test_pages_and_workspaces_complete_by_prefix(tmp_path: Path, mode: str) -> None:
    db = store_with_pages(tmp_path / "zh.db", FIXTURE, CHINESE)
    async with connect(db, mode) as client:
        by_title = await _complete(client, PROMPT, "documentId", "proj", {"workspaceId": "ws_1"})
        chinese = await _complete(client, TEMPLATE, "documentId", "项目")
        by_id = await _complete(client, PROMPT, "documentId", "doc_")
        workspaces = await _complete(client, TEMPLATE, "workspaceId", "")
        elsewhere = await _complete(client, PROMPT, "documentId", "Proj", {"workspaceId": "ws_nope"})
    assert by_title.values == ["doc_1"] and chinese.values == ["doc_zh"]
    assert sorted(by_id.values) == ["doc_1", "doc_zh"]
    assert workspaces.values == ["ws_1"], "only the workspaces the caller reads in"
    assert elsewhere.values == []


async def test_at_most_max_completions_come_back(tmp_path: Path) -> None:
    pages = [{"id": f"doc_{n:02d}", "title": f"Page {n}", "blocks": []} for n in range(5)]
    db = store_with_pages(tmp_path / "many.db", FIXTURE, *pages)
    async with connect(db, max_completions=2) as client:
        got = await _complete(client, PROMPT, "documentId", "page")
    assert len(got.values) == 2 and got.has_more is True


@pytest.mark.parametrize("mode", MODES)
async def test_a_page_the_caller_cannot_read_never_completes(db: Path, mode: str) -> None:
    """Canary titles and ids in a restricted page and another workspace's: every prefix of them is
    typed, for every argument, in every workspace context; none ever comes back."""
    canaries = [*SECRETS, "doc_secret", "doc_other", "ws_other", "OTHER-WORKSPACE-NAME"]
    seen: list[str] = []
    async with connect(db, mode) as client:
        for canary in canaries:
            for end in range(1, len(canary) + 1):
                for ref in (PROMPT, TEMPLATE):
                    for name in ("workspaceId", "documentId"):
                        for context in (None, {"workspaceId": "ws_1"}, {"workspaceId": "ws_other"}):
                            got = await _complete(client, ref, name, canary[:end], context)
                            seen += got.values
    assert set(seen) <= {"doc_1", "ws_1"}, "only what user_editor may read"
    assert not [value for value in seen if "secret" in value.lower() or "other" in value.lower()]
