"""A run of the kit: the plan of checks, the mirror, the time bounds, the report.

`plan` reads `protocol.OPERATIONS` when it is called, so an operation added to the table gets its
`differential.`, `schema.` and `coverage.` checks without a change here. The order is: the handshake
and the seed (a gate: on data that is not the seed's nothing else runs), one differential probe per
operation, the scenarios, and then what is judged over the whole run (what refusals revealed, each
operation's replies against its schema, coverage).

Every request to the runtime has `--request-timeout`; the run as a whole has `--total-timeout`: the
check running when it passes fails ("interrupted"), the rest are skipped, and the report says so.
"""

from __future__ import annotations

import fnmatch
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
import httpx2

from mnote_mcp.conformance import guards, handshake, reads, writes
from mnote_mcp.conformance.checks import Check, operation_checks
from mnote_mcp.conformance.options import KitOptions
from mnote_mcp.conformance.probes import PROBES
from mnote_mcp.conformance.report import Report, Result, Status
from mnote_mcp.conformance.seed import Scratch
from mnote_mcp.conformance.session import (
    CheckFailedError,
    NotApplicableError,
    ProtocolBrokenError,
    Session,
    shown,
)
from mnote_mcp.conformance.wire import CliWire, HttpWire, Wire
from mnote_mcp.kernel import protocol
from mnote_mcp.kernel.relays.cli import parse_command_line
from mnote_mcp.kernel.sqlite.opening import open_store
from mnote_mcp.kernel.store.fixtures import load_fixture
from mnote_mcp.kernel.store.kernel import StoreKernel

# Judged over the whole run, and shown whatever stopped the rest.
ALWAYS = ("handshake.", "schema.", "coverage.")


def plan() -> list[Check]:
    """Every check, in the order a run makes them."""
    scenarios = [*reads.registry.checks, *writes.registry.checks, *guards.registry.checks]
    first = handshake.registry.checks
    per_operation = [
        operation_checks(op, PROBES, [*first, *scenarios]) for op in protocol.OPERATIONS.values()
    ]
    return [
        *first,
        *(differential for differential, _, _ in per_operation),
        *scenarios,
        *(schema for _, schema, _ in per_operation),
        *(coverage for _, _, coverage in per_operation),
    ]


def open_wire(
    target: str, *, token: str | None, timeout: float, transport: httpx2.AsyncBaseTransport | None = None
) -> Wire:
    """`http(s)://…` or `cli:PATH [ARGS...]`, as `--kernel` names a runtime."""
    if target.startswith("cli:"):
        return CliWire(parse_command_line(target[len("cli:") :]), timeout=timeout)
    if target.startswith(("http://", "https://")):
        return HttpWire(target, token=token, timeout=timeout, transport=transport)
    raise ValueError(
        f"{target!r}: name the runtime as http://HOST:PORT, https://HOST:PORT or cli:PATH [ARGS...]"
    )


async def run_kit(
    target: str,
    options: KitOptions,
    *,
    token: str | None = None,
    transport: httpx2.AsyncBaseTransport | None = None,
) -> Report:
    """Check the runtime `target` names (its seed for `options.tag` loaded); never raises for what the
    runtime does. `transport` (tests) carries HTTP in process."""
    wire = open_wire(target, token=token, timeout=options.request_timeout, transport=transport)
    try:
        return await run_checks(wire, options, target=target)
    finally:
        await wire.aclose()


async def run_checks(wire: Wire, options: KitOptions, *, target: str) -> Report:
    scratch = Scratch(options.tag)
    started = time.perf_counter()
    report = Report(target, wire.transport, scratch.tag, protocol.PROTOCOL)
    with tempfile.TemporaryDirectory(prefix="mnote-runtime-check-") as directory:
        store = open_store(Path(directory) / "mirror.db", limits=options.limits)
        try:
            load_fixture(store, scratch.fixture())
        except BaseException:
            store.close()
            raise
        mirror = StoreKernel(store)
        try:
            session = Session(wire, mirror, scratch, options.limits, options.shown_chars)
            report.results = await _run(plan(), session, options)
        finally:
            await mirror.aclose()
    report.seconds = time.perf_counter() - started
    return report


async def _run(checks: Sequence[Check], session: Session, options: KitOptions) -> list[Result]:
    results: list[Result] = []
    deadline = anyio.current_time() + options.total_timeout
    gate: str | None = None
    for check in checks:
        why = _not_run(check, session.wire.transport, options, gate, deadline)
        if why is not None:
            results.append(Result(check.name, "skip", why, check.guarantees, check.breaks))
            continue
        result = await _one(check, session, deadline, options.total_timeout)
        results.append(result)
        if check.name == handshake.SEED_GATE and result.status != "pass":
            gate = f"the scratch workspace is not the seed's ({handshake.SEED_GATE} {result.status})"
    return results


def _not_run(
    check: Check, transport: str, options: KitOptions, gate: str | None, deadline: float
) -> str | None:
    if any(fnmatch.fnmatchcase(check.name, pattern) for pattern in options.skip):
        return "--skip"
    if transport not in check.transports:
        return f"{' and '.join(sorted(check.transports))} only"
    if gate is not None and not check.name.startswith(ALWAYS):
        return gate
    if anyio.current_time() >= deadline and not check.name.startswith(("schema.", "coverage.")):
        return f"not run: --total-timeout {options.total_timeout:g} s was reached"
    return None


async def _one(check: Check, session: Session, deadline: float, total: float) -> Result:
    session.check = check.name
    started = time.perf_counter()

    def result(status: Status, why: str, failure: CheckFailedError | None = None) -> Result:
        return Result(
            check.name,
            status,
            why,
            check.guarantees,
            check.breaks,
            time.perf_counter() - started,
            *((failure.request, failure.expected, failure.actual) if failure else ()),
        )

    try:
        with anyio.CancelScope(deadline=deadline) as scope:
            note = await check.run(session)
        if scope.cancelled_caught:
            return result("fail", f"interrupted: --total-timeout {total:g} s was reached while it ran")
        return result("pass", note or "")
    except CheckFailedError as failed:
        return result("fail", failed.message, failed)
    except ProtocolBrokenError as blocked:
        why = f"stopped: a reply of {blocked.op} breaks the protocol (schema.{blocked.op}): {blocked.problem}"
        return result("fail" if check.name == handshake.SEED_GATE else "skip", why)
    except NotApplicableError as skipped:
        return result("skip", str(skipped))
    except Exception as exc:  # a bug of the kit's, or a reply it did not foresee: never a silent pass
        return result("fail", f"the check could not finish: {shown(repr(exc), 600)}")
