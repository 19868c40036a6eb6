"""transports/observe.py: `/readyz` answers from a bounded, cached, single round trip; refusals are
counted and logged without flooding; the metrics endpoint serves only `/metrics`, and only to the
bearer of its token when it has one."""

from __future__ import annotations

import logging

import anyio
import httpx2
import pytest
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from mnote_mcp.base.logs import Throttle
from mnote_mcp.base.telemetry.metrics import Metrics
from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.transports.observe import Readiness, Refusals, metrics_app, refusal_reason
from tests.support.timing import patience

pytestmark = pytest.mark.anyio


class Store:
    """A store's round trip that answers, fails or hangs as told, counting its round trips."""

    def __init__(self) -> None:
        self.trips = 0
        self.fail: MnoteError | None = None
        self.hang = False

    async def check(self) -> None:
        self.trips += 1
        if self.hang:
            await anyio.sleep_forever()
        if self.fail is not None:
            raise self.fail


def unreachable() -> MnoteError:
    return MnoteError(ErrorCode.RUNTIME_UNAVAILABLE, Reason.STORE_UNREACHABLE, {"cause": "store_unreachable"})


async def test_ready_then_unready_with_the_stores_cause_then_ready_again() -> None:
    store = Store()
    readiness = Readiness(store.check, timeout=5, cache=0)
    assert await readiness.answer() is None
    store.fail = unreachable()
    assert await readiness.answer() == "store_unreachable"
    store.fail = None
    assert await readiness.answer() is None
    assert store.trips == 3


async def test_many_probes_cost_one_round_trip_per_cache_interval() -> None:
    store = Store()
    readiness = Readiness(store.check, timeout=5, cache=60)
    async with readiness.running():
        answers: list[str | None] = []

        async def probe() -> None:
            answers.append(await readiness.answer())

        async with anyio.create_task_group() as group:
            for _ in range(50):
                group.start_soon(probe)
        answers.append(await readiness.answer())
    assert answers == [None] * 51
    assert store.trips == 1


async def test_a_hanging_store_is_unready_within_the_timeout_and_never_checked_twice_at_once() -> None:
    store = Store()
    store.hang = True
    readiness = Readiness(store.check, timeout=0.3, cache=0)
    async with readiness.running():
        with anyio.fail_after(patience(10)):
            started = anyio.current_time()
            assert await readiness.answer() == "timeout"
            assert await readiness.answer() == "timeout"
            elapsed = anyio.current_time() - started
    assert elapsed < patience(
        5
    )  # two probes, each bounded by the timeout (0.3 s), with a loaded machine's margin
    assert store.trips <= 2


async def test_a_stopping_server_is_not_ready_without_asking_the_store() -> None:
    store = Store()
    readiness = Readiness(store.check, timeout=5, cache=0, stopping=lambda: True)
    assert await readiness.answer() == "shutting_down"
    assert store.trips == 0


async def test_readyz_says_503_and_why() -> None:
    store = Store()
    store.fail = unreachable()
    readiness = Readiness(store.check, timeout=5, cache=0)
    app = Starlette(routes=[Route("/readyz", readiness.endpoint)])
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://t") as http:
        refused = await http.get("/readyz")
        store.fail = None
        ready = await http.get("/readyz")
    assert (refused.status_code, refused.json()) == (
        503,
        {"status": "unready", "reason": "store_unreachable"},
    )
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
    assert refused.headers["cache-control"] == "no-store"


def test_refusal_reasons() -> None:
    assert refusal_reason(404, "/mcp") == "unknown_session"
    assert refusal_reason(404, "/messages/a/") == "unknown_session"
    assert refusal_reason(404, "/nothing") == "not_found"
    assert refusal_reason(401, "/mcp") == "unauthorized"
    assert refusal_reason(429, "/mcp") == "too_many_for_token"
    assert refusal_reason(500, "/mcp") == "server_error"
    assert refusal_reason(418, "/mcp") == "other"


def answering(status: int, headers: list[tuple[bytes, bytes]] | None = None) -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": status, "headers": headers or []})
        await send({"type": "http.response.body", "body": b""})

    return app


async def test_refusals_are_counted_and_logged_with_the_challenges_reason_never_the_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    counted: list[tuple[int, str]] = []
    challenge = [(b"www-authenticate", b'Bearer error="invalid_token", error_description="token expired"')]
    app = Refusals(answering(401, challenge), lambda status, reason: counted.append((status, reason)))
    caplog.set_level(logging.INFO, logger="mnote_mcp")
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://t") as http:
        await http.post("/mcp", headers={"Authorization": "Bearer secret-token-value"})
    assert counted == [(401, "unauthorized")]
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused")]
    assert line == "refused 401 unauthorized: POST /mcp from 127.0.0.1: token expired"
    assert "secret-token-value" not in caplog.text


async def test_a_probes_503_is_its_answer_not_a_refusal() -> None:
    counted: list[tuple[int, str]] = []
    app = Refusals(answering(503), lambda status, reason: counted.append((status, reason)))
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://t") as http:
        await http.get("/readyz")
        await http.post("/mcp")
    assert counted == [(503, "too_many")]


async def test_a_flood_of_refusals_logs_a_few_lines_and_counts_them_all(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    counted: list[tuple[int, str]] = []
    throttle = Throttle(burst=3, window=60, clock=lambda: now[0])
    app = Refusals(answering(404), lambda status, reason: counted.append((status, reason)), throttle)
    caplog.set_level(logging.INFO, logger="mnote_mcp")
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://t") as http:
        for _ in range(100):
            await http.post("/mcp")
        now[0] = 61.0
        await http.post("/mcp")
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused")]
    assert len(counted) == 101
    assert len(lines) == 4
    assert lines[-1].endswith("(97 more of these in the minute before, not logged)")


async def test_the_metrics_endpoint_serves_metrics_only_and_to_its_token_only() -> None:
    metrics = Metrics()
    metrics.refused(401, "unauthorized")
    open_app, guarded = metrics_app(metrics.asgi(), None), metrics_app(metrics.asgi(), "s3cret")
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=open_app), base_url="http://t") as http:
        text = (await http.get("/metrics")).text
        assert (await http.get("/other")).status_code == 404
    assert 'mnote_http_refused_total{reason="unauthorized",status="401"} 1.0' in text
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=guarded), base_url="http://t") as http:
        assert (await http.get("/metrics")).status_code == 401
        assert (await http.get("/metrics", headers={"Authorization": "Bearer wrong"})).status_code == 401
        allowed = await http.get("/metrics", headers={"Authorization": "Bearer s3cret"})
    assert allowed.status_code == 200 and "mnote_build_info" in allowed.text
