"""The page prompts (`surface/prompts/handlers.py`, declared in `surface/prompts/catalog.py`) through the SDK client in
both protocol eras: listed and rendered in zh-CN and en, attaching only what the caller may read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mnote_mcp.surface.prompts.catalog import PROMPTS
from mnote_mcp.tools.toolsets import Toolset
from mnote_mcp.vocabulary.scopes import Scope
from tests.support.helpers import (
    FIXTURE,
    MODES,
    SECRETS,
    call,
    connect,
    list_page,
    store_with_pages,
    write_args,
)

pytestmark = pytest.mark.anyio

PAGE = {"workspaceId": "ws_1", "documentId": "doc_1"}


async def _text(client: Client, name: str, arguments: dict[str, str]) -> tuple[str, list[Any]]:
    got = await client.get_prompt(name, arguments)
    first, *rest = got.messages
    assert all(message.role == "user" for message in got.messages)
    assert isinstance(first.content, types.TextContent)
    return first.content.text, [message.content for message in rest]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("locale", "titles"),
    [
        ("zh-CN", ["总结页面", "查看一次运行改了什么", "整理页面"]),
        ("en", ["Summarise a page", "Review what a run changed", "Tidy a page"]),
    ],
)
async def test_the_prompts_are_listed_in_the_session_locale(
    db: Path, mode: str, locale: str, titles: list[str]
) -> None:
    async with connect(db, mode, locale=locale) as client:
        listed = (await client.list_prompts()).prompts
    assert [prompt.name for prompt in listed] == ["summarise_page", "review_run", "tidy_page"]
    assert [prompt.title for prompt in listed] == titles
    assert [[a.name for a in p.arguments or []] for p in listed] == [
        ["workspaceId", "documentId"],
        ["workspaceId", "documentId", "runId"],
        ["workspaceId", "documentId"],
    ]
    assert all(a.required and a.description for p in listed for a in p.arguments or [])
    assert all(spec.title[locale] == p.title for spec, p in zip(PROMPTS, listed, strict=True))  # type: ignore[index]


@pytest.mark.parametrize("mode", MODES)
async def test_summarise_and_tidy_attach_the_page_as_resources_read_gives_it(db: Path, mode: str) -> None:
    async with connect(db, mode, locale="en") as client:
        read = await client.read_resource("mnote://workspaces/ws_1/pages/doc_1")
        summarise, (page,) = await _text(client, "summarise_page", PAGE)
        tidy, (same,) = await _text(client, "tidy_page", PAGE)
    assert summarise.startswith(
        "Summarise the mnote page “Project plan” (workspaceId ws_1, documentId doc_1)"
    )
    assert "mnote.artifact.create_summary" in summarise
    assert "revision 1" in tidy and "mnote.block.update" in tidy
    for attached in (page, same):
        assert isinstance(attached, types.EmbeddedResource)
        assert attached.resource.uri == "mnote://workspaces/ws_1/pages/doc_1"
        assert attached.resource == read.contents[0]


async def test_the_prompt_text_is_chinese_by_default(db: Path) -> None:
    async with connect(db, locale="zh-CN") as client:
        text, _ = await _text(client, "summarise_page", PAGE)
    assert text.startswith(
        "请总结 mnote 页面《Project plan》（workspaceId ws_1，documentId doc_1），页面的 Markdown 附在下面。"
    )


@pytest.mark.parametrize("mode", MODES)
async def test_review_run_attaches_that_run_and_no_other(db: Path, mode: str) -> None:
    async with connect(db, mode, locale="en", confirm="never") as client:
        for number, run in enumerate(("run_a", "run_b", "run_a")):
            block = {"type": "paragraph", "text": f"by {run}"}
            args = {**write_args(f"insert-{number}", blocks=[block]), "runId": run}
            assert (await call(client, "mnote.block.insert", **args))["ok"]
        text, (entries,) = await _text(client, "review_run", {**PAGE, "runId": "run_a"})
        nothing, (empty,) = await _text(client, "review_run", {**PAGE, "runId": "run_nobody"})
    assert "run run_a" in text and "undoRunId run_a" in text and "now at revision 4" in text
    assert isinstance(entries, types.TextContent)
    written = json.loads(entries.text)["entries"]
    assert [(e["runId"], e["revision"]) for e in written] == [("run_a", 4), ("run_a", 2)]
    assert isinstance(empty, types.TextContent) and json.loads(empty.text) == {"entries": []}
    assert "run run_nobody" in nothing


async def test_a_page_too_long_to_attach_is_attached_in_part_with_how_to_read_the_rest(
    tmp_path: Path,
) -> None:
    """Issue 30: within the budget, the prompt's own text whole; of the page its first piece, and a
    line naming the next piece's resource URI and the cursor mnote.page.get reads it with."""
    db = store_with_pages(tmp_path / "long.db", FIXTURE, list_page("doc_long", 200))
    async with connect(db, locale="en", max_result_chars=4_000) as client:
        got = await client.get_prompt("tidy_page", {"workspaceId": "ws_1", "documentId": "doc_long"})
        (_, (page, note)) = await _text(
            client, "tidy_page", {"workspaceId": "ws_1", "documentId": "doc_long"}
        )
        assert isinstance(note, types.TextContent)
        cursor = note.text.split('cursor "', 1)[1].split('"', 1)[0]
        rest = await call(
            client,
            "mnote.page.get",
            workspaceId="ws_1",
            documentId="doc_long",
            format="markdown",
            cursor=cursor,
        )
    assert (
        len(json.dumps(got.model_dump(by_alias=True, mode="json", exclude_unset=True), ensure_ascii=False))
        <= 4_000
    )
    assert (
        isinstance(page, types.EmbeddedResource)
        and page.resource.uri == "mnote://workspaces/ws_1/pages/doc_long"
    )
    assert isinstance(page.resource, types.TextResourceContents)
    assert (
        page.resource.text.startswith('---\ntitle: "400 blocks"') and "<!-- l00000 -->" in page.resource.text
    )
    assert "resources/read mnote://workspaces/ws_1/pages/doc_long?cursor=" in note.text
    assert rest["ok"] and rest["result"]["markdown"].startswith("- item ")


async def test_a_long_run_is_attached_newest_first_within_the_budget(db: Path) -> None:
    """Issue 30: 42,151 characters at a budget of 40,000 (the entries were cut to the budget, the
    prompt around them was not); now the newest writes that fit and a line naming the rest."""
    async with connect(db, locale="en", confirm="never", max_result_chars=4_000) as client:
        for number in range(12):
            blocks = [{"type": "paragraph", "text": f"write {number}, block {n}"} for n in range(6)]
            args = {**write_args(f"insert-{number}", blocks=blocks), "runId": "run_long"}
            assert (await call(client, "mnote.block.insert", **args))["ok"]
        got = await client.get_prompt("review_run", {**PAGE, "runId": "run_long"})
    assert (
        len(json.dumps(got.model_dump(by_alias=True, mode="json", exclude_unset=True), ensure_ascii=False))
        <= 4_000
    )
    _, entries, note = (message.content for message in got.messages)
    assert isinstance(entries, types.TextContent) and isinstance(note, types.TextContent)
    revisions = [entry["revision"] for entry in json.loads(entries.text)["entries"]]
    assert revisions and revisions == list(range(13, 13 - len(revisions), -1)), "the newest, in order"
    assert "filter.runId run_long" in note.text


@pytest.mark.parametrize(
    "page",
    [
        {"workspaceId": "ws_1", "documentId": "doc_secret"},  # restricted: user_editor is not listed
        {"workspaceId": "ws_other", "documentId": "doc_other"},  # another workspace
        {"workspaceId": "ws_1", "documentId": "doc_missing"},
    ],
)
async def test_a_page_the_caller_cannot_read_is_an_unknown_page(db: Path, page: dict[str, str]) -> None:
    async with connect(db, locale="en") as client:
        for name in ("summarise_page", "tidy_page", "review_run"):
            with pytest.raises(MCPError) as refused:
                await client.get_prompt(name, {**page, "runId": "run_t"})
            message = str(refused.value)
            assert (
                message
                == f"Unknown page or not readable: mnote://workspaces/{page['workspaceId']}/pages/{page['documentId']}"
            )
            assert not any(secret in message for secret in SECRETS)


async def test_bad_prompt_calls_are_refused(db: Path) -> None:
    async with connect(db, locale="en") as client:
        with pytest.raises(MCPError, match="Unknown prompt: nope"):
            await client.get_prompt("nope", PAGE)
        with pytest.raises(MCPError, match="Missing argument: runId"):
            await client.get_prompt("review_run", PAGE)
        with pytest.raises(MCPError, match="longer than 256 characters"):
            await client.get_prompt("summarise_page", {**PAGE, "documentId": "d" * 257})


@pytest.mark.parametrize(
    ("config", "names"),
    [
        ({"read_only": True}, []),
        ({"scopes": frozenset({Scope.PAGE_READ})}, []),
        ({"toolsets": frozenset({Toolset.PAGE, Toolset.ARTIFACT})}, ["summarise_page"]),
        ({"toolsets": frozenset({Toolset.BLOCK})}, ["tidy_page"]),
        ({"actor": None}, ["summarise_page", "review_run", "tidy_page"]),
    ],
)
async def test_a_prompt_is_listed_only_where_its_tools_are(
    db: Path, config: dict[str, Any], names: list[str]
) -> None:
    async with connect(db, locale="en", **config) as client:
        assert [p.name for p in (await client.list_prompts()).prompts] == names
        if not names:
            with pytest.raises(MCPError, match="Unknown prompt"):
                await client.get_prompt("summarise_page", PAGE)


async def test_tool_names_in_a_prompt_are_spelled_as_advertised(db: Path) -> None:
    async with connect(db, locale="en", tool_names="underscore") as client:
        text, _ = await _text(client, "review_run", {**PAGE, "runId": "run_t"})
    assert "mnote_page_revert" in text and "mnote.page" not in text
