"""Every tool and `resources/read`, errors included, within a small `--max-result-chars` (issue 22).

Each registered tool declares nothing about its worst case, so the data here is made to be oversized
for each: a 2,000-block page, 60 writes of 30 blocks, 60 pages matching one word, a conflict over
2,000 blocks, arguments naming a 50,000-character key. Every scenario runs twice on copies of one
store: once at 4,000 characters, where every envelope must fit, and once at a budget no answer
reaches, where the ones marked `oversized` must not (so the test cannot pass on data too small to
matter). A tool registered without a scenario fails the test; so does a list cut without a cursor
that reaches the rest.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp import Client, MCPError

from mnote_mcp.surface.answers import WithinBudget
from mnote_mcp.tools.catalog import ALL_TOOLS
from tests.support.helpers import FIXTURE, MODES, call, connect, page_args, store_with_pages, write_args

pytestmark = pytest.mark.anyio

BUDGET = 4_000
UNBOUNDED = 10_000_000
BIG, HISTORY, HUGE = "doc_big", "doc_history", "doc_huge_block"
# One block of 65,000 characters (prose, Chinese, emoji, quotes, line breaks: what JSON escapes and
# what a host counts differently) with two children, between two small blocks.
HUGE_TEXT = ('Notes on the plan, "quoted" \\ 计划与迁移 🙂👍🏽\n' * 2_000)[:65_000]
HUGE_BLOCK = {
    "id": "huge_root",
    "type": "bulleted_list",
    "text": HUGE_TEXT,
    "children": [
        {"id": "huge_child_1", "type": "paragraph", "text": "first child"},
        {"id": "huge_child_2", "type": "paragraph", "text": "second child 第二"},
    ],
}
COMPLETED = [f"doc_completes_{index:03d}_{'c' * 40}" for index in range(100)]
BIG_IDS = [f"big_block_{index:05d}" for index in range(2_000)]
HUGE_KEY = "k" * 50_000
SEARCHED = 60

Scenario = Callable[[Client], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Case:
    tool: str
    name: str
    run: Scenario
    # Unbounded, the answer is longer than BUDGET. Not said of errors: an error's lists and strings are
    # shown briefly whatever the budget (`vocabulary.messages.Shown`); on the base commit, before
    # that, the conflict over 2,000 blocks was a 102,467-character envelope.
    oversized: bool = True


def _pages() -> list[dict[str, Any]]:
    text = "Notes on the plan and the migration, written as people write meeting minutes."
    big = {
        "id": BIG,
        "title": "A 2,000-block page",
        "blocks": [
            {"id": block_id, "type": "paragraph", "text": f"{i} {text}"} for i, block_id in enumerate(BIG_IDS)
        ],
    }
    history = {
        "id": HISTORY,
        "title": "Written often",
        "blocks": [{"id": "h_0", "type": "paragraph", "text": "x"}],
    }
    searched = [
        {
            "id": f"doc_plan_{index:02d}",
            "title": f"Plan {index} " + "planning " * 50,
            "blocks": [
                {"id": f"plan_{index}_{n}", "type": "paragraph", "text": "plan " * 100} for n in range(3)
            ],
        }
        for index in range(SEARCHED)
    ]
    huge = {
        "id": HUGE,
        "title": "One huge block",
        "blocks": [
            {"id": "huge_before", "type": "paragraph", "text": "before"},
            HUGE_BLOCK,
            {"id": "huge_after", "type": "paragraph", "text": "after"},
        ],
    }
    completed = [
        {"id": document_id, "title": f"Completes {index}", "blocks": []}
        for index, document_id in enumerate(COMPLETED)
    ]
    return [big, history, huge, *searched, *completed]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The store every scenario starts from: the pages above, and 60 writes of 30 blocks each."""
    db = store_with_pages(tmp_path_factory.mktemp("budget") / "template.db", FIXTURE, *_pages())

    async def write_history() -> None:
        async with connect(db) as client:
            for write in range(60):
                blocks = [{"type": "paragraph", "text": f"write {write}, block {n}"} for n in range(30)]
                arguments = write_args(f"history-{write}", document_id=HISTORY, content=blocks, mode="append")
                assert (await call(client, "mnote.page.save", **arguments))["ok"]

    import anyio

    anyio.run(write_history)
    return db


def _big(**extra: Any) -> dict[str, Any]:
    return page_args(BIG, **extra)


def _write(key: str, document_id: str = BIG, **extra: Any) -> dict[str, Any]:
    return write_args(key, document_id=document_id, **extra)


async def _current(client: Client, document_id: str = BIG) -> int:
    envelope = await call(client, "mnote.page.get", **page_args(document_id, includeBlocks=False))
    revision: int = envelope["result"]["revision"]
    return revision


async def _stale_conflict(client: Client) -> dict[str, Any]:
    """Every block changed after the revision a delete of all of them names."""
    base = await _current(client)
    rewritten = [{"id": block_id, "type": "paragraph", "text": "changed"} for block_id in BIG_IDS]
    assert (await call(client, "mnote.page.save", **_write("rewrite", content=rewritten)))["ok"]
    return await call(client, "mnote.block.delete", **_write("stale", blockIds=BIG_IDS, baseRevision=base))


async def _revert_conflict(client: Client) -> dict[str, Any]:
    """An undo of a run whose 2,000 blocks a later run changed."""
    blocks = [{"type": "paragraph", "text": f"{n}"} for n in range(2_000)]
    first = {**_write("first", blocks=blocks, position="end"), "runId": "run_first"}
    inserted = await call(client, "mnote.block.insert", **first)
    ids = inserted["result"]["blockIds"]
    later = [{"id": block_id, "type": "paragraph", "text": "later"} for block_id in ids]
    assert (await call(client, "mnote.page.save", **_write("later", content=later)))["ok"]
    return await call(client, "mnote.page.revert", **_write("undo", undoRunId="run_first"))


def _cases() -> list[Case]:
    many = [{"type": "paragraph", "text": f"New block {n}."} for n in range(2_000)]
    bad_block = [{"type": "paragraph", "text": "x", HUGE_KEY: 1}]
    return [
        Case("mnote.page.get", "whole page", lambda c: call(c, "mnote.page.get", **_big())),
        Case("mnote.page.get", "as Markdown", lambda c: call(c, "mnote.page.get", **_big(format="markdown"))),
        Case(
            "mnote.page.get",
            "one 65,000-character block",
            lambda c: call(c, "mnote.page.get", **page_args(HUGE, blockIds=["huge_root"])),
        ),
        Case(
            "mnote.page.get",
            "one 65,000-character block as Markdown",
            lambda c: call(c, "mnote.page.get", **page_args(HUGE, blockIds=["huge_root"], format="markdown")),
        ),
        Case(
            "mnote.page.get",
            "2,000 missing ids",
            lambda c: call(c, "mnote.page.get", **_big(blockIds=[f"missing_{n:05d}" for n in range(2_000)])),
            oversized=False,
        ),
        Case(
            "mnote.page.save", "a rewrite", lambda c: call(c, "mnote.page.save", **_write("s", content=many))
        ),
        Case(
            "mnote.page.save",
            "a rewrite, dry run",
            lambda c: call(c, "mnote.page.save", **_write("d", dry_run=True, content=many)),
        ),
        Case(
            "mnote.page.save",
            "a huge key",
            lambda c: call(c, "mnote.page.save", **_write("k", content=bad_block)),
            oversized=False,
        ),
        Case(
            "mnote.page.update_title",
            "too long",
            lambda c: call(c, "mnote.page.update_title", **_write("t", title="T" * 50_000)),
            oversized=False,
        ),
        Case(
            "mnote.page.update_options",
            "a huge option",
            lambda c: call(c, "mnote.page.update_options", **_write("o", options={HUGE_KEY: True})),
            oversized=False,
        ),
        Case(
            "mnote.page.edit_text",
            "2,000 blocks replaced",
            lambda c: call(
                c,
                "mnote.page.edit_text",
                **_write("e", edits=[{"oldText": "plan", "newText": "p", "replaceAll": True}]),
            ),
        ),
        Case(
            "mnote.page.edit_text",
            "2,000 matches, ambiguous",
            lambda c: call(
                c, "mnote.page.edit_text", **_write("e", edits=[{"oldText": "plan", "newText": "p"}])
            ),
            oversized=False,
        ),
        Case(
            "mnote.page.edit_text",
            "a huge text found nowhere",
            lambda c: call(
                c,
                "mnote.page.edit_text",
                **_write("e", edits=[{"oldText": "plan " * 18_000, "newText": "x"}]),
            ),
            oversized=False,
        ),
        Case("mnote.page.search", "60 hits", lambda c: call(c, "mnote.page.search", query="plan", limit=50)),
        Case(
            "mnote.page.search",
            "a query too long",
            lambda c: call(c, "mnote.page.search", query="q" * 50_000),
            oversized=False,
        ),
        Case(
            "mnote.block.insert",
            "2,000 blocks",
            lambda c: call(c, "mnote.block.insert", **_write("i", blocks=many, position="end")),
        ),
        Case(
            "mnote.block.insert",
            "a huge key",
            lambda c: call(c, "mnote.block.insert", **_write("k", blocks=bad_block)),
            oversized=False,
        ),
        Case(
            "mnote.block.update",
            "90,000 characters",
            lambda c: call(c, "mnote.block.update", **_write("u", blockId=BIG_IDS[0], text="u" * 90_000)),
            oversized=False,
        ),
        Case(
            "mnote.block.delete",
            "2,000 blocks",
            lambda c: call(c, "mnote.block.delete", **_write("x", blockIds=BIG_IDS)),
        ),
        Case("mnote.block.delete", "a conflict over 2,000 blocks", _stale_conflict, oversized=False),
        Case(
            "mnote.block.move",
            "a huge anchor",
            lambda c: call(c, "mnote.block.move", **_write("m", blockId=BIG_IDS[0], afterBlockId=HUGE_KEY)),
            oversized=False,
        ),
        Case(
            "mnote.page.history",
            "60 writes",
            lambda c: call(c, "mnote.page.history", **page_args(HISTORY, limit=100)),
        ),
        Case(
            "mnote.page.history",
            "a huge filter",
            lambda c: call(c, "mnote.page.history", **page_args(HISTORY, filter={HUGE_KEY: "x"})),
            oversized=False,
        ),
        Case(
            "mnote.page.revert",
            "60 writes, dry run",
            lambda c: call(c, "mnote.page.revert", **_write("r", HISTORY, dry_run=True, toRevision=1)),
        ),
        Case("mnote.page.revert", "a conflict over 2,000 blocks", _revert_conflict, oversized=False),
        Case(
            "mnote.artifact.create_summary",
            "90,000 characters",
            lambda c: call(c, "mnote.artifact.create_summary", **_write("a", summary="s" * 90_000)),
            oversized=False,
        ),
        Case(
            "mnote.artifact.create_ai_note",
            "90,000 characters",
            lambda c: call(c, "mnote.artifact.create_ai_note", **_write("n", content="n" * 90_000)),
            oversized=False,
        ),
    ]


CASES = _cases()


def _size(envelope: dict[str, Any]) -> int:
    return len(json.dumps(envelope, ensure_ascii=False, separators=(",", ":")))


def test_every_tool_has_an_oversized_scenario() -> None:
    covered = {case.tool for case in CASES}
    assert covered == {spec.name for spec in ALL_TOOLS}, "a tool registered without a budget scenario"
    assert {case.tool for case in CASES if case.oversized} >= {
        "mnote.page.get",
        "mnote.page.save",
        "mnote.page.search",
        "mnote.page.history",
        "mnote.page.revert",
        "mnote.block.insert",
        "mnote.block.delete",
    }


async def _measure(template: Path, tmp_path: Path, case: Case, budget: int) -> dict[str, Any]:
    db = tmp_path / f"{budget}.db"
    shutil.copyfile(template, db)
    async with connect(db, max_result_chars=budget) as client:
        return await case.run(client)


@pytest.mark.parametrize("case", CASES, ids=lambda case: f"{case.tool}: {case.name}")
async def test_every_answer_fits_a_small_budget(template: Path, tmp_path: Path, case: Case) -> None:
    bounded = await _measure(template, tmp_path, case, BUDGET)
    assert _size(bounded) <= BUDGET, (case.tool, case.name, _size(bounded))
    if bounded["ok"]:
        codes = [warning["code"] for warning in bounded["result"].get("warnings", [])]
        assert "result_oversized" not in codes
    if case.oversized:
        unbounded = await _measure(template, tmp_path, case, UNBOUNDED)
        assert _size(unbounded) > BUDGET, f"{case.name}: not oversized data ({_size(unbounded)} characters)"
        assert unbounded["ok"] == bounded["ok"]


@pytest.mark.parametrize("tool", ["mnote.block.delete", "mnote.page.revert"])
async def test_an_error_says_how_many_it_left_out(template: Path, tmp_path: Path, tool: str) -> None:
    """Not every id: the first ones, the count in the message, what `details` left out per list."""
    case = next(case for case in CASES if (case.tool, case.name) == (tool, "a conflict over 2,000 blocks"))
    error = (await _measure(template, tmp_path, case, UNBOUNDED))["error"]
    assert error["code"] == "mnote_tool_conflict"
    assert "(2,000 in all)" in error["message"]
    shown = error["details"]["blockIds"]
    assert 0 < len(shown) <= 20
    assert error["details"]["omitted"]["blockIds"] == 2_000 - len(shown)
    assert len(error["details"]["conflicts"]) == len(shown)


@pytest.mark.parametrize(
    ("tool", "key", "arguments", "expected"),
    [
        ("mnote.page.history", "entries", page_args(HISTORY, limit=100), 60),
        ("mnote.page.search", "hits", {"query": "plan", "limit": 50}, SEARCHED + 3),  # doc_1, BIG, HUGE too
    ],
)
async def test_a_list_cut_to_the_budget_goes_on_with_its_cursor(
    template: Path, tool: str, key: str, arguments: dict[str, Any], expected: int
) -> None:
    """Fewer entries than asked, a `result_list` warning, and the kernel's cursor to the rest: read on,
    every entry comes once, in order, each answer within the budget."""
    async with connect(template, max_result_chars=BUDGET) as client:
        whole = await call(client, tool, **{**arguments})
        seen: list[Any] = []
        cursor = None
        answers = 0
        while True:
            envelope = await call(client, tool, **{**arguments, **({"cursor": cursor} if cursor else {})})
            assert envelope["ok"] and _size(envelope) <= BUDGET
            seen += envelope["result"][key]
            answers += 1
            cursor = envelope["result"].get("nextCursor")
            if cursor is None:
                break
    assert [w["code"] for w in whole["result"]["warnings"]] == ["result_list"]
    assert answers > 2
    names = [entry["revision"] if key == "entries" else entry["documentId"] for entry in seen]
    assert len(names) == len(set(names)) == expected


@pytest.mark.slow
async def test_resources_read_comes_in_pieces_within_the_budget(template: Path) -> None:
    """A 2,000-block page as a resource: pieces of whole blocks, each naming the next; all of them
    give every block once, in order."""
    uri: str | None = f"mnote://workspaces/ws_1/pages/{BIG}"
    ids: list[str] = []
    pieces = 0
    async with connect(template, max_result_chars=BUDGET) as client:
        while uri is not None:
            text = (await client.read_resource(uri)).contents[0].text  # type: ignore[union-attr]
            assert len(text) <= BUDGET
            ids += [
                line.rsplit("<!-- ", 1)[1][:-4]
                for line in text.splitlines()
                if line.endswith(" -->") and "<!-- " in line and "mnote://" not in line
            ]
            pieces += 1
            nexts = [line for line in text.splitlines() if "mnote://" in line]
            uri = nexts[0].split(": ", 1)[1].removesuffix(" -->") if nexts else None
    assert pieces > 10
    assert ids == BIG_IDS


# -- every other request kind the server answers (issue 30) -------------------------------------

PROMPT = types.PromptReference(type="ref/prompt", name="summarise_page")
HUGE_URI = f"mnote://workspaces/ws_1/pages/{HUGE}"
Answer = dict[str, Any]


def _wire(result: Any) -> Answer:
    """A result as the server put it on the wire (the SDK client parsed it into its model, whose
    defaults the server did not send)."""
    dumped: Answer = result.model_dump(by_alias=True, mode="json", exclude_unset=True)
    return dumped


async def _answer(request: Awaitable[Any]) -> Answer:
    """The result of a request, or the JSON-RPC error it was answered with."""
    try:
        return _wire(await request)
    except MCPError as error:
        return {"error": error.error.model_dump(by_alias=True, mode="json", exclude_none=True)}


@dataclass(frozen=True)
class RequestCase:
    method: str
    name: str
    run: Callable[[Client], Awaitable[Answer]]
    oversized: bool = True
    config: tuple[tuple[str, Any], ...] = ()


def _review(client: Client) -> Awaitable[Any]:
    return client.get_prompt("review_run", {"workspaceId": "ws_1", "documentId": HISTORY, "runId": "run_t"})


def _next_piece(answer: Answer) -> str | None:
    """The URI a resource piece names for the next one, if it is not the last."""
    text = answer["contents"][0]["text"]
    last = text.rstrip("\n").rsplit("\n", 1)[-1]
    return last.split(": ", 1)[1].removesuffix(" -->") if last.startswith("<!-- the page goes on") else None


async def _read_every_piece(client: Client) -> Answer:
    """The largest of the pieces a page is read in as a resource."""
    uri: str | None = HUGE_URI
    largest: Answer = {}
    while uri is not None:
        answer = await _answer(client.read_resource(uri))
        largest = max(largest, answer, key=_size)
        uri = _next_piece(answer) if "error" not in answer else None
    return largest


def _requests() -> list[RequestCase]:
    return [
        RequestCase(
            "tools/call",
            "an unknown tool with a 50,000-character name",
            lambda c: _answer(c.call_tool("t" * 50_000, {})),
            oversized=False,
        ),
        RequestCase("tools/list", "every tool", lambda c: _answer(c.list_tools()), oversized=False),
        RequestCase(
            "resources/read",
            "a 2,000-block page",
            lambda c: _answer(c.read_resource(f"mnote://workspaces/ws_1/pages/{BIG}")),
        ),
        RequestCase("resources/read", "one 65,000-character block, every piece", _read_every_piece),
        RequestCase(
            "resources/read",
            "a 50,000-character unknown URI",
            lambda c: _answer(c.read_resource("mnote://workspaces/ws_1/pages/" + "u" * 50_000)),
            oversized=False,
        ),
        RequestCase(
            "resources/list", "160 pages, 60 with long titles", lambda c: _answer(c.list_resources())
        ),
        RequestCase(
            "resources/templates/list",
            "the page template",
            lambda c: _answer(c.list_resource_templates()),
            oversized=False,
        ),
        RequestCase("prompts/list", "every prompt", lambda c: _answer(c.list_prompts()), oversized=False),
        RequestCase(
            "prompts/get",
            "summarise a 2,000-block page",
            lambda c: _answer(c.get_prompt("summarise_page", {"workspaceId": "ws_1", "documentId": BIG})),
        ),
        RequestCase(
            "prompts/get",
            "tidy one 65,000-character block",
            lambda c: _answer(c.get_prompt("tidy_page", {"workspaceId": "ws_1", "documentId": HUGE})),
        ),
        RequestCase("prompts/get", "review a run of 60 writes", lambda c: _answer(_review(c))),
        RequestCase(
            "completion/complete",
            "100 pages by prefix",
            lambda c: _answer(c.complete(PROMPT, {"name": "documentId", "value": "doc_completes"})),
            config=(("max_completions", 100),),
        ),
        RequestCase("ping", "a ping", lambda c: _answer(c.send_ping()), oversized=False),
    ]


REQUESTS = _requests()
# Answered by the server but not requested here: the handshake (the SDK client makes it), and what
# only reaches a session or a stream (subscriptions), whose answers are empty.
UNREQUESTED = frozenset(
    {"server/discover", "resources/subscribe", "resources/unsubscribe", "subscriptions/listen"}
)


def test_every_request_kind_has_an_oversized_scenario(template: Path) -> None:
    from tests.support.helpers import make_app

    app = make_app(template)
    server = app.server()
    handled = set(server._request_handlers)
    assert {case.method for case in REQUESTS} | UNREQUESTED == handled
    budget = server.middleware[-1]
    assert isinstance(budget, WithinBudget) and set(budget.kinds) == handled, "answers.py declares each"


async def _request(
    template: Path, tmp_path: Path, case: RequestCase, budget: int, mode: str = "legacy"
) -> Answer:
    db = tmp_path / f"{budget}.db"
    shutil.copyfile(template, db)
    async with connect(db, mode, max_result_chars=budget, **dict(case.config)) as client:
        return await case.run(client)


@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")  # ping, gone from 2026-07-28
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", REQUESTS, ids=lambda case: f"{case.method}: {case.name}")
async def test_every_request_kind_fits_a_small_budget(
    template: Path, tmp_path: Path, case: RequestCase, mode: str
) -> None:
    """In both protocol eras (2026-07-28 adds `resultType` and a `_meta` to every answer)."""
    bounded = await _request(template, tmp_path, case, BUDGET, mode)
    if case.method != "tools/list":  # the tool definitions: see docs/decisions.md
        assert _size(bounded) <= BUDGET, (case.method, case.name, _size(bounded))
    if case.oversized:
        unbounded = await _request(template, tmp_path, case, UNBOUNDED, mode)
        assert _size(unbounded) > BUDGET, f"{case.name}: not oversized data ({_size(unbounded)} characters)"
        assert ("error" in unbounded) == ("error" in bounded)
