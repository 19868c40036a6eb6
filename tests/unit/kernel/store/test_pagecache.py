"""The page cache (`kernel/store/pagecache.py`): a whole-page read is answered from the tree kept for
that very revision of the page, and that never changes what a reader sees or who may see it.

Every test compares with what the store reads without a cache, or checks a refusal, after the cache
was filled: writes through the tools, writes by another store on the same database (another process
or replica), permissions that change without a new revision, and answers a caller changes.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnote_mcp.kernel.blocks import Block, Props
from mnote_mcp.kernel.databases.stores import open_store
from mnote_mcp.kernel.errors import ErrorCode, MnoteError
from mnote_mcp.kernel.port import Command, Correlation, PageQuery, PageView
from mnote_mcp.kernel.store import rows
from mnote_mcp.kernel.store.pagecache import PageCache
from tests.support.helpers import FIXTURE, SECRETS, call, connect, page_args, seeded_store, write_args
from tests.support.postgres import STORES, store_fixture

pytestmark = pytest.mark.anyio
IDS = Correlation("sess_t", "run_t", "call_t", "trace_t")


@pytest.fixture(params=STORES)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    return store_fixture(request, tmp_path, FIXTURE)


def _query(actor: str = "user_editor", document: str = "doc_1", **extra: Any) -> PageQuery:
    return PageQuery(workspace_id="ws_1", document_id=document, actor_id=actor, correlation=IDS, **extra)


def _uncached(db: Path | str, query: PageQuery) -> PageView:
    """What a store without a cache reads now."""
    store = open_store(db)
    store.page_cache = PageCache(0)
    try:
        return store.get_page(query)
    finally:
        store.close()


WRITES: list[tuple[str, dict[str, Any]]] = [
    ("mnote.page.save", {"content": [{"type": "paragraph", "text": "appended"}], "mode": "append"}),
    (
        "mnote.page.save",
        {
            "content": [
                {"type": "bulleted_list", "text": "a list", "children": [{"type": "todo", "text": "an item"}]}
            ],
            "mode": "append",
        },
    ),
    ("mnote.block.update", {"blockId": "p_1", "text": "First, edited."}),
    ("mnote.block.update", {"blockId": "heading_1", "props": {"level": 2}}),
    ("mnote.block.move", {"blockId": "p_2", "afterBlockId": "heading_1"}),
    ("mnote.block.delete", {"blockIds": ["p_1"]}),
    ("mnote.page.update_title", {"title": "Renamed"}),
    ("mnote.page.update_options", {"options": {"smallText": True}}),
    ("mnote.page.save", {"content": [{"id": "heading_1", "type": "heading", "text": "Only"}]}),
]


async def test_every_write_is_seen_by_the_next_read(db: Path | str) -> None:
    async with connect(db) as client:
        for n, (tool, args) in enumerate(WRITES):
            before = await call(client, "mnote.page.get", **page_args())
            again = await call(client, "mnote.page.get", **page_args())
            assert again["result"] == before["result"], "a repeated read answers the same"
            written = await call(client, tool, **write_args(f"k{n}", **args))
            assert written["ok"], written["error"]
            after = await call(client, "mnote.page.get", **page_args())
            assert after["result"]["revision"] == written["result"]["revision"]
            assert after["result"] == _uncached(db, _query()), f"after {tool}"
        # history and revert make revisions too
        reverted = await call(client, "mnote.page.revert", **write_args("k_revert", toRevision=2))
        assert reverted["ok"], reverted["error"]
        after = await call(client, "mnote.page.get", **page_args())
        assert after["result"] == _uncached(db, _query())
        markdown = await call(client, "mnote.page.get", **page_args(format="markdown"))
        assert markdown["result"] == _uncached(db, _query(format="markdown"))


async def test_a_write_by_another_store_on_the_same_database_is_seen(db: Path | str) -> None:
    """Another process (SQLite) or replica (PostgreSQL) writes: the revision read with the
    permissions is the page's current one, so the kept tree is not used."""
    async with connect(db) as client:
        first = await call(client, "mnote.page.get", **page_args())
        other = open_store(db)
        try:
            outcome = other.execute(
                Command(
                    "page.body.save",
                    "ws_1",
                    "doc_1",
                    "user_editor",
                    IDS,
                    "k_other",
                    False,
                    {"content": [{"type": "paragraph", "text": "from elsewhere"}], "mode": "append"},
                )
            )
        finally:
            other.close()
        after = await call(client, "mnote.page.get", **page_args())
    assert after["result"]["revision"] == outcome.revision == first["result"]["revision"] + 1
    assert after["result"]["blocks"][-1]["text"] == "from elsewhere"
    assert after["result"] == _uncached(db, _query())


async def test_permissions_are_checked_on_every_read_of_a_kept_page(db: Path | str) -> None:
    store = open_store(db)
    try:
        secret = store.get_page(_query("user_owner", "doc_secret"))
        assert secret["blocks"][0]["text"] == SECRETS[1]
        assert len(store.page_cache) == 1, "the owner's read was kept"
        for actor in ("user_editor", "user_viewer", "user_stranger", ""):
            with pytest.raises(MnoteError) as refused:
                store.get_page(_query(actor, "doc_secret"))
            assert refused.value.code in (ErrorCode.PERMISSION_DENIED, ErrorCode.UNAUTHENTICATED)
            assert not any(text in str(refused.value.details) for text in SECRETS)
    finally:
        store.close()


def test_a_membership_removed_without_a_new_revision_is_refused(tmp_path: Path) -> None:
    """Access rows change without a page revision: the kept tree must not answer for them."""
    path = seeded_store(tmp_path / "mnote.db")
    store = open_store(path)
    try:
        assert store.get_page(_query("user_viewer"))["title"] == "Project plan"
        assert len(store.page_cache) == 1
        with sqlite3.connect(path) as conn:
            conn.execute("DELETE FROM members WHERE workspace_id = 'ws_1' AND actor_id = 'user_viewer'")
        with pytest.raises(MnoteError) as refused:
            store.get_page(_query("user_viewer"))
        assert refused.value.code is ErrorCode.PERMISSION_DENIED
        assert store.get_page(_query("user_editor"))["title"] == "Project plan"
    finally:
        store.close()


def test_a_repeated_read_skips_the_tree_query_and_a_write_does_not(
    db: Path | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[str] = []
    real = rows.read_tree

    def counted(conn: Any, workspace_id: str, page_id: str) -> Any:
        reads.append(page_id)
        return real(conn, workspace_id, page_id)

    monkeypatch.setattr(rows, "read_tree", counted)
    store = open_store(db)
    try:
        first = store.get_page(_query())
        for actor in ("user_editor", "user_viewer", "user_owner"):
            assert store.get_page(_query(actor)) == first
        assert reads == ["doc_1"]
        store.execute(
            Command(
                "page.block.update",
                "ws_1",
                "doc_1",
                "user_editor",
                IDS,
                "k1",
                False,
                {"blockId": "p_1", "text": "changed"},
            )
        )
        changed = store.get_page(_query())
        assert changed["revision"] == first["revision"] + 1
        assert changed["blocks"][1]["text"] == "changed"
        assert reads == ["doc_1", "doc_1"]
    finally:
        store.close()


def test_a_caller_changing_its_answer_changes_no_later_answer(db: Path | str) -> None:
    store = open_store(db)
    try:
        first = store.get_page(_query())
        expected = _uncached(db, _query())
        assert first == expected
        for answer in (first, store.get_page(_query())):
            answer["blocks"][0]["text"] = "mutated"
            answer["blocks"][0]["props"]["level"] = 9
            answer["blocks"].append({"id": "x", "type": "paragraph", "text": "x"})
            answer["pageOptions"]["wideLayout"] = False
        assert store.get_page(_query()) == expected
    finally:
        store.close()


def test_the_cache_is_bounded_and_keeps_one_revision_per_page() -> None:
    cache = PageCache(4_000)
    tree: list[Block] = [{"id": "b", "type": "paragraph", "text": "x" * 200}]
    for n in range(40):
        cache.put("ws", f"p{n}", (1, 1, 200), tree, "x")
        assert cache.used <= cache.max_bytes
    assert 0 < len(cache) < 40
    assert cache.get("ws", "p39", (1, 1, 200)) == (tree, "x"), "the most recent is kept"
    assert cache.get("ws", "p0", (1, 1, 200)) is None, "the oldest went first"
    cache.put("ws", "p39", (2, 1, 200), tree, "x")
    assert cache.get("ws", "p39", (1, 1, 200)) is None, "a new revision replaces the old"
    big: list[Block] = [{"id": "b", "type": "paragraph", "text": "x" * 1_500}]
    cache.put("ws", "big", (1, 1, 1_500), big, "")
    assert cache.get("ws", "big", (1, 1, 1_500)) is None, "a page over a quarter of the cache is not kept"
    off = PageCache(0)
    off.put("ws", "p", (1, 1, 1), tree, "")
    assert len(off) == 0


def test_a_tree_that_does_not_come_back_from_its_json_is_not_kept() -> None:
    cache = PageCache()
    for odd in ({"n": float("nan")}, {"n": float("inf")}, {"n": 2**70}, {1: "not a string key"}):
        props = cast(Props, odd)  # not what a block holds: what the cache must refuse to keep
        cache.put("ws", "p", (1, 1, 1), [{"id": "b", "type": "paragraph", "text": "", "props": props}], "")
        assert cache.get("ws", "p", (1, 1, 1)) is None, odd


_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
_BLOCK = st.fixed_dictionaries({"type": st.just("paragraph"), "text": _TEXT})


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    bodies=st.lists(st.lists(_BLOCK, min_size=1, max_size=6), min_size=1, max_size=4),
    level=st.integers(1, 3),
)
def test_cached_reads_equal_uncached_reads_across_writes(
    tmp_path_factory: pytest.TempPathFactory, bodies: list[list[dict[str, Any]]], level: int
) -> None:
    path = seeded_store(tmp_path_factory.mktemp("cache") / "mnote.db")
    cached, plain = open_store(path), open_store(path)
    plain.page_cache = PageCache(0)
    try:
        for n, body in enumerate(bodies):
            assert cached.get_page(_query()) == plain.get_page(_query())
            content = [{**body[0], "type": "heading", "props": {"level": level}}, *body[1:]]
            outcome = plain.execute(
                Command(
                    "page.body.save",
                    "ws_1",
                    "doc_1",
                    "user_editor",
                    IDS,
                    f"k{n}",
                    False,
                    {"content": content, "mode": "append" if n % 2 else "replace"},
                )
            )
            got = cached.get_page(_query())
            assert got["revision"] == outcome.revision
            assert got == plain.get_page(_query())
            assert cached.get_page(_query(include_body=False)) == plain.get_page(_query(include_body=False))
    finally:
        cached.close()
        plain.close()
