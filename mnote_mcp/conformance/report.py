"""What a run of the kit says: one line per check in text, one JSON document, or JUnit XML for a CI.

Every failure carries what the check asked, what the embedded kernel (or the protocol) expected and
what the runtime answered, each already cut to `--max-shown-chars` by the session, so the report stays
bounded however large a page the runtime sent back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal
from xml.etree import ElementTree

Status = Literal["pass", "fail", "skip"]
SUITE = "mnote-runtime-check"


@dataclass(frozen=True)
class Result:
    name: str
    status: Status
    why: str  # a pass's note, a skip's reason, a failure's message
    guarantees: str
    breaks: str
    seconds: float = 0.0
    request: str = ""
    expected: str = ""
    actual: str = ""


@dataclass
class Report:
    target: str
    transport: str
    tag: str
    protocol: str
    results: list[Result] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return not any(result.status == "fail" for result in self.results)

    def count(self, status: Status) -> int:
        return sum(result.status == status for result in self.results)

    @property
    def summary(self) -> str:
        return (
            f"{self.count('pass')} passed, {self.count('fail')} failed, {self.count('skip')} skipped"
            f" in {self.seconds:.1f} s: {self.transport} runtime {self.target}, tag {self.tag}"
        )

    def text(self) -> str:
        lines: list[str] = []
        for result in self.results:
            lines.append(
                f"{result.status.upper():4} {result.name}" + (f": {result.why}" if result.why else "")
            )
            if result.status == "fail":
                for label, value in (
                    ("request", result.request),
                    ("expected", result.expected),
                    ("actual", result.actual),
                ):
                    if value:
                        lines.append(f"     {label}: {value}")
                lines.append(f"     breaks: {result.breaks}")
        lines.append(self.summary)
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, object]:
        checks = []
        for result in self.results:
            entry: dict[str, object] = {"name": result.name, "status": result.status, "why": result.why}
            entry["guarantees"] = result.guarantees
            entry["seconds"] = round(result.seconds, 3)
            if result.status == "fail":
                entry["breaks"] = result.breaks
                entry["failure"] = {
                    "request": result.request,
                    "expected": result.expected,
                    "actual": result.actual,
                }
            checks.append(entry)
        return {
            "suite": SUITE,
            "target": self.target,
            "transport": self.transport,
            "tag": self.tag,
            "protocol": self.protocol,
            "passed": self.passed,
            "summary": {status: self.count(status) for status in ("pass", "fail", "skip")},
            "seconds": round(self.seconds, 3),
            "checks": checks,
        }

    def json(self) -> str:
        return json.dumps(self.to_json(), ensure_ascii=False, indent=1) + "\n"

    def junit(self) -> str:
        """JUnit XML, as CI systems read it: one testcase per check, its group as the class name."""
        suites = ElementTree.Element("testsuites", name=SUITE)
        suite = ElementTree.SubElement(
            suites,
            "testsuite",
            name=f"{SUITE} ({self.transport})",
            tests=str(len(self.results)),
            failures=str(self.count("fail")),
            errors="0",
            skipped=str(self.count("skip")),
            time=f"{self.seconds:.3f}",
        )
        properties = ElementTree.SubElement(suite, "properties")
        for name, value in (("target", self.target), ("tag", self.tag), ("protocol", self.protocol)):
            ElementTree.SubElement(properties, "property", name=name, value=value)
        for result in self.results:
            group = result.name.split(".", 1)[0]
            case = ElementTree.SubElement(
                suite,
                "testcase",
                classname=f"{SUITE}.{group}",
                name=result.name,
                time=f"{result.seconds:.3f}",
            )
            if result.status == "fail":
                failure = ElementTree.SubElement(
                    case, "failure", message=result.why[:1000], type="conformance"
                )
                failure.text = "\n".join(
                    f"{label}: {value}"
                    for label, value in (
                        ("request", result.request),
                        ("expected", result.expected),
                        ("actual", result.actual),
                        ("breaks", result.breaks),
                    )
                    if value
                )
            elif result.status == "skip":
                ElementTree.SubElement(case, "skipped", message=result.why[:1000])
            elif result.why:
                ElementTree.SubElement(case, "system-out").text = result.why
        ElementTree.indent(suites)
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            + ElementTree.tostring(suites, encoding="unicode")
            + "\n"
        )
