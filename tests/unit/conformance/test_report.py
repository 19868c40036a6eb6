"""The kit's report in its three forms: one line per check (and a failure's request, expected and
actual answer under it), one JSON document, JUnit XML a CI reads; bounded however large the answers."""

from __future__ import annotations

import json
from xml.etree import ElementTree

import pytest

from mnote_mcp.conformance.report import Report, Result
from mnote_mcp.conformance.seed import Scratch
from mnote_mcp.conformance.session import CheckFailedError, Session, shown
from mnote_mcp.kernel.limits import PageLimits

RESULTS = [
    Result("handshake.protocol", "pass", "mnote-runtime/v1, version 0.1.0", "names v1", "Versioning"),
    Result(
        "idempotency.replay",
        "fail",
        "the retry answers the first outcome, replayed",
        "a retry never writes twice",
        "idempotency: a retry never writes twice",
        0.25,
        '{"command":"page.body.save"}',
        '{"replayed":true}',
        '{"replayed":false}',
    ),
    Result(
        "handshake.service_token", "skip", "no service token was given", "401 without it", "The service token"
    ),
]


def report() -> Report:
    return Report("http://127.0.0.1:8766", "http", "kit", "mnote-runtime/v1", list(RESULTS), 1.5)


def test_text_is_one_line_per_check_with_a_failures_request_expected_and_actual() -> None:
    lines = report().text().splitlines()
    assert lines[0] == "PASS handshake.protocol: mnote-runtime/v1, version 0.1.0"
    assert lines[1] == "FAIL idempotency.replay: the retry answers the first outcome, replayed"
    assert lines[2:6] == [
        '     request: {"command":"page.body.save"}',
        '     expected: {"replayed":true}',
        '     actual: {"replayed":false}',
        "     breaks: idempotency: a retry never writes twice",
    ]
    assert lines[6] == "SKIP handshake.service_token: no service token was given"
    assert lines[7].startswith("1 passed, 1 failed, 1 skipped in 1.5 s: http runtime http://127.0.0.1:8766")
    assert not report().passed
    assert Report("x", "cli", "kit", "v1", [RESULTS[0], RESULTS[2]]).passed, "skips do not fail a run"


def test_json_is_one_document_a_ci_can_read() -> None:
    document = json.loads(report().json())
    assert document["passed"] is False
    assert document["summary"] == {"pass": 1, "fail": 1, "skip": 1}
    assert [check["status"] for check in document["checks"]] == ["pass", "fail", "skip"]
    failure = document["checks"][1]
    assert failure["failure"] == {
        "request": '{"command":"page.body.save"}',
        "expected": '{"replayed":true}',
        "actual": '{"replayed":false}',
    }
    assert failure["breaks"] == "idempotency: a retry never writes twice"
    assert document["checks"][2]["why"] == "no service token was given"


def test_junit_has_a_testcase_per_check_with_failures_and_skips() -> None:
    root = ElementTree.fromstring(report().junit())
    (suite,) = root.findall("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    cases = suite.findall("testcase")
    assert [case.get("name") for case in cases] == [result.name for result in RESULTS]
    assert cases[0].get("classname") == "mnote-runtime-check.handshake"
    failure = cases[1].find("failure")
    assert failure is not None and failure.get("message") == "the retry answers the first outcome, replayed"
    assert failure.text is not None and 'actual: {"replayed":false}' in failure.text
    skipped = cases[2].find("skipped")
    assert skipped is not None and skipped.get("message") == "no service token was given"
    assert cases[0].find("failure") is None and cases[0].find("skipped") is None


@pytest.mark.parametrize("limit", [40, 300])
def test_a_failure_shows_its_values_cut_to_the_limit(limit: int) -> None:
    session = Session(wire=None, mirror=None, scratch=Scratch(), limits=PageLimits(), shown_chars=limit)  # type: ignore[arg-type]
    page = {"blocks": [{"id": f"b{i}", "text": "x" * 100} for i in range(1000)]}
    with pytest.raises(CheckFailedError) as caught:
        session.fail("differs", request=page, expected=page, actual=page)
    for shown_value in (caught.value.request, caught.value.expected, caught.value.actual):
        kept, _, rest = shown_value.partition("… (")
        assert len(kept) == limit and rest.endswith("more characters)")
    assert shown("short", limit) == "short"
