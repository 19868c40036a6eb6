"""The conformance kit against the reference runtime in process: every check passes; an operation
added to the protocol's table is checked without a change to the kit; a used seed stops the run at its
gate; a runtime that does not answer is bounded by the kit's timeouts.

The reference runtime as real processes (`runtime serve` on SQLite and PostgreSQL, `runtime cli`), and
the command line's report forms and exit status: tests/e2e/test_runtime_check.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from mnote_mcp.conformance.kit import plan, run_kit
from mnote_mcp.conformance.options import KitOptions
from mnote_mcp.kernel import protocol
from mnote_mcp.kernel.port import PageRef, PagesQuery
from mnote_mcp.kernel.protocol import Operation, listed, modeled
from tests.support import wrong_runtimes

pytestmark = pytest.mark.anyio
OPTIONS = KitOptions(tag="ref", limits=wrong_runtimes.LIMITS)


@pytest.fixture
async def reference(tmp_path: Path) -> AsyncIterator[httpx2.AsyncBaseTransport]:
    async with wrong_runtimes.runtime(tmp_path, OPTIONS.tag) as runtime:
        yield runtime.transport


@pytest.mark.slow
async def test_the_reference_runtime_passes_every_check(reference: httpx2.AsyncBaseTransport) -> None:
    report = await run_kit("http://runtime", OPTIONS, transport=reference)
    statuses = {result.name: result.status for result in report.results}
    assert [name for name, status in statuses.items() if status != "pass"] == ["handshake.service_token"], (
        report.text()
    )
    assert report.passed
    assert list(statuses) == [check.name for check in plan()], "one line per check, in the plan's order"
    for op in protocol.OPERATIONS:
        for kind in ("differential", "schema", "coverage"):
            assert statuses[f"{kind}.{op}"] == "pass"


@pytest.mark.slow
async def test_the_service_token_is_required_and_checked(tmp_path: Path) -> None:
    """With a token the kit also checks that the runtime refuses requests without it."""
    from mnote_mcp.conformance.seed import Scratch
    from mnote_mcp.kernel.sqlite.opening import open_store
    from mnote_mcp.kernel.store.fixtures import load_fixture
    from mnote_mcp.kernel.store.kernel import StoreKernel
    from mnote_mcp.runtime.http_app import create_app

    store = open_store(tmp_path / "token.db", limits=wrong_runtimes.LIMITS)
    load_fixture(store, Scratch("tok").fixture())
    kernel = StoreKernel(store)
    app = create_app(kernel, limits=wrong_runtimes.CLIENT_LIMITS, token="s3cret")
    try:
        options = KitOptions(tag="tok", limits=wrong_runtimes.LIMITS, skip=("limits.*", "idempotency.*"))
        good = await run_kit(
            "http://runtime", options, token="s3cret", transport=httpx2.ASGITransport(app=app)
        )
        bad = await run_kit("http://runtime", options, token="wrong", transport=httpx2.ASGITransport(app=app))
    finally:
        await kernel.aclose()
    assert good.passed and {r.name: r.status for r in good.results}["handshake.service_token"] == "pass"
    skipped = {r.name: r.why for r in good.results if r.status == "skip"}
    assert set(skipped) == {c.name for c in plan() if c.name.startswith(("limits.", "idempotency."))}
    assert set(skipped.values()) == {"--skip"}
    assert not bad.passed, "a token the runtime refuses fails the run"
    failed = {r.name: r.why for r in bad.results if r.status == "fail"}
    assert "refused the service token" in failed["seed.loaded"]


@pytest.mark.slow
async def test_a_new_operation_is_checked_the_day_it_is_declared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What-it-must-show item 3: a row added to `protocol.OPERATIONS` (here a POST listing of the
    readable pages; the reference runtime serves every row of the table) gets its schema and
    differential checks and a coverage line saying the kit has no scenario for it, with no edit to the
    kit."""
    readable = Operation(
        "readable_pages",
        "POST",
        "/v1/pages/readable",
        "pages",
        modeled(PagesQuery),
        listed(PageRef),
        lambda kernel, query: kernel.list_pages(query),
        carrier="query",
    )
    monkeypatch.setitem(protocol.OPERATIONS, readable.name, readable)
    async with wrong_runtimes.runtime(tmp_path, "newop") as runtime:
        report = await run_kit(
            "http://runtime",
            KitOptions(tag="newop", limits=wrong_runtimes.LIMITS),
            transport=runtime.transport,
        )
    results = {result.name: result for result in report.results}
    assert results["differential.readable_pages"].status == "pass", report.text()
    assert "from its schema" in results["differential.readable_pages"].why
    assert results["schema.readable_pages"].status == "pass"
    assert results["schema.readable_pages"].why.startswith("1 answers")
    coverage = results["coverage.readable_pages"]
    assert coverage.status == "skip" and "no scenario for readable_pages" in coverage.why
    assert report.passed


@pytest.mark.slow
async def test_the_new_operation_of_a_runtime_that_does_not_serve_it_fails_its_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Declared in the table but answered 404 by the runtime (one built before the row): its generic
    checks say so; nothing else does."""
    async with wrong_runtimes.runtime(tmp_path, "older") as runtime:  # routes made before the row exists
        readable = Operation(
            "readable_pages",
            "POST",
            "/v1/pages/readable",
            "pages",
            modeled(PagesQuery),
            listed(PageRef),
            lambda kernel, query: kernel.list_pages(query),
            carrier="query",
        )
        monkeypatch.setitem(protocol.OPERATIONS, readable.name, readable)
        report = await run_kit(
            "http://runtime",
            KitOptions(tag="older", limits=wrong_runtimes.LIMITS),
            transport=runtime.transport,
        )
    statuses = {result.name: result.status for result in report.results}
    assert {name for name, status in statuses.items() if status == "fail"} == {"schema.readable_pages"}
    assert statuses["differential.readable_pages"] == "skip"


@pytest.mark.slow
async def test_a_used_seed_stops_the_run_at_its_gate(reference: httpx2.AsyncBaseTransport) -> None:
    assert (await run_kit("http://runtime", OPTIONS, transport=reference)).passed
    again = await run_kit("http://runtime", OPTIONS, transport=reference)
    results = {result.name: result for result in again.results}
    assert results["seed.loaded"].status == "fail" and "a seed serves one run" in results["seed.loaded"].why
    ran = {name for name, result in results.items() if result.status != "skip"}
    assert ran <= {"handshake.protocol", "handshake.unknown_operation", "seed.loaded"} | {
        f"{kind}.{op}" for kind in ("schema", "coverage") for op in protocol.OPERATIONS
    }
    assert all(
        "seed.loaded" in results[name].why for name in results if name.startswith(("reads.", "limits."))
    )


def _silent() -> Starlette:
    async def hang(request: Request) -> JSONResponse:
        await anyio.sleep(60)
        return JSONResponse({})

    return Starlette(routes=[Route("/{path:path}", hang, methods=["GET", "POST"])])


@pytest.mark.slow
async def test_a_runtime_that_never_answers_is_bounded_by_the_request_timeout() -> None:
    options = KitOptions(tag="silent", request_timeout=0.2, total_timeout=60)
    with anyio.fail_after(30):
        report = await run_kit("http://runtime", options, transport=httpx2.ASGITransport(app=_silent()))
    results = {result.name: result for result in report.results}
    assert results["handshake.protocol"].status == "fail"
    assert "no reply within 0.2 s" in results["handshake.protocol"].actual
    assert results["seed.loaded"].status == "fail" and "no reply within 0.2 s" in results["seed.loaded"].why
    assert results["schema.get_page"].status == "fail"
    assert results["reads.page_view"].status == "skip"


@pytest.mark.slow
async def test_the_whole_run_is_bounded_by_the_total_timeout() -> None:
    options = KitOptions(tag="silent", request_timeout=30, total_timeout=0.5)
    with anyio.fail_after(30):
        report = await run_kit("http://runtime", options, transport=httpx2.ASGITransport(app=_silent()))
    results = {result.name: result for result in report.results}
    assert results["handshake.protocol"].status == "fail"
    assert "interrupted: --total-timeout 0.5 s" in results["handshake.protocol"].why
    assert results["seed.loaded"].status == "skip" and "--total-timeout" in results["seed.loaded"].why
    assert not report.passed
