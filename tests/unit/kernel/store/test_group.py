"""Writes on SQLite commit in groups (issue 14, writes): the writes that reach the kernel together
share one transaction, each in a savepoint of its own. Each command still runs whole and alone:
permissions, idempotency (a replay within the group too), revisions, history, audit; a failing
command rolls back only itself; every caller is answered after the shared `COMMIT` (what it was
told is on disk, for any other connection), and a failed `COMMIT` fails every caller, leaving
nothing written."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnote_mcp.kernel.errors import MnoteError
from mnote_mcp.kernel.port import Command, CommandOutcome, Correlation
from mnote_mcp.kernel.sqlite.opening import open_store
from mnote_mcp.kernel.store import group as group_module
from mnote_mcp.kernel.store import ledger
from mnote_mcp.kernel.store.commands import COMMANDS
from mnote_mcp.kernel.store.kernel import StoreKernel
from mnote_mcp.kernel.store.store import Store
from tests.support.timing import patience

pytestmark = pytest.mark.anyio


def ids(n: object) -> Correlation:
    return Correlation("sess_g", "run_g", f"call_{n}", f"trace_{n}")


def note(key: str, actor: str = "user_editor", content: str | None = None, page: str = "doc_1") -> Command:
    return Command(
        "artifact.aiNote.create",
        "ws_1",
        page,
        actor,
        ids(key),
        key,
        False,
        {"content": content if content is not None else f"note {key}"},
    )


def title(key: str, text: str) -> Command:
    return Command(
        "page.head.updateTitle", "ws_1", "doc_1", "user_editor", ids(key), key, False, {"title": text}
    )


class Groups:
    """The sizes of the groups the kernel ran (spying on it, not changing it)."""

    def __init__(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sizes: list[int] = []
        execute, run_group = store.execute, group_module.run_group

        def one(command: Command, *, inline: bool = False) -> CommandOutcome:
            self.sizes.append(1)
            return execute(command, inline=inline)

        def many(store: Any, commands: Any, *, inline: bool) -> Any:
            self.sizes.append(len(commands))
            return run_group(store, commands, inline=inline)

        monkeypatch.setattr(store, "execute", one)
        monkeypatch.setattr(group_module, "run_group", many)


async def together(kernel: StoreKernel, commands: list[Command]) -> list[CommandOutcome | Exception]:
    """The commands sent at once, as concurrent tool calls send them."""
    results: list[CommandOutcome | Exception] = [Exception("not run")] * len(commands)

    async def one(index: int, command: Command) -> None:
        try:
            results[index] = await kernel.execute(command)
        except Exception as exc:
            results[index] = exc

    async with anyio.create_task_group() as group:
        for index, command in enumerate(commands):
            group.start_soon(one, index, command)
    return results


def rows(db: Path, sql: str, *params: Any) -> list[Any]:
    """Read by a connection of its own: what is committed."""
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


async def test_concurrent_writes_share_a_transaction_and_each_is_whole(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = StoreKernel(open_store(db))
    groups = Groups(kernel.store, monkeypatch)
    try:
        outcomes = await together(kernel, [note(f"k{n}") for n in range(20)])
    finally:
        await kernel.aclose()
    assert max(groups.sizes) > 1, groups.sizes
    assert sum(groups.sizes) == 20
    assert all(isinstance(o, CommandOutcome) and o.changed for o in outcomes), outcomes
    command_ids = {o.command_id for o in outcomes if isinstance(o, CommandOutcome)}
    assert len(command_ids) == 20
    audited = rows(
        db, "SELECT command_id, trace_id, effect FROM audit WHERE command_name = 'artifact.aiNote.create'"
    )
    assert {r[0] for r in audited} == command_ids
    assert {r[1] for r in audited} == {f"trace_k{n}" for n in range(20)}
    assert len(rows(db, "SELECT 1 FROM artifacts WHERE kind = 'ai_note'")) == 20
    assert len(rows(db, "SELECT 1 FROM idempotency")) == 20


async def test_a_failing_command_rolls_back_alone_and_gets_its_own_error(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = StoreKernel(open_store(db))
    groups = Groups(kernel.store, monkeypatch)
    commands = [
        note("ok_1"),
        note("viewer", actor="user_viewer"),  # may not write
        note("blank", content="   "),  # refused by validation
        note("stranger", actor="user_stranger"),  # not a member
        note("ok_2"),
        note("gone", page="doc_missing"),
        note("ok_3"),
    ]
    try:
        outcomes = await together(kernel, commands)
    finally:
        await kernel.aclose()
    assert max(groups.sizes) > 1, groups.sizes
    codes = [o.code.value if isinstance(o, MnoteError) else type(o).__name__ for o in outcomes]
    assert codes == [
        "CommandOutcome",
        "mnote_tool_permission_denied",
        "mnote_tool_invalid_argument",
        "mnote_tool_permission_denied",
        "CommandOutcome",
        "mnote_tool_not_found",
        "CommandOutcome",
    ], codes
    keys = {r[0] for r in rows(db, "SELECT idem_key FROM idempotency")}
    assert keys == {"ok_1", "ok_2", "ok_3"}
    assert {r[0] for r in rows(db, "SELECT idempotency_key FROM audit")} == {"ok_1", "ok_2", "ok_3"}
    assert len(rows(db, "SELECT 1 FROM artifacts")) == 3


async def test_a_command_failing_after_its_writes_leaves_none_of_them(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure after the page row, the history entry and the search index were written (a write
    hook raising): the savepoint takes all of them back; the writes before and after it stand."""
    (before,) = rows(db, "SELECT revision FROM pages WHERE id = 'doc_1'")[0]
    store = open_store(db)

    def boom(conn: Any, change: Any) -> None:
        if change.title is not None and change.title[1] == "Boom":
            raise RuntimeError("hook failed")

    store.write_hooks.append(boom)
    kernel = StoreKernel(store)
    groups = Groups(store, monkeypatch)
    try:
        first, failed, last = await together(
            kernel, [title("a", "First"), title("b", "Boom"), title("c", "Last")]
        )
    finally:
        await kernel.aclose()
    assert groups.sizes == [3], groups.sizes
    assert isinstance(failed, RuntimeError)
    assert isinstance(first, CommandOutcome) and isinstance(last, CommandOutcome)
    assert (first.revision, last.revision) == (before + 1, before + 2)
    assert rows(db, "SELECT revision, title FROM pages WHERE id = 'doc_1'") == [(before + 2, "Last")]
    history = rows(
        db, "SELECT revision, changes FROM page_history WHERE page_id = 'doc_1' AND revision > ?", before
    )
    assert [r[0] for r in history] == [before + 1, before + 2] and "Boom" not in str(history)
    assert {r[0] for r in rows(db, "SELECT idempotency_key FROM audit")} == {"a", "c"}


async def test_a_key_used_twice_in_one_group_replays_and_a_conflict_is_refused(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = StoreKernel(open_store(db))
    groups = Groups(kernel.store, monkeypatch)
    try:
        first, again, other = await together(
            kernel, [note("same"), note("same"), note("same", content="other text")]
        )
    finally:
        await kernel.aclose()
    assert max(groups.sizes) == 3, groups.sizes
    assert isinstance(first, CommandOutcome) and isinstance(again, CommandOutcome)
    assert again.replayed and again.command_id == first.command_id and not first.replayed
    assert isinstance(other, MnoteError) and other.code.value == "mnote_tool_idempotency_conflict"
    assert len(rows(db, "SELECT 1 FROM artifacts")) == 1
    effects = sorted(r[0] for r in rows(db, "SELECT effect FROM audit"))
    assert effects == ["replay", "write"]


async def test_writes_of_one_page_in_a_group_make_successive_revisions_with_history(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (before,) = rows(db, "SELECT revision FROM pages WHERE id = 'doc_1'")[0]
    kernel = StoreKernel(open_store(db))
    groups = Groups(kernel.store, monkeypatch)
    try:
        outcomes = await together(kernel, [title(f"t{n}", f"Title {n}") for n in range(5)])
    finally:
        await kernel.aclose()
    assert max(groups.sizes) == 5, groups.sizes
    revisions = sorted(o.revision for o in outcomes if isinstance(o, CommandOutcome))
    assert revisions == [before + n for n in range(1, 6)]
    history = rows(
        db, "SELECT revision, command_id FROM page_history WHERE page_id = 'doc_1' AND revision > ?", before
    )
    assert sorted(r[0] for r in history) == revisions
    assert {r[1] for r in history} == {o.command_id for o in outcomes if isinstance(o, CommandOutcome)}
    ((revision, last),) = rows(db, "SELECT revision, title FROM pages WHERE id = 'doc_1'")
    assert revision == before + 5 and last in {f"Title {n}" for n in range(5)}


async def test_every_caller_is_answered_after_the_commit(db: Path) -> None:
    kernel = StoreKernel(open_store(db))
    seen: list[bool] = []

    async def write(n: int) -> None:
        outcome = await kernel.execute(note(f"c{n}"))
        artifact = outcome.data["artifactId"]
        seen.append(bool(rows(db, "SELECT 1 FROM artifacts WHERE id = ?", artifact)))

    try:
        async with anyio.create_task_group() as group:
            for n in range(10):
                group.start_soon(write, n)
    finally:
        await kernel.aclose()
    assert seen == [True] * 10


async def test_a_failed_commit_fails_every_caller_and_writes_nothing(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(db)
    kernel = StoreKernel(store)
    real = store.transaction

    @contextmanager
    def failing(*, write: bool, inline: bool = False) -> Iterator[Any]:
        with real(write=write, inline=inline) as conn:
            yield conn
            if write:
                conn.execute("ROLLBACK")
                raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(store, "transaction", failing)
    try:
        outcomes = await together(kernel, [note(f"f{n}") for n in range(6)])
    finally:
        await kernel.aclose()
    assert all(isinstance(o, sqlite3.OperationalError) for o in outcomes), outcomes
    assert rows(db, "SELECT 1 FROM artifacts") == [] and rows(db, "SELECT 1 FROM idempotency") == []


async def test_a_heavy_command_in_a_group_moves_to_a_thread_and_the_others_commit(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("mnote_mcp.kernel.store.bounds.INLINE_BLOCKS", 2)
    kernel = StoreKernel(open_store(db))
    groups = Groups(kernel.store, monkeypatch)
    heavy = Command(
        "page.body.save",
        "ws_1",
        "doc_1",
        "user_editor",
        ids("heavy"),
        "heavy",
        False,
        {"mode": "append", "content": [{"type": "paragraph", "text": f"p{n}"} for n in range(5)]},
    )
    try:
        outcomes = await together(kernel, [note("light_1"), heavy, note("light_2")])
    finally:
        await kernel.aclose()
    assert all(isinstance(o, CommandOutcome) and o.changed for o in outcomes), outcomes
    assert 3 in groups.sizes and 1 in groups.sizes, groups.sizes  # the group, then the heavy one alone
    assert len(rows(db, "SELECT 1 FROM blocks WHERE page_id = 'doc_1' AND text LIKE 'p_'")) == 5


async def test_a_leader_cancelled_while_gathering_still_runs_its_group(db: Path) -> None:
    kernel = StoreKernel(open_store(db))
    answers: list[CommandOutcome] = []
    scope = anyio.CancelScope()

    async def leader() -> None:
        with scope:
            await kernel.execute(note("leader"))

    async def follower() -> None:
        answers.append(await kernel.execute(note("follower")))

    try:
        with anyio.fail_after(patience(10)):  # a group left without its leader would never answer
            async with anyio.create_task_group() as group:
                group.start_soon(leader)
                await anyio.lowlevel.checkpoint()  # the leader is gathering
                group.start_soon(follower)
                await anyio.lowlevel.checkpoint()  # the follower has joined
                scope.cancel()
    finally:
        await kernel.aclose()
    assert scope.cancelled_caught or not scope.cancel_called
    assert len(answers) == 1 and answers[0].changed
    # the leader's own write was abandoned, not interrupted: it committed with the group
    assert {r[0] for r in rows(db, "SELECT idem_key FROM idempotency")} == {"leader", "follower"}


def test_postgres_writes_are_not_grouped() -> None:
    from mnote_mcp.kernel.postgres.dialect import PostgresDialect

    class Pg:
        inline = PostgresDialect.inline
        group_commit = PostgresDialect.group_commit
        threads = 8

    class Store:
        dialect = Pg()

    kernel = StoreKernel(Store())  # type: ignore[arg-type]
    assert kernel._group is None
    assert group_module.MAX_GROUP >= 2


# -- the write path's trims, each the same as what it replaced --------------------------------


def _command_id_before(name: str, trace_id: str) -> str:
    """`ledger.command_id` as it was, with its nonce left out."""
    snake = "".join(f"_{ch.lower()}" if ch.isupper() else ("_" if ch == "." else ch) for ch in name)
    trace = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in trace_id)[:64]
    return f"{snake}_{trace}_"


@pytest.mark.slow
@given(st.sampled_from(sorted(COMMANDS)), st.text(max_size=100))
@settings(max_examples=500, deadline=None)
def test_command_ids_are_spelt_as_before(name: str, trace: str) -> None:
    made = ledger.command_id(name, trace)
    assert made[:-8] == _command_id_before(name, trace) and len(made) - len(made[:-8]) == 8


@pytest.mark.slow
def test_command_ids_keep_every_alphanumeric_character_and_replace_the_rest() -> None:
    for code in range(0x30000):
        ch = chr(code)
        if 0xD800 <= code < 0xE000:
            continue
        assert ledger.command_id("page.body.save", ch)[:-8] == _command_id_before("page.body.save", ch), hex(
            code
        )
