"""Every tool and `resources/read`, errors included, within a small `--max-result-chars` (issue 22).

Each tool declares its worst cases (`ToolSpec.oversized`): calls on pages of data made large for them
(`examples.Stage`, built in tests/support/stages.py: a 2,000-block page, 60 writes of 30 blocks, 60
pages matching one word, one 65,000-character block), conflicts over 2,000 blocks, arguments naming a
50,000-character key. Every scenario runs twice on copies of one store: once at 4,000 characters,
where every envelope must fit, and once at a budget no answer reaches, where the ones not declared to
fit whatever the budget must not (so the test cannot pass on data too small to matter). A tool
registered without a scenario fails the test; so does a list cut without a cursor that reaches the
rest.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp import Client, MCPError

from mnote_mcp.surface.answers import WithinBudget
from mnote_mcp.tools.catalog import ALL_TOOLS
from mnote_mcp.tools.examples import Example
from mnote_mcp.tools.registry import ToolSpec
from tests.support.helpers import IDS, MODES, call, connect
from tests.support.stages import BIG, BIG_IDS, HISTORY, HUGE, TARGETS, build
from tests.support.tool_calls import calls

pytestmark = pytest.mark.anyio

BUDGET = 4_000
UNBOUNDED = 10_000_000
Answer = dict[str, Any]


@dataclass(frozen=True)
class Case:
    """One of a tool's declared scenarios."""

    spec: ToolSpec
    example: Example

    @property
    def id(self) -> str:
        return f"{self.spec.name}: {self.example.note}"

    async def run(self, client: Client) -> Answer:
        """Its setup for real, then the call: the call's envelope."""
        assert self.example.stage is not None, f"{self.id}: a scenario names the stage it runs on"
        made = calls(self.spec, TARGETS[self.example.stage], "budget", example=self.example)
        envelope: Answer = {}
        for index, (name, arguments) in enumerate(made):
            envelope = await call(client, name, **{**IDS, **arguments})
            assert index == len(made) - 1 or envelope["ok"], (self.id, "setup", envelope["error"])
        return envelope


def _cases(specs: Iterable[ToolSpec]) -> list[Case]:
    return [Case(spec, example) for spec in specs for example in spec.oversized]


CASES = _cases(ALL_TOOLS)


def _size(envelope: Answer) -> int:
    return len(json.dumps(envelope, ensure_ascii=False, separators=(",", ":")))


def _without_a_scenario(specs: Iterable[ToolSpec]) -> set[str]:
    """The tools among `specs` that declare no scenario, and those that say how an answer too large is
    made to fit (`fit`: a page in pieces, a list cut) none of whose scenarios needs it."""
    cases = _cases(specs)
    bare = {spec.name for spec in specs} - {case.spec.name for case in cases}
    cut = {spec.name for spec in specs if spec.fit is not None}
    return bare | cut - {case.spec.name for case in cases if not case.example.fits}


def test_every_tool_has_an_oversized_scenario() -> None:
    assert not _without_a_scenario(ALL_TOOLS), "a tool declared without a budget scenario (oversized=)"
    search = next(spec for spec in ALL_TOOLS if spec.name == "mnote.page.search")
    small = dataclasses.replace(search, oversized=tuple(e for e in search.oversized if e.fits))
    assert _without_a_scenario([small]) == {search.name}
    assert _without_a_scenario([dataclasses.replace(search, oversized=())]) == {search.name}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The store every scenario starts from: every stage (tests/support/stages.py)."""
    return build(tmp_path_factory.mktemp("budget") / "template.db")


async def _measure(template: Path, tmp_path: Path, case: Case, budget: int) -> Answer:
    db = tmp_path / f"{budget}.db"
    shutil.copyfile(template, db)
    async with connect(db, max_result_chars=budget) as client:
        return await case.run(client)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
async def test_every_answer_fits_a_small_budget(template: Path, tmp_path: Path, case: Case) -> None:
    bounded = await _measure(template, tmp_path, case, BUDGET)
    assert _size(bounded) <= BUDGET, (case.id, _size(bounded))
    if bounded["ok"]:
        codes = [warning["code"] for warning in bounded["result"].get("warnings", [])]
        assert "result_oversized" not in codes
    if not case.example.fits:
        unbounded = await _measure(template, tmp_path, case, UNBOUNDED)
        assert _size(unbounded) > BUDGET, f"{case.id}: not oversized data ({_size(unbounded)} characters)"
        assert unbounded["ok"] == bounded["ok"]


CONFLICTS = [case for case in CASES if case.example.note == "a conflict over 2,000 blocks"]


@pytest.mark.parametrize("case", CONFLICTS, ids=lambda case: case.id)
async def test_an_error_says_how_many_it_left_out(template: Path, tmp_path: Path, case: Case) -> None:
    """Not every id: the first ones, the count in the message, what `details` left out per list."""
    error = (await _measure(template, tmp_path, case, UNBOUNDED))["error"]
    assert error["code"] == "mnote_tool_conflict"
    assert "(2,000 in all)" in error["message"]
    shown = error["details"]["blockIds"]
    assert 0 < len(shown) <= 20
    assert error["details"]["omitted"]["blockIds"] == 2_000 - len(shown)
    assert len(error["details"]["conflicts"]) == len(shown)


def test_the_conflicts_are_declared() -> None:
    assert {case.spec.name for case in CONFLICTS} == {"mnote.block.delete", "mnote.page.revert"}


# The scenarios of a list read (paged by `limit` and `cursor`) that answer more than the budget holds.
LISTS = [
    case
    for case in CASES
    if not case.example.fits
    and {"limit", "cursor"} <= set(case.spec.accepted_schema(strict=False)["properties"])
]


def test_every_list_read_has_a_cut_scenario() -> None:
    assert (
        {case.spec.name for case in LISTS}
        == {
            spec.name
            for spec in ALL_TOOLS
            if {"limit", "cursor"} <= set(spec.accepted_schema(strict=False)["properties"])
        }
        >= {"mnote.page.history", "mnote.page.search"}
    )


Entry = tuple[object, object]  # a listed entry by what names it: (documentId, revision)


async def _walk(client: Client, case: Case) -> tuple[list[Entry], list[Answer]]:
    """The scenario read on with each answer's cursor to the end: every entry's identity, and every
    answer."""
    assert case.example.stage is not None
    arguments: dict[str, Any] = {**IDS, **case.spec.arguments_for(TARGETS[case.example.stage], case.example)}
    seen: list[Entry] = []
    answers: list[Answer] = []
    cursor = None
    while True:
        envelope = await call(
            client, case.spec.name, **{**arguments, **({"cursor": cursor} if cursor else {})}
        )
        assert envelope["ok"], envelope["error"]
        answers.append(envelope)
        key = next(k for k, v in envelope["result"].items() if k != "warnings" and isinstance(v, list))
        seen += [(entry.get("documentId"), entry.get("revision")) for entry in envelope["result"][key]]
        cursor = envelope["result"].get("nextCursor")
        if cursor is None:
            return seen, answers


@pytest.mark.parametrize("case", LISTS, ids=lambda case: case.id)
async def test_a_list_cut_to_the_budget_goes_on_with_its_cursor(template: Path, case: Case) -> None:
    """Fewer entries than asked, a `result_list` warning, and the kernel's cursor to the rest: read on,
    every entry comes once, in order (as read unbounded), each answer within the budget."""
    async with connect(template, max_result_chars=BUDGET) as client:
        seen, answers = await _walk(client, case)
    async with connect(template, max_result_chars=UNBOUNDED) as client:
        whole, _ = await _walk(client, case)
    assert [w["code"] for w in answers[0]["result"]["warnings"]] == ["result_list"]
    assert all(_size(answer) <= BUDGET for answer in answers)
    assert len(answers) > 2
    assert seen == whole and len(set(seen)) == len(seen) > 50


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
    assert tuple(ids) == BIG_IDS


# -- every other request kind the server answers (issue 30) -------------------------------------

PROMPT = types.PromptReference(type="ref/prompt", name="summarise_page")
HUGE_URI = f"mnote://workspaces/ws_1/pages/{HUGE}"


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
