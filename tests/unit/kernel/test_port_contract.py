"""The kernel port's contract, one suite for every adapter: local (in process), restored (the same on
a copy `mnote-mcp backup` took while a writer committed to the original: a restore must be a store
like any other), postgres (the same commands on a real PostgreSQL, in process), http (against the
reference runtime in a subprocess) and cli (against the reference mnote-cli adapter, a process per call).

Each test talks to the port directly (`kernel.execute`, `kernel.get_page`, ...), never through MCP.
Every call also runs on a mirror store through the embedded kernel, and the two answers must be the
same (outcomes, page views, refusals with their code, reason and details), ignoring only what is
meant to differ: the random part of a commandId and the audit record's time and sequence number.

One store per adapter serves the whole module (one runtime process, not one per test); each test
seeds its own copy of the workspaces under fresh ids, so tests cannot see each other's writes.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from mnote_mcp.kernel.databases.backup import backup_sqlite
from mnote_mcp.kernel.databases.stores import StoreLocation, open_store
from mnote_mcp.kernel.errors import ErrorCode, MnoteError
from mnote_mcp.kernel.port import (
    Command,
    CommandName,
    CommandOutcome,
    Consent,
    Correlation,
    HistoryFilter,
    HistoryQuery,
    Kernel,
    PageKey,
    PageQuery,
    PageRef,
    PagesQuery,
    Refusal,
    Refused,
    SearchQuery,
)
from mnote_mcp.kernel.postgres.opening import open_kernel as open_postgres_kernel
from mnote_mcp.kernel.relays.cli import CliKernel
from mnote_mcp.kernel.relays.http import HttpKernel
from mnote_mcp.kernel.scopes import Scope
from mnote_mcp.kernel.sqlite.opening import open_kernel
from mnote_mcp.kernel.store.fixtures import load_fixture, read_fixture
from tests.support.helpers import FIXTURE, dump, seeded_store
from tests.support.runtimes import RuntimeProcess, reference_runtime, runtime_cli_command
from tests.support.timing import patience
from tests.support.writer import Writer

pytestmark = pytest.mark.anyio
# the cli adapter starts a process per call: its run of the suite is slow (tests/conftest.py, docs/testing.md)
ADAPTERS = ("local", "restored", "postgres", "http", pytest.param("cli", marks=pytest.mark.slow))
PARA = [{"type": "paragraph", "text": "new"}]
_TAGS = itertools.count()
_NONCE = re.compile(r"^((?:page|artifact)_[a-z_]+_.+)_[0-9a-f]{8}$")


@dataclass
class Adapter:
    name: str
    open: Callable[[], Kernel]
    store: StoreLocation  # where the adapter's data lives: each test seeds it and may dump it
    runtime: RuntimeProcess | None = None


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the store the adapters under test reach, the embedded kernel's mirror of it)."""
    root = tmp_path_factory.mktemp("contract")
    return root / "shared.db", root / "reference.db"


@pytest.fixture(scope="module", params=ADAPTERS)
def adapter(
    request: pytest.FixtureRequest, stores: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Adapter]:
    shared, _ = stores
    if request.param == "postgres":
        url = request.getfixturevalue("pg_server").database("contract")
        open_store(url).close()  # create it (migrations), empty
        yield Adapter("postgres", lambda: open_postgres_kernel(url), url)
        return
    if request.param == "restored":
        restored = restored_copy(shared.with_name("restored.db"))
        yield Adapter("restored", lambda: open_kernel(restored), restored)
        return
    open_store(shared).close()  # create it, so every adapter starts from the same empty store
    if request.param == "local":
        yield Adapter("local", lambda: open_kernel(shared), shared)
    elif request.param == "http":
        with reference_runtime(shared, tmp_path_factory.mktemp("runtime")) as runtime:
            yield Adapter("http", lambda: HttpKernel(runtime.url, token=runtime.token), shared, runtime)
    else:
        yield Adapter("cli", lambda: CliKernel(runtime_cli_command(shared), timeout=patience(30)), shared)


def restored_copy(dest: Path) -> Path:
    """A backup (`mnote-mcp backup`'s code) of a seeded store taken while a writer commits to it."""
    source = seeded_store(dest.with_name("live.db"))
    writer = Writer(source)
    writer.start()
    try:
        while writer.acknowledged < 10:
            writer.join(timeout=0.05)
        backup_sqlite(source, dest)
    finally:
        writer.stop.set()
        writer.join(timeout=patience(60))
    return dest


def _normal(value: Any) -> Any:
    if isinstance(value, MnoteError):
        return {"error": value.code, "reason": value.reason, "details": _normal(value.details)}
    if isinstance(value, CommandOutcome | PageRef):
        return _normal(value.to_wire())
    if isinstance(value, dict):
        return {_normal(k): _normal(v) for k, v in value.items() if k not in ("createdAt", "seq")}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    if isinstance(value, str):
        return _NONCE.sub(r"\1", value)
    return value


class Kit:
    """The adapter under test, its embedded mirror, and this test's own workspaces."""

    def __init__(self, kernel: Kernel, reference: Kernel, tag: str) -> None:
        self.kernel = kernel
        self.reference = reference
        self.tag = tag
        self.ws = f"ws_1_{tag}"
        self.other_ws = f"ws_other_{tag}"
        self.trace = f"trace_{tag}"
        self._mirror_ids: dict[str, str] = {}  # commandId from the adapter -> the mirror's
        self._mirror_cursors: dict[str, str] = {}  # a search cursor from the adapter -> the mirror's

    async def _both(
        self,
        call: Callable[[Kernel], Awaitable[Any]],
        on_reference: Callable[[Kernel], Awaitable[Any]] | None = None,
    ) -> Any:
        answers = []
        for kernel, run in ((self.kernel, call), (self.reference, on_reference or call)):
            try:
                answers.append(await run(kernel))
            except MnoteError as error:
                answers.append(error)
        got, expected = answers
        assert _normal(got) == _normal(expected), "the adapter must answer what the embedded kernel answers"
        if isinstance(got, MnoteError):
            raise got
        return got

    def correlation(
        self, call: str = "call_1", trace: str | None = None, run: str | None = None
    ) -> Correlation:
        return Correlation(f"sess_{self.tag}", run or f"run_{self.tag}", call, trace or self.trace)

    def command(
        self,
        name: str,
        payload: dict[str, Any],
        key: str,
        *,
        actor: str = "user_editor",
        doc: str = "doc_1",
        ws: str | None = None,
        dry_run: bool = False,
        base: int | None = None,
        trace: str | None = None,
        run: str | None = None,
    ) -> Command:
        return Command(
            name=name,
            workspace_id=ws or self.ws,
            document_id=doc,
            actor_id=actor,
            correlation=self.correlation(f"call_{key}", trace, run),
            idempotency_key=key,
            dry_run=dry_run,
            payload=payload,
            base_revision=base,
        )

    def query(
        self, doc: str = "doc_1", actor: str = "user_editor", ws: str | None = None, **flags: Any
    ) -> PageQuery:
        return PageQuery(ws or self.ws, doc, actor, self.correlation(), **flags)

    async def execute(self, command: Command) -> CommandOutcome:
        mirrored: list[CommandOutcome] = []

        async def on_reference(kernel: Kernel) -> CommandOutcome:
            mirrored.append(await kernel.execute(command))
            return mirrored[0]

        outcome: CommandOutcome = await self._both(lambda k: k.execute(command), on_reference)
        if outcome.command_id is not None and mirrored[0].command_id is not None:
            self._mirror_ids[outcome.command_id] = mirrored[0].command_id
        return outcome

    async def record_refusal(self, refusal: Refusal) -> dict[str, Any]:
        mirrored: list[dict[str, Any]] = []

        async def on_reference(kernel: Kernel) -> dict[str, Any]:
            mirrored.append(dict(await kernel.record_refusal(refusal)))
            return mirrored[0]

        record: dict[str, Any] = await self._both(lambda k: k.record_refusal(refusal), on_reference)
        self._mirror_ids[record["commandId"]] = mirrored[0]["commandId"]
        return record

    def refusal(
        self,
        key: str,
        outcome: Refused = Refused.DECLINED,
        *,
        actor: str = "user_editor",
        name: str = "page.body.save",
    ) -> Refusal:
        return Refusal(name, self.ws, "doc_1", actor, self.correlation(f"call_{key}"), key, outcome)

    async def get_page(self, query: PageQuery) -> dict[str, Any]:
        page: dict[str, Any] = await self._both(lambda k: k.get_page(query))
        return page

    async def list_pages(self, actor: str, **narrow: Any) -> list[PageRef]:
        """This test's pages (the stores also hold other tests' workspaces, and the mirror those of
        every adapter's tests, so only these are compared), narrowed as `PagesQuery` says."""

        async def mine(kernel: Kernel) -> list[PageRef]:
            refs = await kernel.list_pages(PagesQuery(actor, **narrow))
            return [ref for ref in refs if ref.workspace_id in (self.ws, self.other_ws)]

        found: list[PageRef] = await self._both(mine)
        return found

    async def audit_trail(self, **query: Any) -> list[dict[str, Any]]:
        mirror_query = {**query}
        if query.get("command_id") is not None:
            mirror_query["command_id"] = self._mirror_ids[query["command_id"]]
        records: list[dict[str, Any]] = await self._both(
            lambda k: k.audit_trail(**query), lambda k: k.audit_trail(**mirror_query)
        )
        return records

    async def page_history(self, query: HistoryQuery) -> dict[str, Any]:
        history: dict[str, Any] = await self._both(lambda k: k.page_history(query))
        return history

    async def search_pages(self, actor: str = "user_editor", **fields: Any) -> dict[str, Any]:
        """A search in this test's workspace (or as asked); the mirror must find the same pages, in
        the same order, with the same snippets and cursors (the listing's cursor and `updatedAt` carry
        write times, which differ between the two stores)."""
        query = SearchQuery(actor, self.correlation(), **{"workspace_id": self.ws, **fields})
        # a cursor holds its store's watermark: the mirror continues from the cursor it gave itself
        mirror_query = replace(query, cursor=self._mirror_cursors.get(query.cursor or "", query.cursor))
        answers: list[Any] = []
        for kernel, asked in ((self.kernel, query), (self.reference, mirror_query)):
            try:
                answers.append(await kernel.search_pages(asked))
            except MnoteError as error:
                answers.append(error)
        got, expected = answers
        assert _normal(_timeless(got, query)) == _normal(_timeless(expected, query)), "same hits"
        if isinstance(got, MnoteError):
            raise got
        hits: dict[str, Any] = got
        if "nextCursor" in hits:
            self._mirror_cursors[hits["nextCursor"]] = expected["nextCursor"]
        return hits

    def history_query(self, doc: str = "doc_1", actor: str = "user_editor", **fields: Any) -> HistoryQuery:
        return HistoryQuery(self.ws, doc, actor, self.correlation(), **fields)

    async def revision(self) -> int:
        return int((await self.get_page(self.query()))["revision"])


def _timeless(answer: Any, query: SearchQuery) -> Any:
    if isinstance(answer, MnoteError):
        return answer
    hits = [{k: v for k, v in hit.items() if k != "updatedAt"} for hit in answer["hits"]]
    out = {**answer, "hits": hits}
    if "nextCursor" in out:
        out["nextCursor"] = "(a cursor holds its store's watermark; a listing's, a time)"
    return out


@pytest.fixture
async def kit(adapter: Adapter, stores: tuple[Path, Path]) -> AsyncIterator[Kit]:
    _, mirror = stores
    tag = f"{adapter.name}{next(_TAGS)}"
    fixture = read_fixture(FIXTURE)
    for workspace in fixture["workspaces"]:
        workspace["id"] = f"{workspace['id']}_{tag}"
    for path in (adapter.store, mirror):
        store = open_store(path)
        try:
            load_fixture(store, fixture)
        finally:
            store.close()
    kernel, reference = adapter.open(), open_kernel(mirror)
    try:
        yield Kit(kernel, reference, tag)
    finally:
        await kernel.aclose()
        await reference.aclose()


def _dump(adapter: Adapter) -> str:
    store = open_store(adapter.store)
    try:
        return store.dump()
    finally:
        store.close()


async def _refused(call: Awaitable[Any]) -> MnoteError:
    with pytest.raises(MnoteError) as caught:
        await call
    return caught.value


# -- reads -------------------------------------------------------------------------------------


async def test_get_page_returns_title_revision_summary_options_and_blocks(kit: Kit) -> None:
    page = await kit.get_page(kit.query())
    assert page["workspaceId"] == kit.ws and page["documentId"] == "doc_1"
    assert page["title"] == "Project plan" and page["revision"] == 1
    assert page["pageOptions"] == {"wideLayout": True}
    assert [block["id"] for block in page["blocks"]] == ["heading_1", "p_1", "p_2"]
    assert page["bodySummary"].startswith("Chapter one")


async def test_get_page_leaves_out_what_the_query_excludes(kit: Kit) -> None:
    page = await kit.get_page(kit.query(include_body=False, include_options=False, include_blocks=False))
    assert set(page) == {"workspaceId", "documentId", "title", "revision"}


async def test_read_refusals_follow_the_checkpoints_and_leak_nothing(kit: Kit) -> None:
    missing = await _refused(kit.get_page(kit.query("doc_nope")))
    assert (missing.code, missing.reason) == (ErrorCode.NOT_FOUND, "page")
    restricted = await _refused(kit.get_page(kit.query("doc_secret")))
    assert (restricted.code, restricted.reason) == (ErrorCode.PERMISSION_DENIED, "page_read")
    strangers = [
        await _refused(kit.get_page(kit.query(doc, actor="user_stranger"))) for doc in ("doc_1", "doc_nope")
    ]
    assert {(e.code, e.reason, str(e.details)) for e in strangers} == {
        (ErrorCode.PERMISSION_DENIED, "not_member", str({"workspaceId": kit.ws}))
    }, "a non-member cannot tell a missing page from an existing one"
    nobody = await _refused(kit.get_page(kit.query(actor="")))
    assert nobody.code is ErrorCode.UNAUTHENTICATED
    for error in (missing, restricted, *strangers):
        assert "SECRET" not in str(error.details) and "Project plan" not in str(error.details)


async def test_list_pages_shows_only_what_the_actor_may_read(kit: Kit) -> None:
    editor = await kit.list_pages("user_editor")
    assert [(r.workspace_id, r.document_id, r.title, r.revision) for r in editor] == [
        (kit.ws, "doc_1", "Project plan", 1)
    ]
    owner = await kit.list_pages("user_owner")
    assert [r.document_id for r in owner] == ["doc_1", "doc_secret"]
    stranger = await kit.list_pages("user_stranger")
    assert [(r.workspace_id, r.document_id) for r in stranger] == [(kit.other_ws, "doc_other")]
    assert await kit.list_pages("nobody_at_all") == []


async def test_list_pages_narrows_by_prefix_workspace_and_limit_in_the_store(kit: Kit) -> None:
    """What a completion asks (issue 25): the start of a title or id (case-folded, Chinese as typed),
    one workspace, at most so many; every adapter and relay carries the fields and answers alike."""

    async def listed(actor: str, **narrow: Any) -> list[tuple[str, str]]:
        refs = await kit.list_pages(actor, **narrow)
        return [(ref.workspace_id, ref.document_id) for ref in refs]

    assert await listed("user_editor", prefix="pROJECT P") == [(kit.ws, "doc_1")]
    assert await listed("user_editor", prefix="DOC_") == [(kit.ws, "doc_1")]
    assert await listed("user_editor", prefix="secret") == [], "a restricted page"
    assert await listed("user_owner", prefix="secret") == [(kit.ws, "doc_secret")]
    both = [(kit.ws, "doc_1"), (kit.ws, "doc_secret")]
    assert await listed("user_owner", prefix="doc", workspace_id=kit.ws) == both
    assert await listed("user_owner", prefix="doc", workspace_id=kit.ws, limit=1) == both[:1]
    assert await listed("user_owner", workspace_id=kit.ws, limit=0) == []
    assert await listed("user_owner", prefix="doc", workspace_id=kit.other_ws) == []
    assert await listed("user_stranger", prefix="doc") == [(kit.other_ws, "doc_other")]
    assert await listed("user_editor", prefix="zzz") == []
    await kit.execute(kit.command(CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "项目计划 one"}, "k1"))
    assert await listed("user_editor", prefix="项目") == [(kit.ws, "doc_1")]
    assert await listed("user_editor", prefix="目") == [], "a prefix, not a substring"


async def test_list_pages_finds_a_page_by_its_whole_title_or_its_id(kit: Kit) -> None:
    """What a call naming a page by its title asks (issue 35): the whole title, case-folded, or the
    id exactly; never a prefix, never a page the actor may not read."""

    async def named(actor: str, name: str, **narrow: Any) -> list[tuple[str, str]]:
        refs = await kit.list_pages(actor, named=name, **narrow)
        return [(ref.workspace_id, ref.document_id) for ref in refs]

    assert await named("user_editor", "project PLAN") == [(kit.ws, "doc_1")]
    assert await named("user_editor", "doc_1") == [(kit.ws, "doc_1")]
    assert await named("user_editor", "DOC_1") == [], "an id is matched exactly"
    assert await named("user_editor", "Project") == [], "a whole title, not its start"
    secret = (await kit.list_pages("user_owner", prefix="doc_secret"))[0].title
    assert await named("user_editor", secret) == [], "a restricted page"
    assert await named("user_owner", secret) == [(kit.ws, "doc_secret")]
    assert await named("user_editor", "Project plan", workspace_id=kit.other_ws) == []
    await kit.execute(kit.command(CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "项目计划"}, "k1"))
    assert await named("user_editor", "项目计划") == [(kit.ws, "doc_1")]


# -- every command -----------------------------------------------------------------------------


async def test_every_command_writes_and_page_writes_raise_the_revision(kit: Kit) -> None:
    append = await kit.execute(
        kit.command(CommandName.PAGE_BODY_SAVE, {"mode": "append", "content": PARA}, "k1", base=1)
    )
    assert (append.revision, append.changed, append.diff) == (2, True, [{"op": "append", "blocks": 1}])
    (new_id,) = append.data["blockIds"]
    replace = await kit.execute(
        kit.command(
            CommandName.PAGE_BODY_SAVE, {"content": [{"id": new_id, "type": "quote", "text": "q"}]}, "k2"
        )
    )
    assert replace.revision == 3
    assert {op["op"] for op in replace.diff} == {"delete", "update"}
    title = await kit.execute(kit.command(CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "Renamed ✓"}, "k3"))
    assert title.revision == 4
    assert title.diff == [{"op": "set", "field": "title", "from": "Project plan", "to": "Renamed ✓"}]
    options = await kit.execute(
        kit.command(CommandName.PAGE_LAYOUT_UPDATE_OPTIONS, {"options": {"showToc": True}}, "k4")
    )
    assert options.revision == 5
    summary = await kit.execute(kit.command(CommandName.ARTIFACT_SUMMARY_UPSERT, {"summary": "s"}, "k5"))
    note = await kit.execute(kit.command(CommandName.ARTIFACT_AI_NOTE_CREATE, {"content": "n"}, "k6"))
    assert summary.revision == note.revision == 5, "artifacts never change the page's revision"
    assert summary.data["kind"] == "summary" and note.data["kind"] == "ai_note"
    assert summary.data["sourceRevision"] == 5
    for outcome, snake in [
        (append, "page_body_save"),
        (title, "page_head_update_title"),
        (options, "page_layout_update_options"),
        (summary, "artifact_summary_upsert"),
        (note, "artifact_ai_note_create"),
    ]:
        assert outcome.command_id is not None and outcome.command_id.startswith(f"{snake}_{kit.trace}_")
        assert not outcome.dry_run and not outcome.replayed
    page = await kit.get_page(kit.query())
    assert page["title"] == "Renamed ✓" and page["revision"] == 5
    assert page["pageOptions"] == {"wideLayout": True, "showToc": True}
    assert page["blocks"] == [{"id": new_id, "type": "quote", "text": "q"}]


DRY_RUNS: list[tuple[str, dict[str, Any]]] = [
    (CommandName.PAGE_BODY_SAVE, {"mode": "append", "content": PARA}),
    (CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "Dry"}),
    (CommandName.PAGE_LAYOUT_UPDATE_OPTIONS, {"options": {"smallText": True}}),
    (CommandName.ARTIFACT_SUMMARY_UPSERT, {"summary": "dry"}),
    (CommandName.ARTIFACT_AI_NOTE_CREATE, {"content": "dry"}),
]


@pytest.mark.parametrize(("name", "payload"), DRY_RUNS)
async def test_dry_run_plans_the_real_diff_and_writes_nothing(
    kit: Kit, adapter: Adapter, name: str, payload: dict[str, Any]
) -> None:
    before = _dump(adapter)
    plan = await kit.execute(kit.command(name, payload, "k_dry", dry_run=True))
    assert plan.dry_run and plan.command_id is None and plan.changed
    assert _dump(adapter) == before, "a dry run writes nothing"
    real = await kit.execute(kit.command(name, payload, "k_dry"))
    assert real.diff == plan.diff and real.command_id is not None, "a dry run consumes no key"


async def test_stale_base_revision_is_a_conflict_carrying_the_current_one(kit: Kit) -> None:
    await kit.execute(kit.command(CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "T1"}, "k1", base=1))
    stale = await _refused(
        kit.execute(kit.command(CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "T2"}, "k2", base=1))
    )
    assert (stale.code, stale.reason) == (ErrorCode.CONFLICT, "revision")
    assert stale.details == {"currentRevision": 2, "baseRevision": 1}
    stale_note = await _refused(
        kit.execute(kit.command(CommandName.ARTIFACT_AI_NOTE_CREATE, {"content": "n"}, "k3", base=1))
    )
    assert stale_note.code is ErrorCode.CONFLICT
    assert await kit.revision() == 2


# -- idempotency -------------------------------------------------------------------------------


async def test_same_key_same_arguments_replays_and_writes_once(kit: Kit) -> None:
    command = kit.command(CommandName.PAGE_BODY_SAVE, {"mode": "append", "content": PARA}, "k_once")
    first = await kit.execute(command)
    retry = await kit.execute(command)
    assert retry.replayed and not first.replayed
    assert (retry.command_id, retry.revision, retry.diff) == (first.command_id, first.revision, first.diff)
    assert await kit.revision() == 2
    write, replay = await kit.audit_trail(trace_id=kit.trace)
    assert (write["commandId"], write["effect"]) == (first.command_id, "write")
    assert (replay["effect"], replay["replayOf"]) == ("replay", first.command_id), "the retry is audited"


async def test_concurrent_duplicates_write_once(kit: Kit) -> None:
    command = kit.command(CommandName.ARTIFACT_AI_NOTE_CREATE, {"content": "once"}, "k_race")
    outcomes: list[CommandOutcome] = []

    async def fire() -> None:
        outcomes.append(await kit.kernel.execute(command))

    async with anyio.create_task_group() as group:
        for _ in range(10):
            group.start_soon(fire)
    assert len({o.command_id for o in outcomes}) == 1
    assert sum(not o.replayed for o in outcomes) == 1
    trail = await kit.kernel.audit_trail(trace_id=kit.trace)
    assert [r["effect"] for r in trail].count("write") == 1 and len(trail) == 10


async def test_same_key_different_arguments_is_an_idempotency_conflict(kit: Kit) -> None:
    await kit.execute(kit.command(CommandName.ARTIFACT_SUMMARY_UPSERT, {"summary": "first"}, "k"))
    other = await _refused(
        kit.execute(kit.command(CommandName.ARTIFACT_SUMMARY_UPSERT, {"summary": "other"}, "k"))
    )
    assert (other.code, other.reason, other.details) == (
        ErrorCode.IDEMPOTENCY_CONFLICT,
        "summary",
        {"idempotencyKey": "k"},
    )
    await kit.execute(kit.command(CommandName.PAGE_BODY_SAVE, {"mode": "append", "content": PARA}, "k2"))
    moved = await _refused(
        kit.execute(kit.command(CommandName.PAGE_BODY_SAVE, {"mode": "append", "content": PARA * 2}, "k2"))
    )
    assert (moved.code, moved.reason) == (ErrorCode.IDEMPOTENCY_CONFLICT, "generic")
    elsewhere = await _refused(
        kit.execute(kit.command(CommandName.PAGE_BODY_SAVE, {"mode": "append", "content": PARA}, "k"))
    )
    assert (elsewhere.code, elsewhere.reason) == (ErrorCode.IDEMPOTENCY_CONFLICT, "other_command")
    assert elsewhere.details == {"idempotencyKey": "k", "usedBy": CommandName.ARTIFACT_SUMMARY_UPSERT.value}


async def test_dry_run_with_a_used_key_reports_the_replay(kit: Kit) -> None:
    command = kit.command(CommandName.ARTIFACT_AI_NOTE_CREATE, {"content": "n"}, "k_used")
    first = await kit.execute(command)
    plan = await kit.execute(
        kit.command(CommandName.ARTIFACT_AI_NOTE_CREATE, {"content": "n"}, "k_used", dry_run=True)
    )
    assert (plan.dry_run, plan.replayed, plan.changed, plan.diff) == (True, True, False, [])
    assert plan.command_id == first.command_id
    assert plan.warnings == [
        {"code": "idempotent_replay", "reason": "replay", "details": {"commandId": first.command_id}}
    ]


async def test_keys_that_need_encoding_travel_intact(kit: Kit) -> None:
    key = '幂等 键/%20;"quoted"'
    command = kit.command(CommandName.ARTIFACT_AI_NOTE_CREATE, {"content": "笔记 ✓"}, key)
    first = await kit.execute(command)
    assert (await kit.execute(command)).replayed
    records = await kit.audit_trail(command_id=first.command_id)
    assert [r["idempotencyKey"] for r in records] == [key, key]


# -- permissions and validation ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("actor", "name", "payload", "code", "reason"),
    [
        (
            "user_viewer",
            CommandName.PAGE_BODY_SAVE,
            {"content": PARA},
            ErrorCode.PERMISSION_DENIED,
            "page_write",
        ),
        (
            "user_viewer",
            CommandName.ARTIFACT_SUMMARY_UPSERT,
            {"summary": "s"},
            ErrorCode.PERMISSION_DENIED,
            "artifact_write",
        ),
        (
            "user_commenter",
            CommandName.PAGE_HEAD_UPDATE_TITLE,
            {"title": "t"},
            ErrorCode.PERMISSION_DENIED,
            "page_write",
        ),
        (
            "user_stranger",
            CommandName.ARTIFACT_AI_NOTE_CREATE,
            {"content": "n"},
            ErrorCode.PERMISSION_DENIED,
            "not_member",
        ),
        ("", CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "t"}, ErrorCode.UNAUTHENTICATED, "no_actor"),
    ],
)
async def test_write_permissions(
    kit: Kit, actor: str, name: str, payload: dict[str, Any], code: ErrorCode, reason: str
) -> None:
    for dry_run in (True, False):
        refused = await _refused(kit.execute(kit.command(name, payload, "k", actor=actor, dry_run=dry_run)))
        assert (refused.code, refused.reason) == (code, reason)
    assert await kit.revision() == 1


async def test_commenters_write_artifacts(kit: Kit) -> None:
    note = await kit.execute(
        kit.command(CommandName.ARTIFACT_AI_NOTE_CREATE, {"content": "c"}, "k", actor="user_commenter")
    )
    assert note.changed and note.data["kind"] == "ai_note"


async def test_non_wired_option_fails_a_real_call_and_warns_a_dry_run(kit: Kit) -> None:
    payload = {"options": {"protectEditing": True}}
    real = await _refused(kit.execute(kit.command(CommandName.PAGE_LAYOUT_UPDATE_OPTIONS, payload, "k")))
    assert (real.code, real.details["options"]) == (ErrorCode.OPTION_NOT_WIRED, ["protectEditing"])
    plan = await kit.execute(kit.command(CommandName.PAGE_LAYOUT_UPDATE_OPTIONS, payload, "k", dry_run=True))
    assert [w["code"] for w in plan.warnings] == [ErrorCode.OPTION_NOT_WIRED.value]


@pytest.mark.parametrize(
    ("name", "payload", "reason", "pointer"),
    [
        (CommandName.PAGE_BODY_SAVE, {"content": [{"type": "video"}]}, "block_type", "/content/0/type"),
        (CommandName.PAGE_BODY_SAVE, {"mode": "append", "content": []}, "schema", "/content"),
        (CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "  "}, "schema", "/title"),
        (CommandName.PAGE_LAYOUT_UPDATE_OPTIONS, {"options": {"colour": True}}, "schema", "/options/colour"),
        # issue 30: a call asking for nothing is named at an argument, never at ""
        (CommandName.PAGE_REVERT, {}, "schema", "/runId"),
        (CommandName.PAGE_REVERT, {"toRevision": 1, "commandId": "c"}, "schema", "/toRevision"),
        (CommandName.PAGE_BLOCK_UPDATE, {"blockId": "p_1"}, "schema", "/text"),
        ("page.body.erase", {}, "unknown_command", None),
    ],
)
async def test_invalid_commands_are_refused_with_where_and_why(
    kit: Kit, name: str, payload: dict[str, Any], reason: str, pointer: str | None
) -> None:
    refused = await _refused(kit.execute(kit.command(name, payload, "k")))
    assert (refused.code, refused.reason) == (ErrorCode.INVALID_ARGUMENT, reason)
    assert refused.details.get("pointer") == pointer
    assert await kit.revision() == 1


# -- audit -------------------------------------------------------------------------------------


async def test_audit_records_are_found_by_trace_and_by_command_id(kit: Kit) -> None:
    first = await kit.execute(kit.command(CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "A"}, "a1"))
    second = await kit.execute(kit.command(CommandName.ARTIFACT_SUMMARY_UPSERT, {"summary": "s"}, "a2"))
    await kit.execute(kit.command(CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "B"}, "a3", dry_run=True))
    trail = await kit.audit_trail(trace_id=kit.trace)
    assert [r["commandId"] for r in trail] == [first.command_id, second.command_id], (
        "dry runs are not audited"
    )
    record = trail[0]
    assert {k: record[k] for k in ("sessionId", "runId", "toolCallId", "traceId")} == kit.correlation(
        "call_a1"
    ).to_wire()
    assert (record["actorId"], record["idempotencyKey"], record["effect"]) == ("user_editor", "a1", "write")
    assert (record["revisionBefore"], record["revisionAfter"]) == (1, 2)
    assert await kit.audit_trail(command_id=second.command_id) == [trail[1]]
    assert await kit.audit_trail(trace_id=kit.trace, limit=1) == [trail[1]]
    assert await kit.audit_trail(trace_id=f"no_such_{kit.trace}") == []


async def test_a_refused_write_is_audited_and_its_key_still_writes_once(kit: Kit, adapter: Adapter) -> None:
    """`record_refusal` (issue 25: a write the person declined, dismissed or left unanswered; issue 31:
    one held for a confirmation handle): one
    audit record with the call's ids and how it was refused, nothing else written (no ledger entry:
    the same key is still a new write, made once, then replayed); refused like the command itself."""
    before = dump(adapter.store, audit=False)
    records = [await kit.record_refusal(kit.refusal("k_no", outcome)) for outcome in Refused]
    assert [(r["effect"], r["outcome"]) for r in records] == [
        ("refused", "declined"),
        ("refused", "cancelled"),
        ("refused", "confirm_timeout"),
        ("refused", "confirmation_required"),
    ]
    record = records[0]
    assert {k: record[k] for k in ("sessionId", "runId", "toolCallId", "traceId")} == kit.correlation(
        "call_k_no"
    ).to_wire()
    assert (record["commandName"], record["actorId"], record["idempotencyKey"]) == (
        "page.body.save",
        "user_editor",
        "k_no",
    )
    assert (record["revisionBefore"], record["revisionAfter"], record["replayOf"]) == (1, 1, None)
    assert dump(adapter.store, audit=False) == before, "nothing but the audit records"
    assert await kit.audit_trail(trace_id=kit.trace) == records
    assert await kit.audit_trail(command_id=record["commandId"]) == [record]

    command = kit.command(CommandName.PAGE_BODY_SAVE, {"mode": "append", "content": PARA}, "k_no")
    written = await kit.execute(replace(command, consent=Consent.HANDLE))
    replay = await kit.execute(command)
    assert not written.replayed and written.revision == 2 and replay.replayed
    trail = await kit.audit_trail(trace_id=kit.trace)
    assert [r["effect"] for r in trail] == ["refused", "refused", "refused", "refused", "write", "replay"]
    assert trail[-2]["detail"]["consent"] == "handle", "how the write was consented (issue 31)"

    viewer = await _refused(kit.record_refusal(kit.refusal("k_v", actor="user_viewer")))
    assert (viewer.code, viewer.reason) == (ErrorCode.PERMISSION_DENIED, "page_write")
    stranger = await _refused(kit.record_refusal(kit.refusal("k_s", actor="user_stranger")))
    assert stranger.code is ErrorCode.PERMISSION_DENIED
    unknown = await _refused(kit.record_refusal(kit.refusal("k_u", name="page.nuke")))
    assert (unknown.code, unknown.reason) == (ErrorCode.INVALID_ARGUMENT, "unknown_command")
    assert len(await kit.audit_trail(trace_id=kit.trace)) == 6, "a refused refusal records nothing"


# -- what the block tools and page resources added to the port ----------------------------------


async def test_page_views_relay_format_subsets_and_pieces(kit: Kit) -> None:
    markdown = await kit.get_page(kit.query(format="markdown"))
    assert "Chapter one" in markdown["markdown"] and "blocks" not in markdown
    subset = await kit.get_page(kit.query(block_ids=["p_2"]))
    assert [block["id"] for block in subset["blocks"]] == ["p_2"]
    first = await kit.get_page(kit.query(max_blocks=2))
    assert [block["id"] for block in first["blocks"]] == ["heading_1", "p_1"]
    rest = await kit.get_page(kit.query(max_blocks=2, cursor=first["nextCursor"]))
    assert [block["id"] for block in rest["blocks"]] == ["p_2"] and "nextCursor" not in rest


async def test_block_commands_relay(kit: Kit) -> None:
    inserted = await kit.execute(
        kit.command(CommandName.PAGE_BLOCK_INSERT, {"blocks": PARA, "afterBlockId": "p_1"}, "b1")
    )
    assert inserted.revision == 2 and len(inserted.data["blockIds"]) == 1
    new_id = inserted.data["blockIds"][0]
    updated = await kit.execute(
        kit.command(CommandName.PAGE_BLOCK_UPDATE, {"blockId": new_id, "text": "x"}, "b2")
    )
    moved = await kit.execute(
        kit.command(CommandName.PAGE_BLOCK_MOVE, {"blockId": new_id, "position": "start"}, "b3")
    )
    deleted = await kit.execute(kit.command(CommandName.PAGE_BLOCK_DELETE, {"blockIds": [new_id]}, "b4"))
    assert (updated.revision, moved.revision, deleted.revision) == (3, 4, 5)
    missing = await _refused(
        kit.execute(kit.command(CommandName.PAGE_BLOCK_DELETE, {"blockIds": ["nope"]}, "b5"))
    )
    assert (missing.code, missing.reason) == (ErrorCode.NOT_FOUND, "block")


async def test_text_replace_relays_its_edits_refusals_and_rebase(kit: Kit, adapter: Adapter) -> None:
    name = "page.text.replace"
    replaced = await kit.execute(
        kit.command(
            name,
            {
                "edits": [
                    {"oldText": "First", "newText": "1st"},
                    {"oldText": "1st paragraph", "newText": "1st para"},
                ]
            },
            "t1",
            base=1,
        )
    )
    assert (replaced.revision, replaced.data["blockIds"]) == (2, ["p_1"]), (
        "the second edit matches the first one's text"
    )
    before = _dump(adapter)
    ambiguous = await _refused(
        kit.execute(kit.command(name, {"edits": [{"oldText": "para", "newText": "x"}]}, "t2"))
    )
    assert (ambiguous.code, ambiguous.reason) == (ErrorCode.INVALID_ARGUMENT, "text_ambiguous")
    assert ambiguous.details["candidates"] == [
        {"blockId": "p_1", "text": "1st para."},
        {"blockId": "p_2", "text": "Second paragraph."},
    ]
    missing = await _refused(
        kit.execute(kit.command(name, {"edits": [{"oldText": "Third", "newText": "x"}]}, "t3"))
    )
    assert (missing.reason, missing.details["candidates"]) == ("text_missing", [])
    unknown = await _refused(
        kit.execute(kit.command(name, {"edits": [{"oldText": "1st", "newText": "x", "bogus": 1}]}, "t8"))
    )
    assert (unknown.code, unknown.details["pointer"]) == (ErrorCode.INVALID_ARGUMENT, "/edits/0/bogus")
    assert _dump(adapter) == before, "refusals write nothing"
    every = await kit.execute(
        kit.command(name, {"edits": [{"oldText": "para", "newText": "P", "replaceAll": True}]}, "t4", base=2)
    )
    assert every.data["blockIds"] == ["p_1", "p_2"] and every.revision == 3
    heading = {"blockId": "heading_1", "edits": [{"oldText": "one", "newText": "1"}]}
    rebased = await kit.execute(kit.command(name, heading, "t6", base=1))
    assert (rebased.revision, rebased.data["rebasedFrom"]) == (4, 1), "the heading did not change since 1"
    conflict = await _refused(
        kit.execute(kit.command(name, {"edits": [{"oldText": "1st", "newText": "First"}]}, "t7", base=2))
    )
    assert (conflict.code, conflict.reason) == (ErrorCode.CONFLICT, "blocks")
    assert conflict.details["conflicts"] == [{"blockId": "p_1", "revision": 3}]


async def test_sections_and_several_blocks_relay(kit: Kit) -> None:
    """`section` and `blockIds` on move and delete (doc_1: heading_1, p_1, p_2, one h1 section)."""
    tail = await kit.execute(
        kit.command(CommandName.PAGE_BLOCK_INSERT, {"blocks": PARA, "position": "end"}, "s1")
    )
    new_id = tail.data["blockIds"][0]
    several = await kit.execute(
        kit.command(
            CommandName.PAGE_BLOCK_MOVE,
            {"blockId": "p_2", "blockIds": [new_id, "p_1"], "position": "start"},
            "s2",
        )
    )
    assert several.data["blockIds"] == ["p_2", new_id, "p_1"]
    section = await kit.execute(
        kit.command(CommandName.PAGE_BLOCK_MOVE, {"blockId": "heading_1", "section": True}, "s3")
    )
    assert section.data["blockIds"] == ["heading_1"], "p_2 and the rest now come before the heading"
    moved = await kit.execute(
        kit.command(
            CommandName.PAGE_BLOCK_MOVE, {"blockId": "heading_1", "section": True, "position": "end"}, "s4"
        )
    )
    assert moved.changed is False
    await kit.execute(
        kit.command(CommandName.PAGE_BLOCK_MOVE, {"blockId": "heading_1", "blockIds": ["p_1"]}, "s5")
    )
    deleted = await kit.execute(
        kit.command(CommandName.PAGE_BLOCK_DELETE, {"blockIds": ["heading_1"], "section": True}, "s6")
    )
    assert deleted.data["blockIds"] == ["heading_1", "p_1", "p_2", new_id]
    page = await kit.get_page(kit.query())
    assert page["blocks"] == []


async def test_page_revisions_answer_only_readable_pages(kit: Kit) -> None:
    keys = [PageKey(kit.ws, "doc_1"), PageKey(kit.ws, "doc_secret"), PageKey(kit.ws, "doc_nope")]
    revisions: dict[PageKey, int] = await kit._both(lambda k: k.page_revisions("user_editor", keys))
    assert revisions == {PageKey(kit.ws, "doc_1"): 1}
    owner: dict[PageKey, int] = await kit._both(lambda k: k.page_revisions("user_owner", keys))
    assert set(owner) == {PageKey(kit.ws, "doc_1"), PageKey(kit.ws, "doc_secret")}
    stranger: dict[PageKey, int] = await kit._both(lambda k: k.page_revisions("user_stranger", keys))
    assert stranger == {}


# -- kernel v2: block-level concurrency, history, revert -----------------------------------------


async def test_block_edits_with_a_stale_base_go_ahead_unless_their_blocks_changed(kit: Kit) -> None:
    first = await kit.execute(
        kit.command(CommandName.PAGE_BLOCK_UPDATE, {"blockId": "p_1", "text": "A"}, "c1", base=1)
    )
    assert first.revision == 2 and "rebasedFrom" not in first.data
    other = await kit.execute(
        kit.command(CommandName.PAGE_BLOCK_UPDATE, {"blockId": "p_2", "text": "B"}, "c2", base=1)
    )
    assert (other.revision, other.data["rebasedFrom"]) == (3, 1)
    same = await _refused(
        kit.execute(kit.command(CommandName.PAGE_BLOCK_UPDATE, {"blockId": "p_1", "text": "C"}, "c3", base=1))
    )
    assert (same.code, same.reason) == (ErrorCode.CONFLICT, "blocks")
    assert same.details["conflicts"] == [{"blockId": "p_1", "revision": 2}]
    assert same.details["currentRevision"] == 3 and same.details["baseRevision"] == 1
    anchored = await _refused(
        kit.execute(
            kit.command(CommandName.PAGE_BLOCK_INSERT, {"blocks": PARA, "afterBlockId": "p_2"}, "c4", base=2)
        )
    )
    assert anchored.details["conflicts"] == [{"blockId": "p_2", "revision": 3}], "the anchor changed"
    deleted = await kit.execute(kit.command(CommandName.PAGE_BLOCK_DELETE, {"blockIds": ["heading_1"]}, "c5"))
    gone = await _refused(
        kit.execute(
            kit.command(
                CommandName.PAGE_BLOCK_MOVE, {"blockId": "heading_1", "position": "end"}, "c6", base=3
            )
        )
    )
    assert gone.details["conflicts"] == [{"blockId": "heading_1", "revision": deleted.revision}]
    whole = await _refused(
        kit.execute(kit.command(CommandName.PAGE_BODY_SAVE, {"content": PARA}, "c7", base=3))
    )
    assert (whole.code, whole.reason) == (ErrorCode.CONFLICT, "revision"), "a replace stays page-level"


async def test_history_lists_every_write_newest_first_and_filters(kit: Kit) -> None:
    await kit.execute(kit.command(CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "T"}, "h1", run="run_a"))
    await kit.execute(
        kit.command(CommandName.PAGE_BLOCK_UPDATE, {"blockId": "p_1", "text": "x"}, "h2", run="run_b")
    )
    await kit.execute(kit.command(CommandName.ARTIFACT_AI_NOTE_CREATE, {"content": "n"}, "h3", run="run_b"))
    await kit.execute(kit.command(CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "T"}, "h4", run="run_b"))
    history = await kit.page_history(kit.history_query())
    assert (history["revision"], history["historyFrom"]) == (3, 1)
    entries = history["entries"]
    assert [(e["revision"], e["commandName"], e["runId"]) for e in entries] == [
        (3, "page.block.update", "run_b"),
        (2, "page.head.updateTitle", "run_a"),
    ], "artifacts and writes that changed nothing make no revision"
    assert entries[0]["diff"] == [{"op": "update", "blockId": "p_1", "fields": ["text"]}]
    assert entries[1]["diff"] == [{"op": "set", "field": "title"}]
    assert {k: entries[0][k] for k in ("actorId", "sessionId", "toolCallId", "traceId")} == {
        "actorId": "user_editor",
        "sessionId": f"sess_{kit.tag}",
        "toolCallId": "call_h2",
        "traceId": kit.trace,
    }
    only_a = await kit.page_history(kit.history_query(filter=HistoryFilter(run_id="run_a")))
    assert [e["revision"] for e in only_a["entries"]] == [2]
    first = await kit.page_history(kit.history_query(limit=1))
    rest = await kit.page_history(kit.history_query(limit=1, cursor=first["nextCursor"]))
    assert [e["revision"] for e in (*first["entries"], *rest["entries"])] == [3, 2]
    assert "nextCursor" not in rest
    since = await kit.page_history(kit.history_query(since_revision=2))
    assert [e["revision"] for e in since["entries"]] == [3]
    hidden = await _refused(kit.page_history(kit.history_query("doc_secret")))
    assert (hidden.code, hidden.reason) == (ErrorCode.PERMISSION_DENIED, "page_read")
    stranger = await _refused(kit.page_history(kit.history_query(actor="user_stranger")))
    assert stranger.reason == "not_member"


async def test_revert_undoes_a_run_or_goes_back_to_a_revision(kit: Kit) -> None:
    await kit.execute(
        kit.command(CommandName.PAGE_BLOCK_UPDATE, {"blockId": "p_1", "text": "run"}, "r1", run="bad")
    )
    await kit.execute(kit.command(CommandName.PAGE_BLOCK_DELETE, {"blockIds": ["p_2"]}, "r2", run="bad"))
    await kit.execute(kit.command(CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "Mine"}, "r3", run="good"))
    plan = await kit.execute(kit.command(CommandName.PAGE_REVERT, {"runId": "bad"}, "r4", dry_run=True))
    assert plan.dry_run and plan.changed and plan.data["revertedRevisions"] == [2, 3]
    undone = await kit.execute(kit.command(CommandName.PAGE_REVERT, {"runId": "bad"}, "r4"))
    assert undone.diff == plan.diff and undone.revision == 5
    page = await kit.get_page(kit.query())
    assert page["title"] == "Mine", "the other run's write stays"
    assert [(b["id"], b["text"]) for b in page["blocks"]] == [
        ("heading_1", "Chapter one"),
        ("p_1", "First paragraph."),
        ("p_2", "Second paragraph."),
    ]
    back = await kit.execute(kit.command(CommandName.PAGE_REVERT, {"toRevision": 1}, "r5"))
    assert back.revision == 6 and (await kit.get_page(kit.query()))["title"] == "Project plan"
    again = await kit.execute(kit.command(CommandName.PAGE_REVERT, {"toRevision": 1}, "r6"))
    assert (again.changed, again.revision) == (False, 6)


async def test_revert_refuses_when_a_later_write_touched_the_same_blocks(kit: Kit) -> None:
    await kit.execute(
        kit.command(CommandName.PAGE_BLOCK_UPDATE, {"blockId": "p_1", "text": "bad"}, "x1", run="bad")
    )
    later = await kit.execute(
        kit.command(
            CommandName.PAGE_BLOCK_UPDATE, {"blockId": "p_1", "text": "someone else"}, "x2", run="other"
        )
    )
    for dry_run in (True, False):
        refused = await _refused(
            kit.execute(kit.command(CommandName.PAGE_REVERT, {"runId": "bad"}, "x3", dry_run=dry_run))
        )
        assert (refused.code, refused.reason) == (ErrorCode.CONFLICT, "revert")
        assert refused.details["conflicts"] == [{"blockId": "p_1", "revision": later.revision}]
    assert await kit.revision() == 3
    missing = await _refused(kit.execute(kit.command(CommandName.PAGE_REVERT, {"commandId": "nope"}, "x4")))
    assert (missing.code, missing.reason) == (ErrorCode.NOT_FOUND, "command")
    viewer = await _refused(
        kit.execute(kit.command(CommandName.PAGE_REVERT, {"toRevision": 1}, "x5", actor="user_viewer"))
    )
    assert viewer.reason == "page_write"


async def test_revert_of_a_run_that_wrote_nothing_to_the_page_is_not_found(
    kit: Kit, adapter: Adapter
) -> None:
    """Issue 30: no such run, or another actor's run of the same id, is `not_found` (reason `run`) as an
    unknown commandId is, real or dry run, and nothing is written: no revision, ledger entry or audit
    record."""
    await kit.execute(
        kit.command(
            CommandName.PAGE_HEAD_UPDATE_TITLE, {"title": "Theirs"}, "n1", actor="user_owner", run="run_x"
        )
    )
    before = _dump(adapter)
    for run in ("run_typo", "run_x"):
        for dry_run in (True, False):
            missing = await _refused(
                kit.execute(kit.command(CommandName.PAGE_REVERT, {"runId": run}, f"n-{run}", dry_run=dry_run))
            )
            assert (missing.code, missing.reason) == (ErrorCode.NOT_FOUND, "run")
            assert missing.details == {"runId": run, "pointer": "/runId"}
    assert _dump(adapter) == before
    assert await kit.revision() == 2


# -- authorize ---------------------------------------------------------------------------------


async def test_authorize_answers_the_checkpoints_in_the_contracts_order(kit: Kit) -> None:
    """Issue 11 item 4: the question the dispatcher asks before it reports an invalid argument."""

    async def ask(actor: str, doc: str, scope: Scope, ws: str | None = None) -> tuple[str, str] | None:
        try:
            await kit._both(lambda k: k.authorize(actor, ws or kit.ws, doc, scope))
        except MnoteError as error:
            return error.code.value, error.reason.value
        return None

    assert await ask("user_editor", "doc_1", Scope.PAGE_WRITE) is None
    assert await ask("user_viewer", "doc_1", Scope.PAGE_READ) is None
    assert await ask("user_commenter", "doc_1", Scope.ARTIFACT_WRITE) is None
    assert await ask("", "doc_1", Scope.PAGE_READ) == ("mnote_tool_unauthenticated", "no_actor")
    for doc in ("doc_1", "doc_nope"):
        assert await ask("user_stranger", doc, Scope.PAGE_READ) == (
            "mnote_tool_permission_denied",
            "not_member",
        )
    assert await ask("user_editor", "doc_nope", Scope.PAGE_WRITE) == ("mnote_tool_not_found", "page")
    assert await ask("user_editor", "doc_secret", Scope.PAGE_WRITE) == (
        "mnote_tool_permission_denied",
        "page_read",
    )
    assert await ask("user_viewer", "doc_1", Scope.PAGE_WRITE) == (
        "mnote_tool_permission_denied",
        "page_write",
    )
    assert await ask("user_viewer", "doc_1", Scope.ARTIFACT_WRITE) == (
        "mnote_tool_permission_denied",
        "artifact_write",
    )


async def test_search_finds_readable_pages_with_snippets_and_pages_through(
    kit: Kit, adapter: Adapter
) -> None:
    found = await kit.search_pages(query="chapter")
    assert [hit["documentId"] for hit in found["hits"]] == ["doc_1"]
    hit = found["hits"][0]
    assert hit["workspaceId"] == kit.ws and hit["title"] == "Project plan" and hit["revision"] == 1
    assert hit["snippets"] == [{"blockId": "heading_1", "text": "**Chapter** one"}]
    assert isinstance(hit["updatedAt"], str)
    await kit.execute(
        kit.command(CommandName.PAGE_BLOCK_UPDATE, {"blockId": "p_1", "text": "蓝色的海洋和天空"}, "s1")
    )
    sea = await kit.search_pages(query="海洋")
    assert [(h["documentId"], h["revision"]) for h in sea["hits"]] == [("doc_1", 2)]
    assert sea["hits"][0]["snippets"] == [{"blockId": "p_1", "text": "蓝色的**海洋**和天空"}]
    assert (await kit.search_pages(query="海"))["hits"][0]["documentId"] == "doc_1"
    assert await kit.search_pages(query="secret*") == {"hits": []}, "a restricted page is never a hit"
    owner = await kit.search_pages(actor="user_owner", query="secret*")
    assert [h["documentId"] for h in owner["hits"]] == ["doc_secret"]
    first = await kit.search_pages(actor="user_owner", limit=1)
    rest = await kit.search_pages(actor="user_owner", limit=1, cursor=first["nextCursor"])
    assert {first["hits"][0]["documentId"], rest["hits"][0]["documentId"]} == {"doc_1", "doc_secret"}
    assert "nextCursor" not in rest
    listed = await kit.search_pages()
    assert [h["documentId"] for h in listed["hits"]] == ["doc_1"]
    stranger = await _refused(kit.search_pages(actor="user_stranger", query="plan"))
    assert (stranger.code, stranger.reason) == (ErrorCode.PERMISSION_DENIED, "not_member")
    elsewhere = await kit.search_pages(actor="user_stranger", workspace_id=kit.other_ws, query="other*")
    assert [h["documentId"] for h in elsewhere["hits"]] == ["doc_other"]
    bad = await _refused(kit.search_pages(query="！？"))
    assert (bad.code, bad.details["pointer"]) == (ErrorCode.INVALID_ARGUMENT, "/query")
    limit = await _refused(kit.search_pages(query="plan", limit=0))
    assert limit.details["pointer"] == "/limit"
    cursor = await _refused(kit.search_pages(query="plan", cursor="junk"))
    assert cursor.details["pointer"] == "/cursor"


async def test_search_pages_keep_the_first_pages_moment_across_writes(kit: Kit, adapter: Adapter) -> None:
    """A write between two pages of results that moves a hit not yet returned above the cursor: the
    next page still returns it (ranked as it was at the first page), through every adapter."""

    def insert(doc: str, count: int, key: str) -> Command:
        blocks = [{"type": "paragraph", "text": "alpha"}] * count
        return kit.command(
            CommandName.PAGE_BLOCK_INSERT, {"blocks": blocks}, key, actor="user_owner", doc=doc
        )

    await kit.execute(insert("doc_1", 2, "m1"))
    await kit.execute(insert("doc_secret", 1, "m2"))
    first = await kit.search_pages(actor="user_owner", query="alpha", limit=1)
    assert [hit["documentId"] for hit in first["hits"]] == ["doc_1"]
    await kit.execute(insert("doc_secret", 2, "m3"))  # now 3 matching blocks: above doc_1's 2
    rest = await kit.search_pages(actor="user_owner", query="alpha", limit=1, cursor=first["nextCursor"])
    assert [hit["documentId"] for hit in rest["hits"]] == ["doc_secret"] and "nextCursor" not in rest
    assert rest["hits"][0]["revision"] == 3, "shown as it is now"
    listed = await kit.search_pages(actor="user_owner", limit=1)
    assert [hit["documentId"] for hit in listed["hits"]] == ["doc_secret"]
    await kit.execute(insert("doc_1", 1, "m4"))  # now the most recently changed page
    following = await kit.search_pages(actor="user_owner", limit=1, cursor=listed["nextCursor"])
    assert [hit["documentId"] for hit in following["hits"]] == ["doc_1"] and "nextCursor" not in following
