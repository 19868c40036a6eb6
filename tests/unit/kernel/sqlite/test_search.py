"""The SQLite search index's memory (issue 30, the soak's creeping RSS): the chunk -> page cache
`Fts5Index.chunk_pages` is learnt as searches meet chunks, and edits make new chunks for as long as the
server runs (a block row's key is never reused), so a cache without a bound grows with every edited
page a search meets. It is bounded, and a search answers the same whatever it holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mnote_mcp.kernel.databases.stores import open_store
from mnote_mcp.kernel.port import Command, Correlation, SearchQuery
from mnote_mcp.kernel.sqlite import search as sqlite_search
from mnote_mcp.kernel.store.store import Store
from tests.support.helpers import FIXTURE, store_with_pages

WORDS = "needle in a haystack"
PAGES: list[dict[str, Any]] = [
    {"id": f"hay_{n}", "title": f"Hay {n}", "blocks": [{"id": f"h_{n}", "type": "paragraph", "text": WORDS}]}
    for n in range(6)
]
CALL = Correlation("s", "r", "c", "t")


def _search(store: Store) -> list[str]:
    found = store.search_pages(SearchQuery("user_editor", CALL, query="needle", limit=50))
    return [hit["documentId"] for hit in found["hits"]]


def _rewrite(store: Store, page: str, round_: int) -> None:
    """A new body for the page, its block under a new id: the row gets a new key, in a new chunk once
    the page's chunk is full."""
    content: list[dict[str, Any]] = [
        {"id": f"{page}_{round_}_{n}", "type": "paragraph", "text": f"{WORDS} {round_}"} for n in range(64)
    ]
    store.execute(
        Command(
            name="page.body.save",
            workspace_id="ws_1",
            document_id=page,
            actor_id="user_editor",
            correlation=CALL,
            idempotency_key=f"{page}-{round_}",
            dry_run=False,
            payload={"content": content, "mode": "replace"},
        )
    )


def test_the_chunk_cache_stays_within_its_bound_as_edits_make_new_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_search, "MAX_CHUNK_PAGES", 8, raising=False)
    store = open_store(store_with_pages(tmp_path / "hay.db", FIXTURE, *PAGES))
    try:
        first = _search(store)
        sizes = []
        for round_ in range(4):
            for page in PAGES:
                _rewrite(store, page["id"], round_)
            assert sorted(_search(store)) == sorted(first), "the same pages, whatever the cache holds"
            sizes.append(len(store.dialect.index.chunk_pages))  # type: ignore[attr-defined]
        chunks = store.dialect.dump().count('INSERT INTO "search_chunks"')
    finally:
        store.close()
    assert chunks > 8 * 4, "the edits made many more chunks than the bound"
    assert max(sizes) <= 8, sizes
