"""`mnote.page.search` (issue 13): listing and full-text search, Chinese first, through `mcp.Client` in
both protocol eras, and the index under it (same transaction, upgrades, tokens against a plain model).
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnote_mcp.kernel.databases.stores import open_store
from mnote_mcp.kernel.errors import ErrorCode, MnoteError
from mnote_mcp.kernel.port import Command, Correlation, SearchQuery
from mnote_mcp.kernel.search import SNIPPET_CHARS, fold, index_tokens, parse_query, query_tag, snippet
from mnote_mcp.kernel.sqlite.opening import open_kernel
from mnote_mcp.kernel.store.fixtures import load_fixture, read_fixture
from tests.support.helpers import FIXTURE, IDS, MODES, SECRETS, call, connect, store_with_pages, write_args
from tests.unit.kernel.sqlite.test_migrate import v1_store

pytestmark = pytest.mark.anyio
SEARCH = "mnote.page.search"
CORRELATION = Correlation("s", "r", "c", "t")

PAGES: list[dict[str, Any]] = [
    {
        "id": "doc_zh",
        "title": "周会纪要",
        "blocks": [
            {
                "id": "zh_1",
                "type": "paragraph",
                "text": "本周我们讨论了项目计划的进度，以及下个季度的预算安排。",
            },
            {"id": "zh_2", "type": "paragraph", "text": "风险：供应商交付可能延迟两周。"},
        ],
    },
    {
        "id": "doc_ja",
        "title": "議事録",
        "blocks": [{"id": "ja_1", "type": "paragraph", "text": "東京オフィスのミーティングは金曜日です。"}],
    },
    {
        "id": "doc_mixed",
        "title": "Release notes",
        "blocks": [
            {"id": "mx_1", "type": "paragraph", "text": "新版本支持 Markdown 导出和PDF打印。"},
            {"id": "mx_2", "type": "paragraph", "text": "The Exporter now streams large pages."},
        ],
    },
    {
        "id": "doc_budget_title",
        "title": "预算 2027",
        "blocks": [{"id": "bt_1", "type": "paragraph", "text": "见附件。"}],
    },
]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return store_with_pages(tmp_path / "search.db", FIXTURE, *PAGES)


async def search(client: Any, **arguments: Any) -> dict[str, Any]:
    envelope = await call(client, SEARCH, **ids(), **arguments)
    assert envelope["ok"], envelope
    result: dict[str, Any] = envelope["result"]
    return result


def ids(**extra: Any) -> dict[str, Any]:
    return {**IDS, **extra}


def docs(result: dict[str, Any]) -> list[str]:
    return [hit["documentId"] for hit in result["hits"]]


@pytest.mark.parametrize("mode", MODES)
async def test_chinese_japanese_mixed_and_latin_queries(store: Path, mode: str) -> None:
    async with connect(store, mode) as client:
        # a four-character phrase inside a longer sentence, with the match marked and its block named
        found = await search(client, query="项目计划")
        assert docs(found) == ["doc_zh"]
        (hit,) = found["hits"]
        assert hit["snippets"] == [
            {"blockId": "zh_1", "text": "本周我们讨论了**项目计划**的进度，以及下个季度的预算安排。"}
        ]
        assert set(hit) == {"workspaceId", "documentId", "title", "revision", "updatedAt", "snippets"}
        assert hit["workspaceId"] == "ws_1" and hit["title"] == "周会纪要" and hit["revision"] == 1
        # two characters, one character (also the last of a sentence), Japanese kana and kanji
        assert docs(await search(client, query="交付")) == ["doc_zh"]
        assert docs(await search(client, query="延")) == ["doc_zh"]
        assert docs(await search(client, query="季")) == ["doc_zh"]
        assert docs(await search(client, query="ミーティング")) == ["doc_ja"]
        assert docs(await search(client, query="金曜")) == ["doc_ja"]
        # mixed text: Chinese next to Latin words without spaces, Latin words inside Chinese text
        assert docs(await search(client, query="PDF打印")) == ["doc_mixed"]
        assert docs(await search(client, query="markdown 导出")) == ["doc_mixed"]
        # Latin: by word, by prefix (with *, or a bare word of 3 letters or more), case and width folded
        assert docs(await search(client, query="EXPORTER")) == ["doc_mixed"]
        assert docs(await search(client, query="ｅｘｐｏｒｔｅｒ")) == ["doc_mixed"]
        assert docs(await search(client, query="export")) == ["doc_mixed"]
        assert docs(await search(client, query="ex")) == [], "two letters match a whole word only"
        prefix = await search(client, query="export*")
        assert docs(prefix) == ["doc_mixed"]
        assert prefix["hits"][0]["snippets"] == [
            {"blockId": "mx_2", "text": "The **Exporter** now streams large pages."}
        ]
        # nothing found where nothing matches: not a substring of a word, not across blocks
        assert (await search(client, query="计划书")) == {"hits": []}
        assert (await search(client, query="xylophone")) == {"hits": []}
        assert (await search(client, query="项目 延迟")) == {"hits": []}, "all words in one block"


FORGIVING: list[dict[str, Any]] = [
    {
        "id": "doc_planning",  # three prefix matches: more rows than the exact page, still below it
        "title": "Roadmap",
        "blocks": [
            {"id": "pl_1", "type": "paragraph", "text": "Planning starts on Monday."},
            {"id": "pl_2", "type": "paragraph", "text": "The planner books the rooms; planning ends in May."},
            {"id": "pl_3", "type": "paragraph", "text": "Budget 2026: planned, not spent."},
        ],
    },
    {
        "id": "doc_plan",
        "title": "Notes",
        "blocks": [{"id": "pn_1", "type": "paragraph", "text": "Our plan: move the database first."}],
    },
    {
        "id": "doc_migration",
        "title": "数据库迁移",
        "blocks": [
            {"id": "mg_1", "type": "paragraph", "text": "The migration of 项目计划 runs overnight."},
            {"id": "mg_2", "type": "paragraph", "text": "多个项目的计划书。"},
        ],
    },
]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("mode", MODES)
async def test_a_bare_word_finds_the_words_it_begins_exact_matches_first(
    tmp_path: Path, request: pytest.FixtureRequest, mode: str, kind: str
) -> None:
    """Search that forgives (issue 22): `plan` finds "planning", `migrat` finds "migration"; pages
    where the word matches whole rank above pages matching only by prefix (doc_1's title is "Project
    plan"); a word under 3 characters, a number and CJK match as before; `plan*` still works, ranked
    by matching rows alone. Both stores give the same answers."""
    db = _stored(kind, tmp_path, request, *FORGIVING)
    async with connect(db, mode) as client:
        found = await search(client, query="plan")
        assert docs(found) == ["doc_1", "doc_plan", "doc_planning"], "exact (title first), then prefix"
        planning = found["hits"][2]["snippets"]
        assert planning == [
            {"blockId": "pl_1", "text": "**Planning** starts on Monday."},
            {"blockId": "pl_3", "text": "Budget 2026: **planned**, not spent."},
        ]
        assert docs(await search(client, query="plan*")) == ["doc_1", "doc_planning", "doc_plan"], "by rows"
        migration = await search(client, query="migrat")
        assert docs(migration) == ["doc_migration"]
        assert migration["hits"][0]["snippets"] == [
            {"blockId": "mg_1", "text": "The **migration** of 项目计划 runs overnight."}
        ]
        assert docs(await search(client, query="MIGRAT 项目")) == ["doc_migration"], "all in one block"
        assert docs(await search(client, query="planner rooms")) == ["doc_planning"]
        # under 3 characters: the whole word only; with a star, a prefix as before
        assert docs(await search(client, query="pl")) == []
        assert set(docs(await search(client, query="pl*"))) == {"doc_1", "doc_plan", "doc_planning"}
        # numbers match whole: 202 is not 2026
        assert docs(await search(client, query="202")) == []
        assert docs(await search(client, query="2026")) == ["doc_planning"]
        # CJK unchanged: a substring, never more
        assert docs(await search(client, query="项目计划")) == ["doc_migration"]
        assert docs(await search(client, query="计划书")) == ["doc_migration"]
        assert docs(await search(client, query="项目计划书")) == []
        # paging through a forgiving search keeps its order (the cursor carries the exact tier)
        seen: list[str] = []
        page = await search(client, query="plan", limit=1)
        while True:
            seen += docs(page)
            if "nextCursor" not in page:
                break
            page = await search(client, query="plan", limit=1, cursor=page["nextCursor"])
        assert seen == ["doc_1", "doc_plan", "doc_planning"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_title_match_ranks_above_body_matches(store: Path, mode: str) -> None:
    async with connect(store, mode) as client:
        found = await search(client, query="预算")
    assert docs(found) == ["doc_budget_title", "doc_zh"]
    assert "snippets" not in found["hits"][0], "the title is the hit's title; no block of it matches"
    assert found["hits"][1]["snippets"][0]["blockId"] == "zh_1"


async def test_more_matching_blocks_rank_higher(tmp_path: Path) -> None:
    pages = [
        {
            "id": f"rank_{n}",
            "title": f"page {n}",
            "blocks": [
                {"id": f"b{n}_{i}", "type": "paragraph", "text": "风险评估" if i < n else "其他"}
                for i in range(5)
            ],
        }
        for n in (1, 3, 2)
    ]
    db = store_with_pages(tmp_path / "rank.db", FIXTURE, *pages)
    async with connect(db) as client:
        assert docs(await search(client, query="风险")) == ["rank_3", "rank_2", "rank_1"]


@pytest.mark.parametrize("mode", MODES)
async def test_without_a_query_every_readable_page_most_recently_changed_first(
    store: Path, mode: str
) -> None:
    async with connect(store, mode) as client:
        before = docs(await search(client))
        assert sorted(before) == sorted(["doc_1", "doc_zh", "doc_ja", "doc_mixed", "doc_budget_title"])
        renamed = await call(
            client, "mnote.page.update_title", **write_args("t", document_id="doc_ja", title="議事録 2")
        )
        assert renamed["ok"], renamed
        after = await search(client)
        assert docs(after)[0] == "doc_ja" and after["hits"][0]["revision"] == 2
        assert after["hits"][0]["updatedAt"] >= after["hits"][1]["updatedAt"]
        assert sorted(docs(after)) == sorted(before)


@pytest.mark.parametrize("mode", MODES)
async def test_a_write_is_found_at_once_and_deleted_text_is_gone(store: Path, mode: str) -> None:
    async with connect(store, mode) as client:
        assert docs(await search(client, query="里程碑")) == []
        inserted = await call(
            client,
            "mnote.block.insert",
            **write_args(
                "ins",
                document_id="doc_ja",
                blocks=[{"id": "new_1", "type": "paragraph", "text": "第三个里程碑已完成"}],
            ),
        )
        assert inserted["ok"], inserted
        found = await search(client, query="里程碑")
        assert docs(found) == ["doc_ja"] and found["hits"][0]["snippets"][0]["blockId"] == "new_1"
        updated = await call(
            client,
            "mnote.block.update",
            **write_args("upd", document_id="doc_ja", blockId="new_1", text="milestone three"),
        )
        assert updated["ok"], updated
        assert docs(await search(client, query="里程碑")) == []
        assert docs(await search(client, query="milestone")) == ["doc_ja"]
        deleted = await call(
            client, "mnote.block.delete", **write_args("del", document_id="doc_ja", blockIds=["new_1"])
        )
        assert deleted["ok"], deleted
        assert docs(await search(client, query="milestone")) == []
        renamed = await call(
            client, "mnote.page.update_title", **write_args("ren", document_id="doc_ja", title="会议记录")
        )
        assert renamed["ok"], renamed
        assert docs(await search(client, query="会议记录")) == ["doc_ja"]
        assert docs(await search(client, query="議事録")) == []
        saved = await call(
            client,
            "mnote.page.save",
            **write_args("save", document_id="doc_ja", content=[{"type": "quote", "text": "全文替换"}]),
        )
        assert saved["ok"], saved
        assert docs(await search(client, query="全文")) == ["doc_ja"]
        assert docs(await search(client, query="金曜日")) == [], "the replaced blocks' text is gone"
        dry = await call(
            client,
            "mnote.page.save",
            **write_args(
                "dry", dry_run=True, document_id="doc_ja", content=[{"type": "paragraph", "text": "试运行"}]
            ),
        )
        assert dry["ok"], dry
        assert docs(await search(client, query="试运行")) == [], "a dry run indexes nothing"


async def test_the_index_is_written_in_the_writes_transaction(store: Path) -> None:
    """A hook that fails after the rows (and the index) are written rolls all of it back."""

    def fail(conn: Any, change: Any) -> None:
        raise RuntimeError("hook failed")

    kernel = open_kernel(store)
    try:
        before = kernel.store.dump()
        kernel.store.write_hooks.append(fail)
        command = Command(
            "page.block.insert",
            "ws_1",
            "doc_ja",
            "user_editor",
            CORRELATION,
            "k1",
            False,
            {"blocks": [{"type": "paragraph", "text": "回滚的文字"}]},
        )
        with pytest.raises(RuntimeError):
            kernel.store.execute(command)
        assert kernel.store.dump() == before
        query = SearchQuery("user_editor", CORRELATION, query="回滚")
        assert kernel.store.search_pages(query) == {"hits": []}
        kernel.store.write_hooks.clear()
        kernel.store.execute(command)
        assert [hit["documentId"] for hit in kernel.store.search_pages(query)["hits"]] == ["doc_ja"]
    finally:
        await kernel.aclose()


# -- permissions --------------------------------------------------------------------------------


def _no_canary(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False)
    for secret in SECRETS:
        assert secret.lower() not in text.lower(), secret


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("actor", ["user_editor", "user_viewer", "user_commenter"])
async def test_forbidden_pages_never_appear(store: Path, mode: str, actor: str) -> None:
    """Restricted pages and other workspaces' pages: no hit, no snippet, no count, whatever is asked."""
    queries = [
        None,
        "SECRET",
        "secret*",
        "TITLE",
        "BODY",
        "7f3a",
        "91c2",
        "OTHER",
        "beef",
        "c0de",
        "s*",
        "b*",
    ]
    async with connect(store, mode, actor=actor) as client:
        for query in queries:
            arguments = {"query": query} if query else {}
            for extra in ({}, {"workspaceId": "ws_1"}, {"limit": 1}):
                result = await search(client, **arguments, **extra)
                _no_canary(result)
                assert not {"doc_secret", "doc_other"} & set(docs(result))
                while "nextCursor" in result:
                    result = await search(client, **arguments, **extra, cursor=result["nextCursor"])
                    _no_canary(result)
        refused = await call(client, SEARCH, **ids(), query="SECRET", workspaceId="ws_other")
        missing = await call(client, SEARCH, **ids(), query="SECRET", workspaceId="ws_nowhere")
    assert refused["error"]["code"] == "mnote_tool_permission_denied"
    assert refused["error"] == {**missing["error"], "details": refused["error"]["details"]}
    assert refused["error"]["details"] == {"workspaceId": "ws_other"}
    _no_canary(refused)


async def test_the_page_members_and_the_owner_see_their_pages(store: Path) -> None:
    async with connect(store, actor="user_owner") as client:
        assert docs(await search(client, query="SECRET")) == ["doc_secret"]
    async with connect(store, actor="user_stranger") as client:
        assert docs(await search(client, query="OTHER")) == ["doc_other"]
        assert docs(await search(client)) == ["doc_other"]


async def test_search_needs_the_page_read_scope_and_a_login(store: Path) -> None:
    async with connect(store, actor="user_owner") as client:
        narrowed = await call(client, SEARCH, **ids(), query="plan", capabilityScope=["artifact.write"])
    assert narrowed["error"]["code"] == "mnote_tool_permission_denied"
    assert narrowed["error"]["details"] == {"scope": "page.read"}
    async with connect(store, actor="user_owner", scopes=frozenset()) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
    assert SEARCH not in listed


async def test_a_token_limited_to_workspaces_searches_only_those(store: Path) -> None:
    kernel = open_kernel(store)
    try:
        both = SearchQuery("user_owner", CORRELATION, query="plan", workspaces=("ws_1",))
        assert [hit["documentId"] for hit in (await kernel.search_pages(both))["hits"]] == ["doc_1"]
        limited = SearchQuery("user_owner", CORRELATION, query="plan", workspaces=("ws_other",))
        assert await kernel.search_pages(limited) == {"hits": []}
        named = SearchQuery("user_owner", CORRELATION, workspace_id="ws_1", workspaces=("ws_other",))
        with pytest.raises(Exception, match=r"not_member|permission"):
            await kernel.search_pages(named)
    finally:
        await kernel.aclose()


# -- paging, arguments ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_paging_loses_and_repeats_no_hit_across_writes(tmp_path: Path, mode: str) -> None:
    pages: list[dict[str, Any]] = [
        {
            "id": f"p{n:02}",
            "title": f"第{n}页",
            "blocks": [
                {"id": f"p{n}_{i}", "type": "paragraph", "text": "合同条款" if i < 1 + n % 4 else "无关内容"}
                for i in range(5)
            ],
        }
        for n in range(23)
    ]
    db = store_with_pages(tmp_path / "paging.db", FIXTURE, *pages)
    expected = {page["id"] for page in pages}
    async with connect(db, mode) as client:
        for query in ("合同", None):
            arguments = {"query": query} if query else {}
            seen: list[str] = []
            result = await search(client, limit=4, **arguments)
            step = 0
            while True:
                seen += docs(result)
                # between pages: a write to a page already returned and to one not yet (neither
                # changes how many of its blocks match), and a new match on a page that had none
                if query and "nextCursor" in result:
                    rest = sorted(expected - set(seen))
                    for document, key in ((seen[0], "a"), (rest[0], "b")):
                        edit = await call(
                            client,
                            "mnote.block.update",
                            **write_args(
                                f"w{step}{key}",
                                document_id=document,
                                blockId=f"p{int(document[1:])}_4",
                                text=f"无关 {step}",
                            ),
                        )
                        assert edit["ok"], edit
                    if step == 1:
                        new = [{"type": "paragraph", "text": "合同条款"}]
                        added = await call(client, "mnote.block.insert", **write_args("new", blocks=new))
                        assert added["ok"], added
                if "nextCursor" not in result:
                    break
                result = await search(client, limit=4, cursor=result["nextCursor"], **arguments)
                step += 1
            if query:
                assert len(seen) == len(set(seen)), "no hit repeated"
                assert expected <= set(seen) <= expected | {"doc_1"}, (
                    "no hit lost (doc_1 matches since step 1)"
                )
            else:
                assert len(seen) == len(set(seen)) and expected <= set(seen)


def _stored(kind: str, tmp_path: Path, request: pytest.FixtureRequest, *pages: dict[str, Any]) -> Path | str:
    """The fixture with these pages in its first workspace, in an SQLite file or a PostgreSQL database."""
    if kind == "sqlite":
        return store_with_pages(tmp_path / "stored.db", FIXTURE, *pages)
    url: str = request.getfixturevalue("pg_server").database()
    data = read_fixture(FIXTURE)
    data["workspaces"][0]["pages"] += list(pages)
    store = open_store(url)
    try:
        load_fixture(store, data)
    finally:
        store.close()
    return url


def _contract_pages(count: int) -> list[dict[str, Any]]:
    """Page n holds the phrase in n + 1 of its blocks: ranked q{count-1} first, q00 last."""
    return [
        {
            "id": f"q{n:02}",
            "title": f"第{n}份",
            "blocks": [
                {"id": f"q{n}_{i}", "type": "paragraph", "text": "合同条款" if i <= n else "其他"}
                for i in range(count)
            ],
        }
        for n in range(count)
    ]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("mode", MODES)
async def test_paging_keeps_the_first_pages_order_across_writes_that_reorder_hits(
    tmp_path: Path, request: pytest.FixtureRequest, mode: str, kind: str
) -> None:
    """Writes between two pages of results that move hits across the cursor: a hit already returned
    that falls below it, hits not returned yet that rise above it or stop matching, and (listing) a
    page not returned yet that becomes the most recently changed. Paging through returns every hit of
    the first page's moment exactly once, in that moment's order."""
    db = _stored(kind, tmp_path, request, *_contract_pages(12))

    async def save(client: Any, key: str, document: str, texts: list[str]) -> None:
        content = [{"type": "paragraph", "text": text} for text in texts]
        saved = await call(
            client, "mnote.page.save", **write_args(key, document_id=document, content=content)
        )
        assert saved["ok"], saved

    async with connect(db, mode) as client:
        for query in (None, "合同"):
            arguments = {"query": query} if query else {}
            whole = docs(await search(client, limit=50, **arguments))
            assert len(whole) >= 12
            tag = "q" if query else "l"
            seen: list[str] = []
            result = await search(client, limit=3, **arguments)
            step = 0
            while True:
                seen += docs(result)
                rest = [doc for doc in whole if doc not in seen]
                if step == 0 and rest:
                    # the best hit so far falls to one match; the last hit to come rises to the top
                    await save(client, f"{tag}0a", seen[0], ["合同"])
                    await save(client, f"{tag}0b", rest[-1], ["合同条款"] * 14)
                if step == 1 and len(rest) > 1:
                    # a hit to come stops matching; another is written twice
                    await save(client, f"{tag}1a", rest[-2], ["不相关"])
                    await save(client, f"{tag}1b", rest[0], ["合同"] * 3)
                    await save(client, f"{tag}1c", rest[0], ["合同"] * 13)
                if "nextCursor" not in result:
                    break
                result = await search(client, limit=3, cursor=result["nextCursor"], **arguments)
                step += 1
            assert seen == whole, f"{query}: no hit lost or repeated, the first page's order kept"
            after = docs(await search(client, limit=50, **arguments))
            assert after != whole, "the writes did reorder a new search"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("mode", MODES)
async def test_pages_written_meanwhile_never_bring_in_a_forbidden_page(
    tmp_path: Path, request: pytest.FixtureRequest, mode: str, kind: str
) -> None:
    """While an editor pages through results, the owner writes the restricted page (matching the
    query more than any other) and a stranger writes another workspace's page: the pages written
    meanwhile are ranked as they were, but never one the editor may not read, and a cursor forged
    to the oldest watermark brings none in either."""
    db = _stored(kind, tmp_path, request, *_contract_pages(4))
    secret = [{"type": "paragraph", "text": "合同条款 SECRET-BODY-91c2"}]
    async with (
        connect(db, mode) as editor,
        connect(db, mode, actor="user_owner") as owner,
        connect(db, mode, actor="user_stranger") as stranger,
    ):
        for query in ("合同", None):
            arguments: dict[str, Any] = {"query": query} if query else {}
            tag = "q" if query else "l"
            first = await call(
                owner, "mnote.block.insert", **write_args(f"{tag}0", document_id="doc_secret", blocks=secret)
            )
            assert first["ok"], first
            seen: list[str] = []
            result = await search(editor, limit=1, **arguments)
            cursors = []
            step = 0
            while True:
                _no_canary(result)
                seen += docs(result)
                if "nextCursor" not in result:
                    break
                cursors.append(result["nextCursor"])
                more = await call(
                    owner,
                    "mnote.block.insert",
                    **write_args(f"{tag}{step}s", document_id="doc_secret", blocks=secret * 3),
                )
                other = await call(
                    stranger,
                    "mnote.block.update",
                    **{
                        **write_args(f"{tag}{step}o", document_id="doc_other", blockId="o_1"),
                        "workspaceId": "ws_other",
                        "text": f"合同 OTHER-SECRET-BODY-beef {step}",
                    },
                )
                assert more["ok"] and other["ok"], (more, other)
                result = await search(editor, limit=1, cursor=result["nextCursor"], **arguments)
                step += 1
            assert len(seen) == len(set(seen)) and not {"doc_secret", "doc_other"} & set(seen)
            assert {f"q{n:02}" for n in range(4)} <= set(seen)
            # the same cursor with the oldest watermark there is: every write ever is "meanwhile"
            data = json.loads(base64.urlsafe_b64decode(cursors[0] + "=" * (-len(cursors[0]) % 4)))
            data["w"] = 0 if kind == "sqlite" else "1:1:"
            forged = base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")
            answer = await call(editor, SEARCH, **ids(), limit=50, cursor=forged, **arguments)
            _no_canary(answer)
            if answer["ok"]:
                assert not {"doc_secret", "doc_other"} & set(docs(answer["result"]))
            else:
                assert answer["error"]["details"]["pointer"] == "/cursor", answer


def _crafted(query: SearchQuery, after: list[Any], watermark: Any) -> str:
    """A cursor a client made up, with the right tag (the tag is no secret: nothing in a cursor is)."""
    raw = json.dumps({"a": after, "w": watermark, "q": query_tag(query)})
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


KEY_PARTS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=30),
    st.sampled_from(["9999-12-31T00:00:00.000Z", "ws_1", "ws_other", "doc_secret", "doc_other"]),
)


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    after=st.lists(KEY_PARTS, min_size=3, max_size=3),
    watermark=st.one_of(st.integers(min_value=-(2**70), max_value=2**70), st.text(max_size=40)),
    text=st.sampled_from([None, "SECRET", "s*", "OTHER", "plan"]),
)
def test_a_crafted_cursor_is_refused_or_harmless(
    store: Path, after: list[Any], watermark: Any, text: str | None
) -> None:
    """Cursor contents are the client's: any sort key and watermark, with a valid tag, is refused as
    `invalid_argument` at /cursor or answers readable pages only (never a restricted page or another
    workspace's, never an internal error)."""
    local = open_store(store)
    try:
        plain = SearchQuery("user_editor", CORRELATION, query=text, limit=5)
        crafted = replace(plain, cursor=_crafted(plain, after, watermark))
        refused: MnoteError | None = None
        try:
            found = local.search_pages(crafted)
        except MnoteError as error:
            refused = error
        if refused is not None:
            assert (refused.code, refused.details["pointer"]) == (ErrorCode.INVALID_ARGUMENT, "/cursor")
            return
        _no_canary(found)
        assert not {"doc_secret", "doc_other"} & {hit["documentId"] for hit in found["hits"]}
    finally:
        local.close()


def test_a_postgresql_watermark_is_checked_before_the_database_sees_it() -> None:
    from mnote_mcp.kernel.postgres.search import PG_CLOCK

    assert PG_CLOCK.valid("750:760:751,755") and PG_CLOCK.valid("750:750:")
    for bad in (
        "",
        "0:1:",
        "9:8:",
        "750:760:755,751",
        "750:760:749",
        "750:760:760",
        "1:2:1,1",
        "a:b:",
        "1:2:; DROP TABLE pages",
        f"1:{2**63}:",
        7,
        None,
        "1:2:" + ",".join(["1"] * 600),
    ):
        assert not PG_CLOCK.valid(bad), bad  # type: ignore[arg-type]


async def test_more_pages_written_meanwhile_than_a_cursor_reranks_restart_the_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mnote_mcp.kernel.sqlite import search as sqlite_search
    from mnote_mcp.kernel.store import search as store_search

    monkeypatch.setattr(sqlite_search, "MAX_CHANGED_PAGES", 2)  # the index's matches
    monkeypatch.setattr(store_search, "MAX_CHANGED_PAGES", 2)  # the listing
    db = store_with_pages(tmp_path / "many.db", FIXTURE, *_contract_pages(6))
    async with connect(db) as client:
        cases: list[dict[str, Any]] = [{"query": "合同"}, {}]
        for arguments in cases:
            first = await search(client, limit=2, **arguments)
            for n in range(3):
                edit = await call(
                    client,
                    "mnote.block.update",
                    **write_args(
                        f"m{n}{len(arguments)}",
                        document_id=f"q{n:02}",
                        blockId=f"q{n}_0",
                        text=f"合同 改 {len(arguments)}",
                    ),
                )
                assert edit["ok"], edit
            refused = await call(client, SEARCH, **ids(), limit=2, cursor=first["nextCursor"], **arguments)
            assert refused["error"]["code"] == "mnote_tool_invalid_argument", refused
            assert refused["error"]["details"]["pointer"] == "/cursor"
            assert "search again" in json.dumps(refused["error"], ensure_ascii=False)


@pytest.mark.parametrize("mode", MODES)
async def test_bad_arguments_are_refused_with_a_pointer(store: Path, mode: str) -> None:
    async with connect(store, mode) as client:
        first = await search(client, query="项目", limit=1)
        assert "nextCursor" not in first
        cases: list[tuple[dict[str, Any], str]] = [
            ({"query": "!!! ，。"}, "/query"),
            ({"query": "x" * 201}, "/query"),
            ({"query": " ".join(f"w{n}" for n in range(17))}, "/query"),
            ({"limit": 0}, "/limit"),
            ({"limit": 51}, "/limit"),
            ({"cursor": "not-a-cursor"}, "/cursor"),
        ]
        listing = await search(client, limit=1)
        cases.append(({"query": "项目", "cursor": listing["nextCursor"]}, "/cursor"))
        for arguments, pointer in cases:
            refused = await call(client, SEARCH, **ids(), **arguments)
            assert refused["error"]["code"] == "mnote_tool_invalid_argument", (arguments, refused)
            assert refused["error"]["details"]["pointer"] == pointer, (arguments, refused)


# -- the index under the tool ---------------------------------------------------------------------


async def test_an_old_store_is_indexed_on_upgrade(tmp_path: Path) -> None:
    db = v1_store(tmp_path / "v1.db", extra_pages=3, blocks_per_page=4)
    async with connect(db, actor="user_editor") as client:
        found = await search(client, query="line 3")
        assert {"bulk_0", "bulk_1", "bulk_2"} <= set(docs(found))
        assert set(docs(await search(client, query="bulk"))) == {"bulk_0", "bulk_1", "bulk_2"}, "titles too"
        written = await call(
            client,
            "mnote.block.insert",
            **write_args("up", document_id="bulk_1", blocks=[{"type": "paragraph", "text": "升级以后写的"}]),
        )
        assert written["ok"], written
        assert docs(await search(client, query="升级")) == ["bulk_1"]


def test_tokens_fold_case_and_width_and_cut_cjk_into_bigrams() -> None:
    assert index_tokens("ＡＢＣ Straße 项目计划") == "abc strasse 项目 目计 计划 划"
    assert index_tokens("ｶﾀｶﾅ") == "カタ タカ カナ ナ"
    assert index_tokens("a_b, c-d") == "a b c d"
    assert [s.fts() for s in parse_query("proj* 项目 计 ＡＢ")] == ['"proj"*', '"项目"', '"计"*', '"ab"']
    assert snippet("Hello World", parse_query("world")) == "Hello **World**"
    long = "前" * 300 + "目标" + "后" * 300
    cut = snippet(long, parse_query("目标"))
    assert cut is not None and cut.startswith("…") and cut.endswith("…") and "**目标**" in cut
    before, after = cut.strip("…").split("**目标**")
    assert len(before) + len(after) + 2 == SNIPPET_CHARS, "as long as allowed"
    assert abs(len(before) - len(after)) <= 1, "centred on the match"
    assert snippet("word " * 20 + "target", parse_query("target")) == ("word " * 20).strip() + " **target**"
    words = parse_query("plan pl 2026 plan*")
    assert [(s.text, s.prefix, s.loose) for s in words] == [
        ("plan", True, True),
        ("pl", False, False),
        ("2026", False, False),
        ("plan", True, False),
    ]
    assert [s.fts() for s in words] == ['"plan"*', '"pl"', '"2026"', '"plan"*']


CJK_ALPHABET = "项目计划风险预算会议ミーティングかな한국"
TEXTS = st.text(alphabet=CJK_ALPHABET + "ab ,。", min_size=0, max_size=30)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    texts=st.lists(TEXTS, min_size=1, max_size=6),
    needle=st.text(alphabet=CJK_ALPHABET, min_size=1, max_size=4),
)
def test_a_cjk_query_finds_exactly_the_blocks_holding_it(
    tmp_path: Path, texts: list[str], needle: str
) -> None:
    """Against a plain model: a block matches a CJK query iff its folded text holds the query."""
    path = tmp_path / f"model-{abs(hash((tuple(texts), needle)))}.db"
    store_with_pages(
        path,
        FIXTURE,
        *[
            {"id": f"m{n}", "title": "t", "blocks": [{"id": f"m{n}_1", "type": "paragraph", "text": text}]}
            for n, text in enumerate(texts)
        ],
    )
    store = open_store(path)
    try:
        found = store.search_pages(SearchQuery("user_editor", CORRELATION, query=needle, limit=50))
    finally:
        store.close()
    expected = {f"m{n}" for n, text in enumerate(texts) if fold(needle) in fold(text)}
    got = {hit["documentId"] for hit in found["hits"]}
    assert got == expected
    for hit in found["hits"]:
        assert re.search(r"\*\*.+\*\*", hit["snippets"][0]["text"])
