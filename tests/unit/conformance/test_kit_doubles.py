"""Deliberately wrong runtimes fail exactly the checks that name their defect, and no other.

Each double is the reference runtime with one defect (tests/support/wrong_runtimes.py), run in process
over HTTP; the kit must fail the checks listed for it, pass every other check it runs, and skip only
what it skips for the reference runtime (no service token to refuse) and, where a reply broke the
protocol, the checks that needed it. The reference runtime itself fails nothing
(tests/unit/conformance/test_kit.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mnote_mcp.conformance.kit import run_kit
from mnote_mcp.conformance.options import KitOptions
from tests.support import wrong_runtimes
from tests.support.wrong_runtimes import Front

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
NO_TOKEN = {"handshake.service_token"}

DOUBLES: list[tuple[str, Front | None, set[str], set[str]]] = [
    (
        "ignores_idempotency_key",
        wrong_runtimes.IgnoresKeys,
        {
            "idempotency.replay",
            "idempotency.conflict",
            "idempotency.dry_run_replay",
            "idempotency.concurrent",
        },
        set(),
    ),
    (
        "drops_base_revision",
        wrong_runtimes.DropsBaseRevision,
        {"concurrency.stale_revision", "concurrency.block_rebase"},
        set(),
    ),
    ("leaks_restricted_title", wrong_runtimes.LeaksTitle, {"refusals.reveal_nothing"}, set()),
    (
        "wrong_shape_of_page_revisions",
        wrong_runtimes.WrongRevisionsShape,
        {"schema.page_revisions"},
        {"differential.page_revisions", "reads.page_revisions"},
    ),
    ("misreports_protocol_version", wrong_runtimes.WrongVersion, {"handshake.protocol"}, set()),
    ("skips_page_size_limit", None, {"limits.page_blocks", "limits.page_bytes"}, set()),
    ("command_ids_the_audit_cannot_find", wrong_runtimes.ForeignCommandIds, {"audit.command_id"}, set()),
]


@pytest.mark.parametrize(
    ("defect", "front", "failing", "stopped"), DOUBLES, ids=[defect for defect, *_ in DOUBLES]
)
async def test_a_wrong_runtime_fails_exactly_the_checks_naming_its_defect(
    tmp_path: Path, defect: str, front: Front | None, failing: set[str], stopped: set[str]
) -> None:
    limits = wrong_runtimes.UNLIMITED if defect == "skips_page_size_limit" else wrong_runtimes.LIMITS
    tag = defect[:32]
    async with wrong_runtimes.runtime(tmp_path, tag, front=front, limits=limits) as runtime:
        report = await run_kit(
            "http://runtime", KitOptions(tag=tag, limits=wrong_runtimes.LIMITS), transport=runtime.transport
        )
    by_status = {
        status: {result.name for result in report.results if result.status == status}
        for status in ("pass", "fail", "skip")
    }
    assert by_status["fail"] == failing, report.text()
    assert by_status["skip"] == NO_TOKEN | stopped, report.text()
    assert not report.passed
    for result in report.results:
        if result.status == "fail":
            assert result.request or result.actual, f"{result.name} shows what was asked and answered"
