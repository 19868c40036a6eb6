"""The deployment docs/deploy.md describes, run: nginx (Debian's package) with the shipped
examples/nginx.postgres.conf (only addresses, ports and file paths changed) over TLS, in front of two
replicas (`--session-tag a`, `b`) on one PostgreSQL (pgserver), driven by the SDK client.

Twenty clients, each from its own loopback address (nginx limits per address, as it would per agent):
ten in the 2025-11-25 protocol (a stateful session on stateful replicas) and ten in the 2026-07-28
protocol (no session). Each writes a block, read by all the others through whichever replica serves
them; then replica `a` is killed (SIGKILL) while they write on. A client whose call failed retries it
with the same idempotency key (a stateful one whose replica died opens a new session first). What
must hold: no session lost before the kill (no 404), every request of a session served by the replica
its id names, every client's writes all acknowledged in the end, each exactly once in the store, and
every write acknowledged before, during or after the kill found there. The figures are printed (`-s`)
and recorded in docs/deploy.md.

Issue 23 found half the stateful sessions lost (404) through the old config's hash on the session id.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mnote_mcp.kernel.databases.stores import open_store
from mnote_mcp.kernel.port import PageKey
from mnote_mcp.surface.resources.uris import page_uri
from tests.support.helpers import FIXTURE, RAW_INITIALIZE, ROOT, envelope_of, page_args, write_args
from tests.support.http_helpers import ResourceUpdates, RunningServer, http_server, wait_until, write_tokens
from tests.support.nginx import Certificate, Proxy, free_port, make_certificate, nginx, shipped_config
from tests.support.postgres import PgServer, seeded_database, start, start_server, stop
from tests.support.timing import patience

TOKEN = "tok-deploy"
CLIENTS = 10  # of each protocol era
WRITES_BEFORE = 2  # per client, before the kill
WRITES_AFTER = 4  # per client, while and after the kill
KILL_AFTER = 8  # writes acknowledged after the cross-replica reads, then replica a is killed
_LIMITS = (ROOT / "examples" / "nginx.postgres.conf").read_text(encoding="utf-8")
BURST = int(re.findall(r"limit_req zone=\S+ burst=(\d+)", _LIMITS)[0])  # requests let through at once
RATE = int(re.findall(r"limit_req_zone .* rate=(\d+)r/s", _LIMITS)[0])  # and then a second
DEADLINE = patience(120)  # seconds for the whole drive (it takes a few)


@dataclass
class Deployment:
    proxy: Proxy
    replicas: dict[str, RunningServer]
    certificate: Certificate
    db: str

    def address_of(self, tag: str) -> str:
        return self.replicas[tag].url.removeprefix("http://")


@contextmanager
def deployment(pg_server: PgServer, folder: Path, *replica_args: str) -> Iterator[Deployment]:
    db = seeded_database(pg_server, FIXTURE)
    tokens = write_tokens(folder / "tokens.json", {TOKEN: {"actorId": "user_editor"}})
    certificate = make_certificate(folder)
    with ExitStack() as stack:
        replicas = {
            tag: stack.enter_context(
                http_server(
                    db,
                    "--auth-file",
                    str(tokens),
                    "--session-tag",
                    tag,
                    "--allowed-hosts",
                    "127.0.0.1:*",
                    "--db-pool-size",
                    "4",
                    *replica_args,
                )
            )
            for tag in ("a", "b")
        }
        https_port, http_port = free_port(), free_port()
        site = shipped_config(
            {tag: server.url.removeprefix("http://") for tag, server in replicas.items()},
            http_port=http_port,
            https_port=https_port,
            certificate=certificate,
        )
        proxy = stack.enter_context(nginx(site, folder / "nginx", https_port=https_port, http_port=http_port))
        yield Deployment(proxy, replicas, certificate, db)


@asynccontextmanager
async def connect(
    deployment: Deployment, n: int, mode: str, message_handler: ResourceUpdates | None = None
) -> AsyncIterator[Client]:
    """The SDK client through the proxy over TLS, from loopback address 127.0.0.(n + 2)."""
    transport = httpx2.AsyncHTTPTransport(
        verify=deployment.certificate.client_context(), local_address=f"127.0.0.{n + 2}"
    )
    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {TOKEN}"}, timeout=patience(30), transport=transport
        ) as http,
        Client(
            streamable_http_client(f"{deployment.proxy.https_url}/mcp", http_client=http),
            mode=mode,
            message_handler=message_handler,
        ) as client,
    ):
        yield client


@dataclass
class Run:
    """What the clients did, for the checks and the printed figures."""

    acknowledged: dict[str, str] = field(default_factory=dict)  # idempotency key -> block id
    acknowledged_before_kill: set[str] = field(default_factory=set)
    opened: Counter[str] = field(default_factory=Counter)  # sessions opened, by era
    failed_before_kill: list[str] = field(default_factory=list)
    failed_after_kill: Counter[str] = field(default_factory=Counter)
    cross_reads: list[bool] = field(default_factory=list)  # a client saw every first-phase write
    arrived: int = 0
    first_phase_done: anyio.Event = field(default_factory=anyio.Event)
    enough_after: anyio.Event = field(default_factory=anyio.Event)
    reads_done: anyio.Event = field(default_factory=anyio.Event)  # every client made its cross read
    killed: anyio.Event = field(default_factory=anyio.Event)
    log_lines_at_kill: int = 0
    requests_at_kill: int = 0


async def drive(deployment: Deployment, n: int, mode: str, run: Run) -> None:
    """One client: WRITES_BEFORE writes, the cross-replica read, WRITES_AFTER writes; a failed call is
    retried with its key, on a new session where the old one failed."""
    keys = [f"k_{mode}_{n}_{i}" for i in range(WRITES_BEFORE + WRITES_AFTER)]
    pending = list(keys)
    while pending:
        try:
            async with connect(deployment, n, mode) as client:
                run.opened[mode] += 1
                while pending:
                    if len(pending) == WRITES_AFTER and not run.first_phase_done.is_set():
                        await first_phase_barrier(client, run)
                    key = pending[0]
                    blocks = [{"type": "paragraph", "text": f"deploy {key}"}]
                    arguments = write_args(key, blocks=blocks, position="end")
                    envelope = envelope_of(await client.call_tool("mnote.block.insert", arguments))
                    if not envelope["ok"]:
                        raise RuntimeError(f"{envelope['error']['code']}: {envelope['error'].get('details')}")
                    (block_id,) = envelope["result"]["blockIds"]
                    run.acknowledged[key] = block_id
                    if not run.killed.is_set():
                        run.acknowledged_before_kill.add(key)
                    pending.pop(0)
                    after = len(run.acknowledged) - 2 * CLIENTS * WRITES_BEFORE
                    if run.first_phase_done.is_set() and after >= KILL_AFTER:
                        run.enough_after.set()
        except Exception as exc:  # the call or the session failed: the same key again, on a new session
            reason = f"{type(exc).__name__}: {exc}"[:200]
            if run.killed.is_set():
                run.failed_after_kill[reason.split(":")[0]] += 1
            else:
                run.failed_before_kill.append(reason)
            await anyio.sleep(0.1)


async def first_phase_barrier(client: Client, run: Run) -> None:
    """Wait for every client's first writes, then read the page: all of them must be there, whichever
    replica made them and whichever serves this read."""
    run.arrived += 1
    if run.arrived == 2 * CLIENTS:
        run.first_phase_done.set()
    await run.first_phase_done.wait()
    # every client's first writes (acknowledged, so committed, before the barrier opened); not the writes
    # acknowledged while this read is on its way
    first = {block for key, block in run.acknowledged.items() if int(key.rsplit("_", 1)[1]) < WRITES_BEFORE}
    page = envelope_of(await client.call_tool("mnote.page.get", page_args()))
    seen = {block["id"] for block in page["result"]["blocks"]}
    run.cross_reads.append(len(first) == 2 * CLIENTS * WRITES_BEFORE and first <= seen)
    if len(run.cross_reads) == 2 * CLIENTS:
        run.reads_done.set()


async def kill_replica_a(deployment: Deployment, run: Run) -> None:
    """SIGKILL replica a once enough writes came after the first phase and every client made its
    cross read (a slow client's read cut by the kill would be retried as a write, never read again)."""
    await run.enough_after.wait()
    with anyio.move_on_after(patience(120)):  # a read that failed is reported by the asserts, not by a hang
        await run.reads_done.wait()
    run.log_lines_at_kill = len(deployment.proxy.requests())
    run.requests_at_kill = len(run.acknowledged)
    replica = deployment.replicas["a"].process
    replica.kill()  # SIGKILL: no drain
    run.killed.set()
    await anyio.to_thread.run_sync(replica.wait)


def store_blocks(db: str) -> Counter[str]:
    """The texts of the page's blocks the clients wrote, counted (a write applied twice counts 2)."""
    store = open_store(db)
    try:
        with store.transaction(write=False) as conn:
            rows = conn.execute(
                "SELECT text FROM blocks WHERE workspace_id = 'ws_1' AND page_id = 'doc_1' AND text LIKE 'deploy %'"
            ).fetchall()
    finally:
        store.close()
    return Counter(text.removeprefix("deploy ") for (text,) in rows)


@pytest.mark.anyio
@pytest.mark.parametrize("replicas", ["stateful", "stateless"])
async def test_twenty_clients_through_nginx_lose_no_session_and_no_acknowledged_write(
    pg_server: PgServer, tmp_path: Path, replicas: str
) -> None:
    started = time.monotonic()
    extra = ["--stateless"] if replicas == "stateless" else []
    with deployment(pg_server, tmp_path, *extra) as deployed:
        run = Run()
        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as group:
                group.start_soon(kill_replica_a, deployed, run)
                for n in range(CLIENTS):
                    group.start_soon(drive, deployed, n, "legacy", run)
                    group.start_soon(drive, deployed, CLIENTS + n, "auto", run)
        assert deployed.replicas["a"].process.returncode == -9, "replica a was killed mid-run"
        log = deployed.proxy.requests()
        driven = time.monotonic() - started
    in_store = store_blocks(deployed.db)

    # the sessions: none lost before the kill, each served by the replica its id names
    assert not run.failed_before_kill, run.failed_before_kill
    before = log[: run.log_lines_at_kill]
    assert not [entry for entry in before if entry["status"] == "404"], "a session was lost before the kill"
    sessions = {entry["session"] for entry in log if entry["session"]}
    addresses = {tag: deployed.address_of(tag) for tag in ("a", "b")}
    served = [entry for entry in before if entry["session"] and entry["status"].startswith("2")]
    misrouted = [entry for entry in served if entry["upstream"] != addresses[entry["session"][0]]]
    assert not misrouted, misrouted[:3]
    tags = Counter(session.split(".")[0] for session in sessions)
    if replicas == "stateful":
        assert tags["a"] and tags["b"], f"sessions opened on both replicas: {tags}"
    else:
        assert not sessions, "stateless replicas make no session"
    by_replica = Counter(entry["upstream"] for entry in before if entry["method"] == "POST")
    assert set(addresses.values()) <= set(by_replica), f"both replicas served calls: {by_replica}"

    # the writes: read across replicas, all acknowledged in the end, each exactly once, none lost
    assert run.cross_reads == [True] * (2 * CLIENTS), "a client missed a write made on the other replica"
    written = (WRITES_BEFORE + WRITES_AFTER) * 2 * CLIENTS
    assert len(run.acknowledged) == written
    assert set(in_store) == set(run.acknowledged), "every acknowledged write is in the store, nothing else"
    assert set(in_store.values()) == {1}, "each write applied exactly once"

    figures = {
        "replicas": replicas,
        "clients": {"2025-11-25 (sessions)": CLIENTS, "2026-07-28 (stateless)": CLIENTS},
        "sessionsOpened": dict(run.opened),
        "sessionTags": dict(tags),
        "requestsThroughNginx": len(log),
        "postsByReplicaBeforeKill": {tag: by_replica[address] for tag, address in addresses.items()},
        "lostBeforeKill": 0,
        "crossReplicaReads": f"{sum(run.cross_reads)}/{len(run.cross_reads)}",
        "writesAcknowledged": len(run.acknowledged),
        "acknowledgedWhenKilled": run.requests_at_kill,
        "acknowledgedBeforeKillFoundInStore": len(run.acknowledged_before_kill & set(in_store)),
        "failuresAfterKillRetried": dict(run.failed_after_kill),
        "status404AfterKill": sum(1 for entry in log[run.log_lines_at_kill :] if entry["status"] == "404"),
        "status502AfterKill": sum(1 for entry in log[run.log_lines_at_kill :] if entry["status"] == "502"),
        "storeRowsForTheseWrites": sum(in_store.values()),
        "seconds": round(driven, 1),
    }
    print(f"\ndeployment figures: {json.dumps(figures)}")


@pytest.mark.anyio
async def test_a_subscription_through_nginx_hears_writes_made_through_the_other_replica(
    pg_server: PgServer, tmp_path: Path
) -> None:
    """A stateful session's event stream passes through the proxy as it is sent (proxy_buffering off):
    writes made by clients served by either replica reach the subscriber at once (their LISTEN/NOTIFY,
    the subscriber's replica polling only once an hour)."""
    doc_1 = page_uri(PageKey("ws_1", "doc_1"))
    with deployment(pg_server, tmp_path, "--watch-interval", "3600") as deployed:
        updates = ResourceUpdates()
        async with connect(deployed, 0, "legacy", message_handler=updates) as subscriber:
            await subscriber.subscribe_resource(doc_1)
            await anyio.sleep(0.5)  # the subscription's first look at the page has answered
            for n in range(1, 5):  # stateless clients: round robin, so both replicas write
                updates.arrived = anyio.Event()
                async with connect(deployed, n, "auto") as writer:
                    arguments = write_args(f"k_listen_{n}", blockId="p_1", text=f"write {n}")
                    envelope = envelope_of(await writer.call_tool("mnote.block.update", arguments))
                    assert envelope["ok"], envelope["error"]
                with anyio.fail_after(patience(10)):
                    await updates.arrived.wait()
        log = deployed.proxy.requests()
    writers = {entry["upstream"] for entry in log if not entry["session"] and entry["method"] == "POST"}
    assert writers == {deployed.address_of("a"), deployed.address_of("b")}, writers
    assert updates.uris == [doc_1] * 4


def test_the_proxy_redirects_plain_http_and_limits_each_client_address(tmp_path: Path) -> None:
    """No replica needed: the redirect to TLS and the per-address limits are nginx's own answers."""
    certificate = make_certificate(tmp_path)
    https_port, http_port = free_port(), free_port()
    nowhere = {tag: f"127.0.0.1:{free_port()}" for tag in ("a", "b")}
    site = shipped_config(nowhere, http_port=http_port, https_port=https_port, certificate=certificate)
    with nginx(site, tmp_path / "nginx", https_port=https_port, http_port=http_port) as proxy:
        redirect = httpx2.get(f"{proxy.http_url}/mcp", timeout=patience(10))
        assert redirect.status_code == 308
        assert redirect.headers["location"] == f"{proxy.https_url}/mcp"

        async def flood() -> Counter[int]:
            statuses: Counter[int] = Counter()
            async with httpx2.AsyncClient(
                verify=certificate.client_context(), timeout=patience(30)
            ) as client:

                async def one() -> None:
                    response = await client.post(f"{proxy.https_url}/mcp", json={})
                    statuses[response.status_code] += 1

                async with anyio.create_task_group() as group:
                    for _ in range(300):
                        group.start_soon(one)
            return statuses

        started = time.monotonic()
        statuses = anyio.run(flood)
        took = time.monotonic() - started
    # 300 requests at once from one address: the burst and what the rate lets
    # through while they arrive pass on to the (absent) replicas, 502; the rest are refused by the rate
    # or connection limit. A loaded machine sends them over seconds: the bound is the flood's own time.
    passed = BURST + math.ceil(RATE * took) + 1
    assert statuses[429] + statuses[502] == 300, statuses
    assert statuses[502] <= passed, (statuses, f"{took:.1f} s")
    assert statuses[429] >= 1 or passed >= 300, (statuses, f"{took:.1f} s")


@pytest.fixture(scope="module")
def own_pg() -> Iterator[PgServer]:
    """A PostgreSQL server only this module stops and starts (the session's is shared by other tests)."""
    yield from start_server()


def session_less(deployed: Deployment, http: httpx2.Client) -> list[int]:
    """What a client without a session gets through the proxy: an `initialize` (answered without the
    store) from each of four loopback addresses, as round robin spreads them over the replicas."""
    statuses = []
    for _ in range(4):
        response = http.post(
            f"{deployed.proxy.https_url}/mcp",
            json=RAW_INITIALIZE,
            headers={"Authorization": f"Bearer {TOKEN}", "Accept": "application/json, text/event-stream"},
        )
        statuses.append(response.status_code)
    return statuses


def answer_of(response: httpx2.Response) -> object:
    """A replica's JSON answer, or the start of nginx's own page (502: no live upstream)."""
    try:
        return response.json()
    except ValueError:
        return response.text[:60]


@pytest.mark.postgres
def test_readiness_probes_through_nginx_keep_the_replicas_in_service_during_an_outage(
    own_pg: PgServer, tmp_path: Path
) -> None:
    """A monitor probing `/readyz` through the proxy while the database is down gets each replica's
    own answer (503 `store_unreachable`), and the probes take no replica out of the upstream that
    carries calls: a session-less `initialize` (which the replicas answer without the store) still
    gets 200 during the outage and at once after it. Issue 34: the shipped config proxied `/readyz` to
    the calls' upstream with `http_503` counted as a failure and `max_fails=1`, so two probes
    disabled both replicas and nginx answered 502 to every session-less request for 5 s after the
    last probe, even with the database back."""
    with deployment(own_pg, tmp_path, "--ready-cache", "0", "--db-connect-timeout", "2") as deployed:
        with httpx2.Client(verify=deployed.certificate.client_context(), timeout=60) as http:
            assert session_less(deployed, http) == [200] * 4
            stop(own_pg)
            try:
                probes = [http.get(f"{deployed.proxy.https_url}/readyz") for _ in range(4)]
                during = session_less(deployed, http)
            finally:
                start(own_pg)
            after = session_less(deployed, http)
            ready = wait_until(lambda: http.get(f"{deployed.proxy.https_url}/readyz").status_code == 200, 30)
        log = deployed.proxy.requests()
    assert during == [200] * 4, f"session-less requests during the outage: {during}"
    assert after == [200] * 4, f"session-less requests once the database is back: {after}"
    answered = [(probe.status_code, answer_of(probe)) for probe in probes]
    unready = {"status": "unready", "reason": "store_unreachable"}
    assert answered == [(503, unready)] * 4, f"/readyz through the proxy during the outage: {answered}"
    assert ready, "/readyz through the proxy is 200 again once the database is back"
    assert not [entry for entry in log if entry["status"] == "502"], "nginx answered 502 (no live upstream)"
