"""The PostgreSQL store end to end: `--db postgresql://…` on every command that takes `--db`,
migrations applied once however many replicas start together, the same MCP envelopes as on SQLite,
and two replicas (two server processes, one database): exactly one write for twenty racing identical
calls, a stale write refused, a key racing on two pages answered once, and a subscriber on one
replica told of a write made on the other (LISTEN/NOTIFY, not its poll).

The kernel contract suite runs on PostgreSQL too (`tests/unit/kernel/test_port_contract.py`, adapter
`postgres`), and so do the permission and idempotency suites (`db` parametrized over both stores).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mnote_mcp.kernel.databases.stores import open_store
from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.port import (
    Command,
    CommandName,
    CommandOutcome,
    Correlation,
    PageKey,
    PageQuery,
    PageView,
)
from mnote_mcp.kernel.postgres.opening import open_kernel as open_postgres_kernel
from mnote_mcp.kernel.relays.cli import CliKernel
from mnote_mcp.kernel.relays.http import HttpKernel
from mnote_mcp.kernel.store.fixtures import load_fixture, read_fixture
from mnote_mcp.kernel.store.kernel import StoreKernel
from mnote_mcp.surface.resources.uris import page_uri
from tests.support.helpers import (
    FIXTURE,
    IDS,
    ROOT,
    basic_path,
    call,
    comparable,
    connect,
    envelope_of,
    page_args,
    run_cli,
    seeded_store,
    stdio_params,
    store_with_pages,
    write_args,
)
from tests.support.http_helpers import ResourceUpdates, http_server, mcp_http, write_tokens
from tests.support.postgres import PgServer, pg_dialect, seeded_database
from tests.support.runtimes import reference_runtime, runtime_cli_command
from tests.support.timing import patience

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
TOKENS: dict[str, dict[str, Any]] = {"tok-editor": {"actorId": "user_editor"}}
DOC_1 = page_uri(PageKey("ws_1", "doc_1"))


@pytest.fixture
def seeded(pg_server: PgServer) -> str:
    return seeded_database(pg_server, FIXTURE)


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    return write_tokens(tmp_path / "tokens.json", TOKENS)


# -- the command line --------------------------------------------------------------------------


def test_migrate_seed_and_audit_take_a_postgresql_url(pg_url: str) -> None:
    first = run_cli("migrate", "--db", pg_url)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["schemaVersion"] == 4 and [m["version"] for m in report["migrations"]] == [2, 3, 4]
    assert "postgres" in report["store"]
    again = run_cli("migrate", "--db", pg_url)
    assert json.loads(again.stdout)["migrations"] == report["migrations"], "a current store is left alone"
    seed = run_cli("seed", "--db", pg_url, str(FIXTURE))
    assert seed.returncode == 0, seed.stderr
    assert json.loads(seed.stdout)["created"]["pages"] > 0
    audit = run_cli("audit", "--trace", "nothing", env={"MNOTE_DB": pg_url})
    assert audit.returncode == 1 and "no audit record with traceId nothing" in audit.stderr


def test_replicas_starting_together_migrate_once(pg_url: str) -> None:
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "mnote_mcp", "migrate", "--db", pg_url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for _ in range(3)
    ]
    outputs = [process.communicate(timeout=patience(60)) for process in processes]
    assert all(process.returncode == 0 for process in processes), outputs
    migrations = {json.dumps(json.loads(out)["migrations"]) for out, _ in outputs}
    assert len(migrations) == 1, "one replica applied the steps, the others found them applied"
    assert [m["version"] for m in json.loads(migrations.pop())] == [2, 3, 4]


def test_an_unreachable_database_is_one_line_and_exit_status_3() -> None:
    url = "postgresql://mnote:secret@127.0.0.1:1/mnote?connect_timeout=2"
    result = run_cli("audit", "--db", url)
    assert result.returncode == 3
    assert result.stderr.startswith("mnote-mcp: cannot open the store postgresql://mnote:***@127.0.0.1:1/")
    assert len(result.stderr.strip().splitlines()) == 1 and "secret" not in result.stderr


def catalog(url: str) -> list[Any]:
    """What DDL would change: the relations, functions and triggers outside PostgreSQL's own schemas,
    every column, and the schema versions recorded (if any)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        state: list[Any] = [
            conn.execute(
                "SELECT n.nspname, c.relname, c.relkind FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'"
                " ORDER BY 1, 2"
            ).fetchall(),
            conn.execute(
                "SELECT table_name, column_name, data_type FROM information_schema.columns"
                " WHERE table_schema = 'public' ORDER BY 1, 2"
            ).fetchall(),
            conn.execute(
                "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
                " WHERE n.nspname = 'public' ORDER BY 1"
            ).fetchall(),
            conn.execute("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1").fetchall(),
        ]
        if conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()[0]:  # type: ignore[index]
            state.append(conn.execute("SELECT * FROM schema_migrations ORDER BY version").fetchall())
    return state


def database_at(url: str, schema_version: int) -> str:
    """That database with mnote's schema as this release's migration steps leave it at `schema_version`."""
    import psycopg

    from mnote_mcp.kernel.postgres.database import PgConnection
    from mnote_mcp.kernel.postgres.schema import MIGRATIONS
    from mnote_mcp.kernel.store.encoding import now

    with psycopg.connect(url) as raw:  # one transaction, committed on leaving
        conn = PgConnection(raw)
        for step in range(min(MIGRATIONS), schema_version + 1):
            detail = MIGRATIONS[step](conn)
            conn.execute(
                "INSERT INTO schema_migrations (version, applied_at, detail) VALUES (?, ?, ?)",
                (step, now(), detail),
            )
    return url


def select_only_role(url: str) -> str:
    """The URL of a new role that may connect and SELECT from the database's tables, nothing else."""
    import psycopg

    role = f"reader_{time.monotonic_ns()}"
    with psycopg.connect(url, autocommit=True) as conn:
        name = conn.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'GRANT CONNECT ON DATABASE "{name}" TO "{role}"')
        conn.execute(f'GRANT USAGE ON SCHEMA public TO "{role}"')
        conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{role}:@{parts.netloc.rsplit('@', 1)[1]}"))


def test_audit_reads_a_postgresql_store_as_a_role_that_may_only_select_and_changes_no_schema(
    seeded: str,
) -> None:
    store = open_store(seeded)
    try:
        store.execute(
            Command(
                name=CommandName.PAGE_HEAD_UPDATE_TITLE,
                workspace_id="ws_1",
                document_id="doc_1",
                actor_id="user_editor",
                correlation=Correlation("s", "r", "t", "trace_ro"),
                idempotency_key="k_audit_ro",
                dry_run=False,
                payload={"title": "audited"},
            )
        )
        expected = store.audit_trail(trace_id="trace_ro")
    finally:
        store.close()
    assert expected, "the write was audited"
    before = catalog(seeded)
    reader = select_only_role(seeded)
    audit = run_cli("audit", "--db", reader, "--trace", "trace_ro")
    assert audit.returncode == 0, audit.stderr
    assert [json.loads(line) for line in audit.stdout.splitlines()] == expected
    assert catalog(seeded) == before, "no DDL: relations, columns, functions, triggers, versions as they were"


def test_postgresql_itself_refuses_a_write_through_a_store_opened_read_only(seeded: str) -> None:
    import psycopg

    store = open_store(seeded, read_only=True)
    try:
        assert pg_dialect(store).migration.applied == []
        with (
            pg_dialect(store).database.autocommit() as conn,
            pytest.raises(psycopg.errors.ReadOnlySqlTransaction),
        ):
            conn.execute("CREATE TABLE intruder (id INTEGER)")
    finally:
        store.close()


def test_audit_does_not_migrate_a_postgresql_store_at_an_older_schema(pg_url: str) -> None:
    database_at(pg_url, 3)
    before = catalog(pg_url)
    audit = run_cli("audit", "--db", pg_url)
    assert audit.returncode == 3, (audit.stdout, audit.stderr)
    assert len(audit.stderr.strip().splitlines()) == 1 and "Traceback" not in audit.stderr
    assert "schema version 3 is older" in audit.stderr and "mnote-mcp migrate" in audit.stderr
    assert catalog(pg_url) == before, "not migrated: schema and versions as they were"


def test_audit_creates_nothing_in_an_empty_postgresql_database(pg_url: str) -> None:
    before = catalog(pg_url)
    audit = run_cli("audit", "--db", pg_url)
    assert audit.returncode == 3, (audit.stdout, audit.stderr)
    assert len(audit.stderr.strip().splitlines()) == 1
    assert "not an mnote store (no schema)" in audit.stderr
    assert catalog(pg_url) == before == [[], [], [], []], "nothing created"


def test_audit_refuses_a_postgresql_store_at_a_newer_schema_as_the_server_does(seeded: str) -> None:
    import psycopg

    with psycopg.connect(seeded, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (99, 'later', 'a newer release')")
    before = catalog(seeded)
    for command in (["audit"], ["migrate"]):
        result = run_cli(*command, "--db", seeded)
        assert result.returncode == 3, (command, result.stderr)
        assert "has schema version 99; this mnote-mcp knows 4" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    assert catalog(seeded) == before


def rows_of(url: str) -> str:
    """Every row of every table (`PgDatabase.dump`), read through a read-only store."""
    store = open_store(url, read_only=True)
    try:
        return store.dump()
    finally:
        store.close()


def test_serve_read_only_creates_nothing_in_an_empty_postgresql_database(pg_url: str) -> None:
    """As on SQLite: `serve --read-only` never creates a store (nor seeds the demo into it)."""
    before = catalog(pg_url)
    served = run_cli("serve", "--read-only", "--db", pg_url)
    assert served.returncode == 3, (served.returncode, served.stderr[-2000:])
    assert len(served.stderr.strip().splitlines()) == 1 and "Traceback" not in served.stderr
    assert "not an mnote store (no schema)" in served.stderr and "mnote-mcp migrate" in served.stderr
    assert catalog(pg_url) == before == [[], [], [], []], "nothing created"


def test_serve_read_only_does_not_migrate_a_postgresql_store_at_an_older_schema(pg_url: str) -> None:
    database_at(pg_url, 3)
    before = catalog(pg_url)
    served = run_cli("serve", "--read-only", "--db", pg_url)
    assert served.returncode == 3, (served.returncode, served.stderr[-2000:])
    assert len(served.stderr.strip().splitlines()) == 1 and "Traceback" not in served.stderr
    assert "schema version 3 is older" in served.stderr and "mnote-mcp migrate" in served.stderr
    assert catalog(pg_url) == before, "not migrated: schema and versions as they were"


async def test_serve_read_only_serves_a_current_postgresql_store_over_read_only_connections(
    seeded: str,
) -> None:
    """A current store is served (a page, a search) to a role that may only SELECT, a write refused,
    nothing changed; the kernel it opens has every connection READ ONLY, so PostgreSQL refuses a write
    through it whatever the role may do."""
    import psycopg

    from mnote_mcp.kernel.databases.stores import open_kernel
    from tests.unit.tools.test_search import search

    before = (catalog(seeded), rows_of(seeded))
    reader = select_only_role(seeded)
    params = stdio_params(reader, "--read-only", "--actor", "user_editor", env={"MNOTE_LOG_LEVEL": "warning"})
    async with Client(params, read_timeout_seconds=patience(60)) as client:
        page = await call(client, "mnote.page.get", **page_args())
        assert page["ok"], page
        found = await search(client, query="plan")
        assert found["hits"], found
        save = await call(
            client,
            "mnote.page.save",
            **write_args("ro", content=[{"type": "paragraph", "text": "x"}], mode="append"),
        )
        assert not save["ok"] and save["error"]["code"] == "mnote_tool_permission_denied", save
    kernel = open_kernel(seeded, read_only=True)
    try:
        assert isinstance(kernel, StoreKernel)
        with (
            pg_dialect(kernel.store).database.autocommit() as conn,
            pytest.raises(psycopg.errors.ReadOnlySqlTransaction),
        ):
            conn.execute("CREATE TABLE intruder (id INTEGER)")
    finally:
        await kernel.aclose()
    assert (catalog(seeded), rows_of(seeded)) == before


# -- MCP end to end ----------------------------------------------------------------------------


async def test_a_stdio_server_on_postgresql_answers_as_on_sqlite(pg_url: str, tmp_path: Path) -> None:
    async with connect(seeded_store(tmp_path / "reference.db")) as reference:
        expected = [comparable(e) for e in await basic_path(reference)]
    params = stdio_params(pg_url, "--seed", str(FIXTURE), "--actor", "user_editor")
    async with Client(params, read_timeout_seconds=patience(30)) as client:
        got = [comparable(e) for e in await basic_path(client)]
    assert got == expected


async def test_history_and_revert_through_the_tools_on_postgresql(seeded: str) -> None:
    async with connect(seeded) as client:
        edit = await call(client, "mnote.block.update", **write_args("k1", blockId="p_1", text="edited"))
        assert edit["ok"], edit["error"]
        history = await call(client, "mnote.page.history", **page_args())
        assert [e["commandName"] for e in history["result"]["entries"]] == ["page.block.update"]
        revert = await call(client, "mnote.page.revert", **write_args("k2", toRevision=1))
        assert revert["ok"], revert["error"]
        assert revert["result"]["revision"] == 3
    store = open_store(seeded)
    try:
        trail = [(r["commandName"], r["revisionAfter"]) for r in store.audit_trail()]
    finally:
        store.close()
    assert trail == [("page.block.update", 2), ("page.revert", 3)]


async def test_the_reference_runtime_serves_a_postgresql_store(seeded: str, tmp_path: Path) -> None:
    """`runtime serve --db URL` and `runtime cli --db URL`: the relays reach the same pages."""
    query = PageQuery("ws_1", "doc_1", "user_editor", Correlation("s", "r", "c", "t"))
    with reference_runtime(seeded, tmp_path) as runtime:
        http = HttpKernel(runtime.url, token=runtime.token)
        try:
            page = await http.get_page(query)
        finally:
            await http.aclose()
    cli = CliKernel(runtime_cli_command(seeded), timeout=patience(60))
    try:
        assert await cli.get_page(query) == page
    finally:
        await cli.aclose()
    assert page["title"] == "Project plan" and page["revision"] == 1


# -- two replicas, one database ----------------------------------------------------------------


async def test_two_replicas_write_once_and_refuse_a_stale_write(seeded: str, tokens: Path) -> None:
    args = write_args("k_race", content=[{"type": "paragraph", "text": "once"}], mode="append")
    with (
        http_server(seeded, "--auth-file", str(tokens), "--stateless") as a,
        http_server(seeded, "--auth-file", str(tokens), "--stateless") as b,
    ):
        async with mcp_http(a.url, "tok-editor") as first, mcp_http(b.url, "tok-editor") as second:
            envelopes: list[dict[str, Any]] = []

            async def fire(client: Client) -> None:
                envelopes.append(envelope_of(await client.call_tool("mnote.page.save", args)))

            async with anyio.create_task_group() as group:
                for n in range(20):
                    group.start_soon(fire, first if n % 2 else second)
            fresh = await call(
                first, "mnote.page.update_title", **write_args("t1", title="A", baseRevision=2)
            )
            stale = await call(
                second, "mnote.page.update_title", **write_args("t2", title="B", baseRevision=2)
            )
    assert len(envelopes) == 20 and all(e["ok"] for e in envelopes), [e["error"] for e in envelopes]
    assert len({e["audit"]["commandId"] for e in envelopes}) == 1
    assert {e["result"]["revision"] for e in envelopes} == {2}
    assert fresh["ok"] and stale["error"]["code"] == "mnote_tool_conflict"
    assert stale["error"]["details"]["currentRevision"] == 3
    store = open_store(seeded)
    try:
        trail = store.audit_trail(trace_id="trace_t")
        with store.transaction(write=False) as conn:
            (written,) = conn.execute("SELECT count(*) FROM blocks WHERE text = 'once'").fetchone()
    finally:
        store.close()
    effects = [r["effect"] for r in trail if r["commandName"] == "page.body.save"]
    assert effects.count("write") == 1 and effects.count("replay") == 19
    assert written == 1


async def test_one_key_racing_on_two_pages_from_two_replicas_is_one_operation(seeded: str) -> None:
    """Two pages, so no page lock orders them: the ledger's key decides, the loser runs again and is
    told the key is taken (exactly once across replicas)."""
    data = read_fixture(FIXTURE)
    data["workspaces"][0]["pages"].append({"id": "doc_2", "title": "Second"})
    store = open_store(seeded)
    try:
        load_fixture(store, data)
    finally:
        store.close()
    replicas = [open_postgres_kernel(seeded), open_postgres_kernel(seeded)]

    def command(doc: str) -> Command:
        return Command(
            name=CommandName.PAGE_HEAD_UPDATE_TITLE,
            workspace_id="ws_1",
            document_id=doc,
            actor_id="user_editor",
            correlation=Correlation("s", "r", f"c_{doc}", "trace_race"),
            idempotency_key="k_two_pages",
            dry_run=False,
            payload={"title": f"title of {doc}"},
        )

    answers: list[CommandOutcome | MnoteError] = []

    async def fire(n: int) -> None:
        try:
            answers.append(await replicas[n % 2].execute(command("doc_1" if n % 2 else "doc_2")))
        except MnoteError as error:
            answers.append(error)

    try:
        async with anyio.create_task_group() as group:
            for n in range(12):
                group.start_soon(fire, n)
    finally:
        for kernel in replicas:
            await kernel.aclose()
    outcomes = [a for a in answers if isinstance(a, CommandOutcome)]
    refusals = [a for a in answers if isinstance(a, MnoteError)]
    assert len({o.command_id for o in outcomes}) == 1, "one operation, replayed"
    assert len(outcomes) == 6 and len(refusals) == 6
    assert {e.code for e in refusals} == {ErrorCode.IDEMPOTENCY_CONFLICT}


async def test_a_subscriber_on_one_replica_hears_a_write_made_on_another(seeded: str, tokens: Path) -> None:
    updates = ResourceUpdates()
    with (
        # A polls once an hour: what it hears within seconds came through LISTEN/NOTIFY.
        http_server(seeded, "--auth-file", str(tokens), "--watch-interval", "3600") as a,
        http_server(seeded, "--auth-file", str(tokens), "--stateless") as b,
    ):
        async with (
            httpx2.AsyncClient(headers={"Authorization": "Bearer tok-editor"}, timeout=patience(30)) as http,
            Client(
                streamable_http_client(f"{a.url}/mcp", http_client=http),
                mode="legacy",
                message_handler=updates,
            ) as subscriber,
        ):
            await subscriber.subscribe_resource(DOC_1)
            await anyio.sleep(0.5)  # the subscription's first poll has answered
            async with mcp_http(b.url, "tok-editor") as writer:
                envelope = await call(
                    writer, "mnote.block.update", **write_args("k_b", blockId="p_1", text="B")
                )
                assert envelope["ok"], envelope["error"]
            with anyio.fail_after(patience(10)):
                await updates.arrived.wait()
    assert updates.uris == [DOC_1]


async def test_a_replica_killed_during_a_burst_loses_no_acknowledged_write(seeded: str, tokens: Path) -> None:
    """kill -9 mid-burst: every write a client was told succeeded is in the store, and the ledger, the
    audit trail and the page's history agree with each other (a command is one transaction)."""
    acknowledged: list[dict[str, Any]] = []
    enough = anyio.Event()
    with http_server(seeded, "--auth-file", str(tokens), "--stateless") as server:

        async def fire(client: Client, n: int) -> None:
            block = [{"type": "paragraph", "text": f"burst {n}"}]
            with anyio.move_on_after(patience(20)):
                try:
                    envelope = envelope_of(
                        await client.call_tool("mnote.block.insert", write_args(f"k_burst_{n}", blocks=block))
                    )
                except Exception:  # the replica died under this call: not acknowledged
                    return
                if envelope["ok"]:
                    acknowledged.append(envelope)
                    if len(acknowledged) >= 8:
                        enough.set()

        try:
            async with mcp_http(server.url, "tok-editor") as client, anyio.create_task_group() as group:
                for n in range(40):
                    group.start_soon(fire, client, n)
                with anyio.move_on_after(patience(60)):
                    await enough.wait()
                server.process.kill()  # SIGKILL: no drain, no shutdown
                server.process.wait()
                group.cancel_scope.cancel()
        except Exception:  # the client's transport fails once its server is gone: expected here
            pass
        assert server.process.returncode == -9, "the replica was killed mid-burst"
    assert len(acknowledged) >= 8
    store = open_store(seeded)
    try:
        trail = [r for r in store.audit_trail(limit=1000) if r["commandName"] == "page.block.insert"]
        with store.transaction(write=False) as conn:
            ledger = conn.execute(
                "SELECT command_id FROM idempotency WHERE idem_key LIKE 'k_burst_%'"
            ).fetchall()
            history = conn.execute(
                "SELECT revision, command_id FROM page_history WHERE workspace_id = 'ws_1' AND page_id = 'doc_1'"
            ).fetchall()
            (revision,) = conn.execute(
                "SELECT revision FROM pages WHERE workspace_id = 'ws_1' AND id = 'doc_1'"
            ).fetchone()
            texts = {row[0] for row in conn.execute("SELECT text FROM blocks WHERE text LIKE 'burst %'")}
    finally:
        store.close()
    written = {r["commandId"] for r in trail if r["effect"] == "write"}
    for envelope in acknowledged:
        assert envelope["audit"]["commandId"] in written, "an acknowledged write is in the audit trail"
    assert {row[0] for row in ledger} == written, "the ledger and the audit trail agree"
    assert {row[1] for row in history} == written and len(history) == len(written) == revision - 1
    assert len(texts) == len(written), "every committed write's block is there, and only those"


def test_placeholders_are_translated_outside_string_literals_only() -> None:
    from mnote_mcp.kernel.postgres.database import translate

    assert translate("SELECT 1 FROM t WHERE a = ? AND b LIKE 'x_%?' AND c % 2 = ?") == (
        "SELECT 1 FROM t WHERE a = %s AND b LIKE 'x_%%?' AND c %% 2 = %s"
    )
    assert translate("SELECT 'it''s ?', ?") == "SELECT 'it''s ?', %s"
    assert translate("SELECT x::text FROM t WHERE a = :a AND b < :b_2 AND c = ':c'") == (
        "SELECT x::text FROM t WHERE a = %(a)s AND b < %(b_2)s AND c = ':c'"
    )


def test_a_pipelined_write_fails_whole_with_the_first_error(
    pg_server: PgServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A write's statements are sent without waiting for their results (pipeline mode): a failure among
    them still fails the transaction whole, with that statement's own error (a ledger collision stays
    retryable), and the pooled connection comes back clean; a read is not pipelined."""
    from psycopg import errors as pg_errors
    from psycopg.pq import PipelineStatus

    from mnote_mcp.kernel.postgres.database import RETRYABLE, PgConnection, PgDatabase

    def write(*statements: tuple[str, tuple[Any, ...]], refuse: bool = False, pause: float = 0) -> None:
        with db.transaction(write=True) as conn:
            assert conn.raw.pgconn.pipeline_status == PipelineStatus.ON
            for sql, params in statements:
                conn.execute(sql, params)
                time.sleep(pause)  # (the answer is in before the next is sent: that one reads it)
            if refuse:  # a checkpoint refusing after queued writes
                raise MnoteError(ErrorCode.CONFLICT, Reason.GENERIC)

    def rows(conn: PgConnection) -> list[tuple[Any, ...]]:
        return conn.execute("SELECT k, v FROM t ORDER BY k").fetchall()

    caplog.set_level(logging.WARNING, logger="psycopg")
    db = PgDatabase(pg_server.database(), pool_size=1)  # one connection: every transaction reuses it
    update = ("UPDATE t SET v = ? WHERE k = ?", ("changed", 1))
    collide = ("INSERT INTO t VALUES (?, ?)", (1, "again"))  # not awaited: the error comes later
    try:
        with db.connection() as raw:
            raw.execute("CREATE TABLE t (k int PRIMARY KEY, v text NOT NULL)")
            raw.execute("INSERT INTO t VALUES (1, 'one')")
        with pytest.raises(pg_errors.UniqueViolation) as caught:
            write(update, ("INSERT INTO t VALUES (?, ?)", (2, "two")), collide, update, update, pause=0.05)
        assert isinstance(caught.value, RETRYABLE)
        with pytest.raises(pg_errors.UniqueViolation):
            write(update, collide, update)
        with pytest.raises(pg_errors.UniqueViolation):  # the last before the COMMIT, as the ledger's
            write(update, collide)
        with pytest.raises(MnoteError):
            write(update, refuse=True)
        with db.transaction(write=False) as conn:
            assert conn.raw.pgconn.pipeline_status == PipelineStatus.OFF
            assert rows(conn) == [(1, "one")], "nothing of a failed write committed"
        with db.transaction(write=True) as conn:
            conn.executemany("INSERT INTO t VALUES (?, ?)", [(4, "four")])
            conn.executemany("INSERT INTO t VALUES (?, ?)", [(5, "five"), (6, "six")])
            conn.execute("UPDATE t SET v = ? WHERE k = ?", ("uno", 1))
            assert conn.execute("SELECT count(*) FROM t").fetchone() == (4,), "it reads its own writes"
        with db.transaction(write=False) as conn:
            assert rows(conn) == [(1, "uno"), (4, "four"), (5, "five"), (6, "six")]
    finally:
        db.close()
    # nothing left for psycopg to clean up (a pipeline ended with results unread)
    assert [r.getMessage() for r in caplog.records if r.name.startswith("psycopg")] == []


def test_a_page_read_is_statements_of_their_own_and_never_mixes_two_revisions(
    seeded: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole-page read sends no `BEGIN` or `COMMIT`: the checkpoints' query alone when the page cache
    holds that revision, else the tree query and the page's stamp again. A write committed between
    the checkpoints' query and the tree query (another replica's) sends the read round again in one snapshot:
    the answer is one revision, never the old rows under the new page row or the reverse."""
    import psycopg

    from mnote_mcp.kernel.store import rows
    from mnote_mcp.kernel.store.rows import read_tree

    sent: list[str] = []
    real_execute = psycopg.Connection.execute

    elsewhere: list[bool] = []

    def counted(self: psycopg.Connection[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        if not elsewhere:  # (the reading store's statements only)
            sent.append(str(query).split(None, 1)[0])
        return real_execute(self, query, *args, **kwargs)

    query = PageQuery("ws_1", "doc_1", "user_editor", Correlation("s", "r", "c", "t"))
    store, other = open_store(seeded), open_store(seeded)
    edits = iter(range(100))

    def edit_elsewhere() -> None:
        n = next(edits)
        elsewhere.append(True)
        payload = {"blockId": "p_1", "text": f"changed elsewhere {n}"}
        other.execute(
            Command(
                "page.block.update",
                "ws_1",
                "doc_1",
                "user_editor",
                query.correlation,
                f"k{n}",
                False,
                payload,
            )
        )
        elsewhere.clear()

    def texts(page: PageView) -> list[str]:
        return [block["text"] for block in page["blocks"]]

    try:
        first = store.get_page(query)
        monkeypatch.setattr(psycopg.Connection, "execute", counted)
        assert store.get_page(query) == first
        assert sent == ["SELECT"], sent
        edit_elsewhere()
        sent.clear()
        changed = store.get_page(query)
        assert sent == ["SELECT", "SELECT", "SELECT"], sent
        assert changed["revision"] == first["revision"] + 1 and "changed elsewhere 0" in texts(changed)

        def a_write_then_the_tree(conn: Any, workspace_id: str, page_id: str) -> Any:
            monkeypatch.setattr(rows, "read_tree", read_tree)
            edit_elsewhere()  # commits after the page row was read, before the tree is
            return read_tree(conn, workspace_id, page_id)

        monkeypatch.setattr(rows, "read_tree", a_write_then_the_tree)
        edit_elsewhere()  # (so the cache misses)
        sent.clear()
        raced = store.get_page(query)
        assert raced["revision"] == first["revision"] + 3 and "changed elsewhere 2" in texts(raced)
        assert sent == ["SELECT", "SELECT", "SELECT", "BEGIN", "SELECT", "SELECT", "COMMIT"], sent
        with pytest.raises(MnoteError) as refused:  # the checkpoints still refuse on the short path
            store.get_page(PageQuery("ws_1", "doc_1", "user_outsider", query.correlation))
        assert refused.value.code == ErrorCode.PERMISSION_DENIED
    finally:
        store.close()
        other.close()


# -- search ------------------------------------------------------------------------------------

QUERIES = (
    "项目计划",
    "预算",
    "计",
    "東京",
    "オフィス",
    "markdown",
    "export*",
    "exporter",
    "the",
    "pdf",
    "release notes",
    "供应商 两周",
    "chapter",
    "secret*",
    "nothing_here",
)


async def _search_answers(db: Path | str, actor: str) -> list[Any]:
    answers: list[Any] = []
    async with connect(db, actor=actor) as client:
        write = await call(
            client, "mnote.block.update", **write_args("k_s", blockId="p_1", text="蓝色的海洋 Exporter")
        )
        assert write["ok"], write["error"]
        for query in (*QUERIES, "海洋", "海"):
            arguments: dict[str, Any] = {**IDS, "query": query, "limit": 2}
            envelope = await call(client, "mnote.page.search", **arguments)
            result = envelope["result"] if envelope["ok"] else envelope["error"]
            if envelope["ok"]:
                result = {
                    "hits": [{k: v for k, v in hit.items() if k != "updatedAt"} for hit in result["hits"]],
                    "more": "nextCursor" in result,
                }
                if "nextCursor" in envelope["result"]:
                    following: dict[str, Any] = {
                        **IDS,
                        "query": query,
                        "cursor": envelope["result"]["nextCursor"],
                    }
                    rest = await call(client, "mnote.page.search", **following)
                    result["rest"] = [hit["documentId"] for hit in rest["result"]["hits"]]
            answers.append((query, result))
    return answers


@pytest.mark.parametrize("actor", ["user_editor", "user_owner"])
async def test_search_on_postgresql_answers_as_on_sqlite(
    pg_server: PgServer, tmp_path: Path, actor: str
) -> None:
    """The same pages, in the same order, with the same snippets, for CJK, Japanese, mixed and Latin
    queries, prefixes, titles, a page written just before, and the next page of hits."""
    from tests.unit.tools.test_search import PAGES

    sqlite_db = store_with_pages(tmp_path / "search.db", FIXTURE, *PAGES)
    data = read_fixture(FIXTURE)
    data["workspaces"][0]["pages"] += PAGES
    url = pg_server.database()
    store = open_store(url)
    try:
        load_fixture(store, data)
    finally:
        store.close()
    expected = await _search_answers(sqlite_db, actor)
    assert any(result["hits"] for _, result in expected if isinstance(result, dict)), (
        "queries that find pages"
    )
    assert await _search_answers(url, actor) == expected
