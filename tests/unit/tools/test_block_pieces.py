"""A block larger than `--max-result-chars` comes in pieces within it (`tools/blockpieces.py`), in
`mnote.page.get` (blocks and Markdown) and `resources/read` alike: every piece within the budget,
each saying where it is, and every piece sequence joining into exactly the page (tests/support/pieces.py,
the way docs/contract.md tells a host); the piece cursor refused when forged, stale, or another read's,
and never a way round the page's permissions (issue 30)."""

from __future__ import annotations

import base64
import json
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client, MCPError

from mnote_mcp.app import App
from mnote_mcp.kernel.port import Correlation, PageQuery
from mnote_mcp.tools.blockpieces import MAX_CURSOR_CHARS, PIECE_CURSOR_PREFIX
from mnote_mcp.vocabulary.identity import Identity
from tests.support.helpers import (
    FIXTURE,
    MODES,
    call,
    connect,
    make_app,
    page_args,
    store_with_pages,
    write_args,
)
from tests.support.pieces import join_blocks, join_markdown, resource_piece

pytestmark = pytest.mark.anyio

BUDGET = 4_000
EDITOR = Identity(actor_id="user_editor")
UNIT = 'plan 计划 "q" \\ 🙂👍🏽\n'
HUGE = {
    "id": "doc_huge",
    "title": "One huge block",
    "blocks": [
        {"id": "first", "type": "numbered_list", "text": "one"},
        {
            "id": "huge",
            "type": "numbered_list",
            "text": (UNIT * 4_000)[:60_000],
            "children": [
                {"id": "child_1", "type": "paragraph", "text": "c" * 9_000},
                {
                    "id": "child_2",
                    "type": "bulleted_list",
                    "text": "two",
                    "children": [
                        {"id": "grandchild", "type": "paragraph", "text": "中" * 5_000},
                    ],
                },
                {"id": "child_3", "type": "paragraph", "text": "three"},
            ],
        },
        {"id": "last", "type": "numbered_list", "text": "three"},
    ],
}
SECRET_HUGE = {
    "id": "doc_secret_huge",
    "title": "Restricted",
    "members": [{"actorId": "user_owner", "role": "owner"}],
    "blocks": [{"id": "s_huge", "type": "paragraph", "text": "s" * 20_000}],
}


def _compact(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


@pytest.fixture
def huge(tmp_path: Path) -> Path:
    return store_with_pages(tmp_path / "huge.db", FIXTURE, HUGE, SECRET_HUGE)


@asynccontextmanager
async def _app(db: Path, budget: int = BUDGET, **config: Any) -> AsyncIterator[App]:
    app = make_app(db, max_result_chars=budget, **config)
    try:
        yield app
    finally:
        await app.kernel.aclose()


async def _get(app: App, identity: Identity, document_id: str, **arguments: Any) -> dict[str, Any]:
    """The envelope of one `mnote.page.get` call, as JSON."""
    envelope: dict[str, Any] = dict(
        await app.dispatcher.call("mnote.page.get", page_args(document_id, **arguments), None, identity)
    )
    return envelope


async def _read_all(
    app: App, document_id: str, identity: Identity = EDITOR, budget: int = BUDGET, **arguments: Any
) -> list[dict[str, Any]]:
    """Every piece of a page read with `mnote.page.get`, each envelope checked against the budget."""
    results: list[dict[str, Any]] = []
    cursor = None
    while True:
        extra = {**arguments, **({"cursor": cursor} if cursor else {})}
        envelope = await _get(app, identity, document_id, **extra)
        assert envelope["ok"] is True, envelope["error"]
        assert _compact(envelope) <= budget
        result = dict(envelope["result"])
        codes = [warning["code"] for warning in result.get("warnings", [])]
        assert "result_oversized" not in codes
        if "blockPiece" in result:
            assert codes == ["result_block_piece"]
        results.append(result)
        cursor = result.get("nextCursor")
        if cursor is None:
            return results
        assert len(cursor) <= MAX_CURSOR_CHARS


async def _whole(app: App, document_id: str, fmt: str) -> Any:
    """The page's body as the kernel gives it in one answer, whatever the budget."""
    query = PageQuery("ws_1", document_id, "user_editor", Correlation("s", "r", "c", "t"), format=fmt)
    view = await app.kernel.get_page(query)
    return view["blocks"] if fmt == "blocks" else view["markdown"]


async def _read_resource(client: Client, document_id: str, budget: int = BUDGET) -> str:
    """A page read as a resource, every piece, joined as docs/contract.md says."""
    uri: str | None = f"mnote://workspaces/ws_1/pages/{document_id}"
    pieces: list[tuple[str, dict[str, Any] | None]] = []
    while uri is not None:
        read = await client.read_resource(uri)
        assert _compact(read.model_dump(by_alias=True, mode="json", exclude_unset=True)) <= budget
        text = read.contents[0].text  # type: ignore[union-attr]
        body, where, uri = resource_piece(text)
        pieces.append((body, where))
    return join_markdown(pieces)


async def test_a_block_larger_than_the_budget_comes_in_pieces_that_join_into_it(huge: Path) -> None:
    async with _app(huge) as app:
        results = await _read_all(app, "doc_huge")
        whole = await _whole(app, "doc_huge", "blocks")
    pieces = [result["blockPiece"] for result in results if "blockPiece" in result]
    texts = [piece for piece in pieces if piece.get("blockId") == "huge"]
    assert len(texts) > 15 and texts[0]["offset"] == 0 and {piece["length"] for piece in texts} == {60_000}
    assert [piece["blockId"] for piece in pieces if "blockId" in piece and piece["offset"] == 0] == [
        "huge",
        "child_1",
        "child_2",
        "grandchild",
    ], "a block's text first, its children in the pieces after; a child that fits comes whole"
    assert {"blockId": "grandchild", "parentId": "child_2", "offset": 0, "length": 5_000} in pieces
    assert join_blocks(results) == whole == HUGE["blocks"]


async def test_the_markdown_of_a_block_larger_than_the_budget_comes_in_pieces_too(huge: Path) -> None:
    async with _app(huge) as app:
        results = await _read_all(app, "doc_huge", format="markdown")
        whole = await _whole(app, "doc_huge", "markdown")
    pieces = [(result["markdown"], result.get("blockPiece")) for result in results]
    assert join_markdown(pieces) == whole
    within = [where for _, where in pieces if where is not None]
    assert within[0] == {"blockId": "huge", "offset": 0, "length": within[0]["length"]}
    assert "\n3. three <!-- last -->\n" in whole, "a numbered list goes on counting across pieces"


async def test_the_kernels_markdown_pieces_count_a_numbered_list_on(tmp_path: Path) -> None:
    """They started again at 1, so joined pieces were not the page's Markdown (issue 30)."""
    items = [{"id": f"n{index}", "type": "numbered_list", "text": f"item {index}"} for index in range(5)]
    db = store_with_pages(tmp_path / "n.db", FIXTURE, {"id": "doc_n", "title": "N", "blocks": items})
    async with _app(db) as app:
        results = await _read_all(app, "doc_n", format="markdown", maxBlocks=2)
        whole = await _whole(app, "doc_n", "markdown")
    assert len(results) == 3 and results[1]["markdown"].startswith("3. item 2")
    assert join_markdown([(result["markdown"], None) for result in results]) == whole


@pytest.mark.parametrize("mode", MODES)
async def test_a_resource_read_in_pieces_joins_into_the_page(huge: Path, mode: str) -> None:
    async with connect(huge, mode, max_result_chars=BUDGET) as client:
        joined = await _read_resource(client, "doc_huge")
        first = (await client.read_resource("mnote://workspaces/ws_1/pages/doc_huge?cursor=")).contents[0]
    async with _app(huge) as app:
        assert joined == await _whole(app, "doc_huge", "markdown")
    assert "\npiece: " not in first.text  # type: ignore[union-attr]  # whole blocks: not within one


async def test_a_piece_cursor_is_read_by_resources_and_the_tool_alike(huge: Path) -> None:
    """The same position: a prompt may point the model at either."""
    async with connect(huge, max_result_chars=BUDGET) as client:
        first = await call(client, "mnote.page.get", **page_args("doc_huge", format="markdown", maxBlocks=1))
        second = await call(
            client,
            "mnote.page.get",
            **page_args("doc_huge", format="markdown", cursor=first["result"]["nextCursor"]),
        )
        cursor = second["result"]["nextCursor"]
        assert cursor.startswith(PIECE_CURSOR_PREFIX)
        by_tool = await call(
            client, "mnote.page.get", **page_args("doc_huge", format="markdown", cursor=cursor)
        )
        read = await client.read_resource(f"mnote://workspaces/ws_1/pages/doc_huge?cursor={cursor}")
    body, where, _ = resource_piece(read.contents[0].text)  # type: ignore[union-attr]
    assert where is not None and where["offset"] == by_tool["result"]["blockPiece"]["offset"]
    assert body[:500] == by_tool["result"]["markdown"][:500]


async def _first_piece_cursor(
    app: App, document_id: str = "doc_huge", identity: Identity = EDITOR, **arguments: Any
) -> str:
    """The cursor to the second piece within the first block larger than the budget."""
    cursor = None
    while True:
        extra = {**arguments, **({"cursor": cursor} if cursor else {})}
        envelope = await _get(app, identity, document_id, **extra)
        assert envelope["ok"], envelope["error"]
        cursor = envelope["result"]["nextCursor"]
        if cursor.startswith(PIECE_CURSOR_PREFIX):
            return str(cursor)


async def test_a_page_changed_between_two_pieces_of_a_block_is_refused_like_a_stale_cursor(
    huge: Path,
) -> None:
    async with _app(huge) as app:
        cursor = await _first_piece_cursor(app)
        first_block = await _first_piece_cursor(app, blockIds=["huge"])  # no kernel cursor in it
        edit = write_args("edit", document_id="doc_huge", blockId="last", text="changed")
        assert (await app.dispatcher.call("mnote.block.update", edit, None, EDITOR))["ok"]
        stale = [
            await _get(app, EDITOR, "doc_huge", **extra)
            for extra in ({"cursor": cursor}, {"cursor": first_block, "blockIds": ["huge"]})
        ]
    for envelope in stale:
        assert envelope["ok"] is False
        assert envelope["error"]["code"] == "mnote_tool_conflict"
        assert "changed while it was read in pieces" in envelope["error"]["message"]


async def test_a_stale_piece_of_a_resource_says_to_read_the_page_again(huge: Path) -> None:
    async with connect(huge, max_result_chars=BUDGET) as client:
        uri: str | None = "mnote://workspaces/ws_1/pages/doc_huge"
        while uri is not None and "piece." not in uri:
            _, _, uri = resource_piece((await client.read_resource(uri)).contents[0].text)  # type: ignore[union-attr]
        assert uri is not None
        edit = write_args("edit", document_id="doc_huge", blockId="first", text="changed")
        assert (await call(client, "mnote.block.update", **edit))["ok"]
        with pytest.raises(MCPError, match="the page changed while it was read in pieces"):
            await client.read_resource(uri)


def _forged(payload: Any) -> str:
    raw = json.dumps(payload, separators=(",", ":")).encode()
    return PIECE_CURSOR_PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        PIECE_CURSOR_PREFIX,
        PIECE_CURSOR_PREFIX + "!!!",
        PIECE_CURSOR_PREFIX + "A" * (MAX_CURSOR_CHARS + 1),
        _forged({"not": "a list"}),
        _forged([1, None, 1, 0, 5, "0" * 16]),  # another read's tag
        _forged([2, None, 1, 0, 5, "0" * 16]),
        _forged([1, None, True, 0, 5, "0" * 16]),
        _forged([1, None, 1, -1, 5, "0" * 16]),
        _forged([1, "piece.x", 1, 0, 5, "0" * 16]),
        _forged([1, "k" * 600, 1, 0, 5, "0" * 16]),
        PIECE_CURSOR_PREFIX + base64.urlsafe_b64encode(b"[" * 300 + b"]" * 300).decode(),
    ],
)
async def test_a_forged_piece_cursor_is_refused_cleanly(huge: Path, cursor: str) -> None:
    async with _app(huge) as app:
        envelope = await _get(app, EDITOR, "doc_huge", cursor=cursor)
    assert envelope["ok"] is False
    assert envelope["error"]["code"] == "mnote_tool_invalid_argument"
    assert envelope["error"]["details"]["pointer"] == "/cursor"


async def test_a_piece_cursor_outside_its_block_or_of_another_read_is_refused(huge: Path) -> None:
    async with _app(huge) as app:
        cursor = await _first_piece_cursor(app)
        data = json.loads(base64.urlsafe_b64decode(cursor[len(PIECE_CURSOR_PREFIX) :] + "=" * 4))
        beyond = [_forged([*data[:3], 10_000, 0, data[5]]), _forged([*data[:3], 0, 60_000, data[5]])]
        answers = [await _get(app, EDITOR, "doc_huge", cursor=forged) for forged in beyond]
        answers += [
            await _get(app, EDITOR, "doc_huge", **extra)
            for extra in ({"cursor": cursor, "format": "markdown"}, {"cursor": cursor, "blockIds": ["huge"]})
        ]
        answers.append(await _get(app, EDITOR, "doc_1", cursor=cursor))
    for envelope in answers:
        assert envelope["ok"] is False
        assert envelope["error"]["code"] == "mnote_tool_invalid_argument", envelope["error"]


async def test_a_piece_cursor_reads_nothing_its_caller_may_not(huge: Path) -> None:
    """Each piece is read as its caller: another actor's cursor gets what a read without one gets."""
    async with _app(huge) as app:
        cursor = await _first_piece_cursor(app, "doc_secret_huge", Identity(actor_id="user_owner"))
        plain = await _get(app, EDITOR, "doc_secret_huge")
        with_cursor = await _get(app, EDITOR, "doc_secret_huge", cursor=cursor)
        stranger = await _get(app, Identity(actor_id="user_stranger"), "doc_secret_huge", cursor=cursor)
    assert plain["ok"] is False
    assert with_cursor["error"]["code"] == plain["error"]["code"]
    assert stranger["ok"] is False
    assert "SECRET" not in json.dumps(with_cursor) + json.dumps(stranger)
    assert "sssss" not in json.dumps(with_cursor) + json.dumps(stranger)


async def test_cjk_and_emoji_are_counted_as_characters_and_never_split(tmp_path: Path) -> None:
    text = ("中文字符" * 5_000) + ("🙂👍🏽🇨🇳" * 3_000)
    page = {"id": "doc_wide", "title": "Wide", "blocks": [{"id": "wide", "type": "paragraph", "text": text}]}
    db = store_with_pages(tmp_path / "wide.db", FIXTURE, page)
    async with _app(db) as app:
        results = await _read_all(app, "doc_wide")
    pieces = [result["blocks"][0]["text"] for result in results]
    assert "".join(pieces) == text
    assert all(piece.encode("utf-8").decode("utf-8") == piece for piece in pieces)
    cjk = [piece for piece in pieces if piece and piece[0] == "中"]
    assert len(cjk[0]) > 0.8 * (BUDGET - 1_000), "a CJK character is one character of the budget"


async def test_a_frame_that_fills_the_budget_still_reads_on_in_sizeable_pieces(tmp_path: Path) -> None:
    """A title of 500 control characters is 3,000 characters of JSON, its summary 1,200: the frame
    alone fills a 4,000 budget. Each piece is then over it and says so, but holds 256 characters of the
    block at least, so 20,000 characters take some 80 reads, not 20,000."""
    page = {
        "id": "doc_frame",
        "title": "\x01" * 500,
        "blocks": [{"id": "long", "type": "paragraph", "text": "\x01" + "x" * 19_999}],
    }
    db = store_with_pages(tmp_path / "frame.db", FIXTURE, page)
    results: list[dict[str, Any]] = []
    async with _app(db) as app:
        cursor = None
        while True:
            envelope = await _get(app, EDITOR, "doc_frame", **({"cursor": cursor} if cursor else {}))
            assert envelope["ok"], envelope["error"]
            results.append(envelope["result"])
            cursor = envelope["result"].get("nextCursor")
            if cursor is None:
                break
    assert len(results) <= 20_000 // 256 + 2
    assert all([w["code"] for w in result["warnings"]] == ["result_oversized"] for result in results[:-1])
    assert join_blocks(results) == page["blocks"]


# -- the property: every piece sequence joins into exactly the page ------------------------------

_UNITS = st.text(alphabet=st.sampled_from('ab 中文🙂👍🏽"\\\n\t\x01<!--#>1.'), min_size=1, max_size=12)


@st.composite
def _texts(draw: st.DrawFn) -> str:
    """A text up to 100,000 characters: a short random unit repeated (so a long one is cheap)."""
    unit = draw(_UNITS)
    return (unit * draw(st.sampled_from([0, 1, 3, 200, 2_000, 20_000])))[:100_000]


# A page's text in all, at most: the longest block and more, dozens of pieces at any budget drawn (up to
# 700 with control characters, six JSON characters each). Without it the tail of the draws (up to 85
# blocks of 100,000 characters) took one CI lane six minutes; at 300,000 one example still took 8 s.
_PAGE_TEXT = 120_000


@st.composite
def _pages(draw: st.DrawFn) -> list[dict[str, Any]]:
    counter = iter(range(10_000))
    left = [_PAGE_TEXT]

    def block(depth: int) -> dict[str, Any]:
        kind = draw(st.sampled_from(["paragraph", "bulleted_list", "numbered_list", "code", "quote"]))
        text = draw(_texts())[: left[0]]
        left[0] -= len(text)
        made: dict[str, Any] = {"id": f"b{next(counter)}", "type": kind, "text": text}
        if kind.endswith("_list") and depth < 3:
            children = [block(depth + 1) for _ in range(draw(st.integers(0, 3)))]
            if children:
                made["children"] = children
        return made

    return [block(1) for _ in range(draw(st.integers(1, 5)))]


@pytest.mark.slow
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(
    blocks=_pages(),
    budget=st.integers(4_000, 20_000),
    form=st.sampled_from(["blocks", "markdown", "resource"]),
)
def test_every_piece_sequence_joins_into_exactly_the_page(
    blocks: list[dict[str, Any]], budget: int, form: str
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        db = store_with_pages(Path(folder) / "p.db", FIXTURE, {"id": "doc_p", "title": "P", "blocks": blocks})

        async def read() -> tuple[Any, Any]:
            async with _app(db, budget) as app:
                whole = await _whole(app, "doc_p", "blocks" if form == "blocks" else "markdown")
            if form == "resource":
                async with connect(db, max_result_chars=budget) as client:
                    return await _read_resource(client, "doc_p", budget), whole
            async with _app(db, budget) as app:
                results = await _read_all(app, "doc_p", budget=budget, format=form)
            if form == "blocks":
                return join_blocks(results), whole
            return join_markdown(
                [(result["markdown"], result.get("blockPiece")) for result in results]
            ), whole

        joined, whole = anyio.run(read)
    assert joined == whole
