"""No result larger than the budget (`--max-result-chars`): a long page read comes in pieces that
the kernel cuts and cursors join (one block larger than the budget in pieces within it), a write's
report is trimmed and says what it left out."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnote_mcp.tools.budget import DEFAULT_MAX_RESULT_CHARS
from mnote_mcp.vocabulary.identity import Identity
from tests.clients.hermes.harness import BIG_PAGE, big_page, compact
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
from tests.support.pieces import join_blocks, join_markdown

pytestmark = pytest.mark.anyio

_MARKER = re.compile(r"<!-- (\S+) -->")


def store_with(path: Path, *pages: dict[str, Any]) -> Path:
    return store_with_pages(path, FIXTURE, *pages)


@pytest.fixture
def big(tmp_path: Path) -> Path:
    return store_with(tmp_path / "big.db", big_page())


async def read_all(client: Any, document_id: str = BIG_PAGE, **arguments: Any) -> list[dict[str, Any]]:
    envelopes = []
    cursor = None
    while True:
        extra = {**arguments, **({"cursor": cursor} if cursor else {})}
        envelope = await call(client, "mnote.page.get", **page_args(document_id, **extra))
        assert envelope["ok"] is True, envelope
        envelopes.append(envelope)
        cursor = envelope["result"].get("nextCursor")
        if cursor is None:
            return envelopes


@pytest.mark.parametrize("mode", MODES)
async def test_a_long_page_comes_in_pieces_within_the_default_budget(big: Path, mode: str) -> None:
    async with connect(big, mode) as client:
        envelopes = await read_all(client)
    assert len(envelopes) > 1
    ids = [block["id"] for envelope in envelopes for block in envelope["result"]["blocks"]]
    assert ids == [f"b_{index:04d}" for index in range(400)]
    for envelope in envelopes:
        assert len(compact(envelope)) <= DEFAULT_MAX_RESULT_CHARS
    for envelope in envelopes[:-1]:
        assert [w["code"] for w in envelope["result"]["warnings"]] == ["result_piece"]
        assert "cursor=nextCursor" in envelope["result"]["warnings"][0]["message"]
    # The pieces are as large as the budget allows, not needlessly small.
    assert len(compact(envelopes[0])) > 0.9 * DEFAULT_MAX_RESULT_CHARS


@pytest.mark.parametrize("budget", [6_000, 15_000])
async def test_markdown_pieces_fit_a_smaller_budget(big: Path, budget: int) -> None:
    async with connect(big, max_result_chars=budget, locale="zh-CN") as client:
        envelopes = await read_all(client, format="markdown")
        whole = await call(client, "mnote.page.get", **page_args(BIG_PAGE, format="markdown", maxBlocks=400))
    assert len(envelopes) > 2
    for envelope in envelopes:
        assert len(compact(envelope)) <= budget
    markers = [_MARKER.findall(envelope["result"]["markdown"]) for envelope in envelopes]
    assert [m for piece in markers for m in piece] == [f"b_{index:04d}" for index in range(400)]
    assert len(compact(whole)) <= budget  # the caller's own maxBlocks is cut to the budget too
    assert "nextCursor" in whole["result"]


async def test_a_smaller_max_blocks_of_the_caller_is_kept(big: Path) -> None:
    async with connect(big) as client:
        envelope = await call(client, "mnote.page.get", **page_args(BIG_PAGE, maxBlocks=10))
    assert len(envelope["result"]["blocks"]) == 10
    assert "warnings" not in envelope["result"]


def _nested(index: int, children: int) -> dict[str, Any]:
    return {
        "id": f"list_{index:03d}",
        "type": "bulleted_list",
        "text": f"item {index}",
        "children": [
            {"id": f"list_{index:03d}_{child:02d}", "type": "bulleted_list", "text": "x" * 200}
            for child in range(children)
        ],
    }


async def test_a_piece_never_splits_a_block_from_its_children(tmp_path: Path) -> None:
    page = {"id": "doc_lists", "title": "Lists", "blocks": [_nested(i, 12) for i in range(60)]}
    db = store_with(tmp_path / "lists.db", page)
    async with connect(db, max_result_chars=8_000) as client:
        envelopes = await read_all(client, "doc_lists")
    assert len(envelopes) > 2
    roots = [block for envelope in envelopes for block in envelope["result"]["blocks"]]
    assert roots == page["blocks"]
    assert all(len(compact(envelope)) <= 8_000 for envelope in envelopes)


async def test_a_single_block_larger_than_the_budget_comes_in_pieces_within_it(tmp_path: Path) -> None:
    """Issue 30: it came whole (`result_oversized`), 30,000 characters against a budget of 10,000;
    now its text comes in pieces, each saying where it is, and the next block after them."""
    huge = {"id": "huge", "type": "code", "text": "y" * 30_000}
    page = {
        "id": "doc_huge",
        "title": "Huge",
        "blocks": [huge, {"id": "after", "type": "paragraph", "text": "z"}],
    }
    db = store_with(tmp_path / "huge.db", page)
    async with connect(db, max_result_chars=10_000) as client:
        envelopes = await read_all(client, "doc_huge")
    first = envelopes[0]["result"]
    assert first["blockPiece"] == {"blockId": "huge", "offset": 0, "length": 30_000}
    assert [w["code"] for w in first["warnings"]] == ["result_block_piece"]
    assert all(len(compact(envelope)) <= 10_000 for envelope in envelopes)
    assert join_blocks([envelope["result"] for envelope in envelopes]) == page["blocks"]
    assert [block["id"] for block in envelopes[-1]["result"]["blocks"]] == ["after"]


async def test_a_write_report_over_the_budget_is_trimmed_and_says_what_it_left_out(big: Path) -> None:
    rewritten = [
        {"id": f"b_{index:04d}", "type": "paragraph", "text": f"Rewritten {index}."} for index in range(400)
    ]
    async with connect(big, max_result_chars=8_000) as client:
        plan = await call(
            client, "mnote.page.save", **write_args("rewrite", True, BIG_PAGE, content=rewritten)
        )
        done = await call(
            client, "mnote.page.save", **write_args("rewrite", False, BIG_PAGE, content=rewritten)
        )
        pieces = await read_all(client)
    for envelope in (plan, done):
        assert envelope["ok"] is True
        assert len(compact(envelope)) <= 8_000
        warning = envelope["result"]["warnings"][-1]
        assert warning["code"] == "result_trimmed"
        assert warning["details"]["omitted"]["diff"] > 0
    assert plan["result"]["dryRun"] is True and plan["result"]["textDiff"]
    assert done["result"]["changed"] is True
    texts = [block["text"] for envelope in pieces for block in envelope["result"]["blocks"]]
    assert texts == [f"Rewritten {index}." for index in range(400)]  # the whole write happened


def test_the_budget_flag_and_its_variable() -> None:
    from mnote_mcp.cli import parse
    from mnote_mcp.settings import SettingError

    assert parse(["serve"], {})[1].max_result_chars == DEFAULT_MAX_RESULT_CHARS
    assert parse(["serve", "--max-result-chars", "8000"], {})[1].max_result_chars == 8_000
    assert parse(["serve"], {"MNOTE_MAX_RESULT_CHARS": "12_000"})[1].max_result_chars == 12_000
    for bad in ("100", "lots"):
        with pytest.raises(SettingError):
            parse(["serve", "--max-result-chars", bad], {})


_TEXT = st.text(alphabet='ab 中文"\\\n', max_size=1_500)


@st.composite
def pages(draw: st.DrawFn) -> list[dict[str, Any]]:
    blocks = []
    for index in range(draw(st.integers(1, 40))):
        children = [
            {"id": f"c{index}_{child}", "type": "bulleted_list", "text": draw(_TEXT)}
            for child in range(draw(st.integers(0, 3)))
        ]
        block: dict[str, Any] = {"id": f"r{index}", "type": "bulleted_list", "text": draw(_TEXT)}
        if children:
            block["children"] = children
        blocks.append(block)
    return blocks


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blocks=pages(), budget=st.integers(4_000, 12_000), markdown=st.booleans())
def test_pieces_cover_the_page_once_within_the_budget(
    blocks: list[dict[str, Any]], budget: int, markdown: bool
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        db = store_with(Path(folder) / "p.db", {"id": "doc_p", "title": "P", "blocks": blocks})
        app = make_app(db, max_result_chars=budget)
        identity = Identity(actor_id="user_editor")

        async def read() -> list[dict[str, Any]]:
            found, cursor = [], None
            try:
                while True:
                    arguments = page_args("doc_p", **({"format": "markdown"} if markdown else {}))
                    if cursor:
                        arguments["cursor"] = cursor
                    envelope = await app.dispatcher.call("mnote.page.get", arguments, None, identity)
                    assert envelope["ok"] is True, envelope
                    found.append(dict(envelope))
                    cursor = (envelope["result"] or {}).get("nextCursor")
                    if cursor is None:
                        return found
            finally:
                await app.kernel.aclose()

        envelopes = anyio.run(read)
    results = [envelope["result"] for envelope in envelopes]
    if markdown:
        joined = join_markdown([(result["markdown"], result.get("blockPiece")) for result in results])
        expected = [b["id"] for root in blocks for b in [root, *root.get("children", [])]]
        assert _MARKER.findall(joined) == expected
    else:
        assert join_blocks(results) == blocks
    for envelope in envelopes:
        assert len(compact(envelope)) <= budget


_ID = st.text(max_size=40)


@settings(max_examples=200, deadline=None)
@given(
    tool=_ID,
    ids=st.tuples(_ID, _ID, _ID, _ID),
    command_id=st.none() | _ID,
    effect=st.sampled_from(["read", "write", "dry_run"]),
    result=st.dictionaries(_ID, _ID | st.integers(-(2**63), 2**63 - 1) | st.none(), max_size=5),
)
def test_the_envelope_frame_is_measured_exactly(
    tool: str,
    ids: tuple[str, str, str, str],
    command_id: str | None,
    effect: Any,
    result: dict[str, Any],
) -> None:
    from mnote_mcp.kernel.port import Correlation
    from mnote_mcp.tools.budget import chars, result_limit
    from mnote_mcp.vocabulary.envelope import ToolResult, success
    from mnote_mcp.vocabulary.scopes import ALL_SCOPES

    call_id, trace_id, workspace_id, document_id = ids
    correlation = Correlation(session_id="s", run_id="r", tool_call_id=call_id, trace_id=trace_id)
    outcome = ToolResult(result=result, effect=effect, command_id=command_id)
    envelope = success(tool, correlation, workspace_id, document_id, outcome, scopes=ALL_SCOPES, locale="en")
    room = result_limit(100_000, tool, correlation, workspace_id, document_id, outcome)
    assert chars(envelope) == 100_000 - room + chars(result)


def _busy_run(path: Path, writes: int) -> Path:
    """The fixture store with `writes` title changes by user_editor in the run `busy` (straight to the
    store: the MCP path is not what is tested, the report of their revert is)."""
    from mnote_mcp.kernel.port import Command, CommandName, Correlation
    from mnote_mcp.kernel.sqlite.opening import open_store

    store_with(path)
    store = open_store(path)
    try:
        for index in range(writes):
            store.execute(
                Command(
                    name=CommandName.PAGE_HEAD_UPDATE_TITLE,
                    workspace_id="ws_1",
                    document_id="doc_1",
                    actor_id="user_editor",
                    correlation=Correlation("s", "busy", f"c{index}", "t"),
                    idempotency_key=f"busy{index}",
                    dry_run=False,
                    payload={"title": f"Title {index}"},
                )
            )
    finally:
        store.close()
    return path


@pytest.mark.slow
@pytest.mark.parametrize("budget", [4_000, 4_321, 5_555, 7_000])
async def test_reverting_a_long_run_answers_within_the_budget(tmp_path: Path, budget: int) -> None:
    """Issue 26: a revert of 12,000 writes answered 61,543 characters (budget 40,000): the trimmer cut
    only textDiff, diff and blockIds, and kept every revertedRevisions entry. Any long list of a
    write's report is cut now, counted in the warning, and the warning itself is inside the budget."""
    db = _busy_run(tmp_path / "busy.db", 2_500)
    async with connect(db, max_result_chars=budget) as client:
        plan = await call(client, "mnote.page.revert", **write_args("undo", True, undoRunId="busy"))
        done = await call(client, "mnote.page.revert", **write_args("undo", undoRunId="busy"))
        title = (await call(client, "mnote.page.get", **page_args()))["result"]["title"]
    assert title == "Project plan", "the whole run was undone"
    for envelope in (plan, done):
        assert envelope["ok"] is True, envelope["error"]
        assert len(compact(envelope)) <= budget
        kept = envelope["result"]["revertedRevisions"]
        (warning,) = [w for w in envelope["result"]["warnings"] if w["code"] == "result_trimmed"]
        assert warning["details"]["omitted"]["revertedRevisions"] == 2_500 - len(kept)
        assert kept == list(range(2, 2 + len(kept))), "the first revisions, in order"


async def test_a_trimmed_report_fits_with_its_warning_at_every_budget() -> None:
    """The `result_trimmed` warning is part of the result: once it was added after the cut, so a
    report cut to just under the limit went over it by the warning's length."""
    from mnote_mcp.kernel.port import Correlation
    from mnote_mcp.tools.budget import chars
    from mnote_mcp.tools.results import trim_result
    from mnote_mcp.vocabulary.envelope import ToolRequest, ToolResult

    request = ToolRequest(
        "mnote.block.delete",
        "ws_1",
        "doc_1",
        "u",
        Correlation("s", "r", "c", "t"),
        "k",
        False,
        frozenset(),
        {},
    )
    ids = [f"b_{index:05d}" for index in range(400)]
    report = {
        "commandName": "page.block.delete",
        "revision": 9,
        "changed": True,
        "diff": [{"op": "delete", "blockId": block} for block in ids],
        "blockIds": ids,
    }
    outcome = ToolResult(result=report, effect="write", command_id="cmd")
    over = []
    for limit in range(600, 6_000, 9):
        cut = await trim_result(request, None, outcome, limit)  # type: ignore[arg-type]  # no kernel needed
        if chars(cut.result) > limit:
            over.append((limit, chars(cut.result)))
        assert cut.result["warnings"][-1]["code"] == "result_trimmed"
    assert over == []
