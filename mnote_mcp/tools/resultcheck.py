"""Test-only: every successful answer held to its tool's `outputSchema`. Never set in a deployment.

A declared result type (`tools/outputs.py`) is only worth what it says of the real results. With
`MNOTE_CHECK_RESULTS=<file>` the dispatcher, the one place every call passes, checks each success
envelope against its tool's output schema and appends one JSON line per violation to the file
(`{"tool", "pointer", "message"}`): appended, so that every xdist worker and every server process a
test starts (they inherit the environment) report into the same file. tests/conftest.py turns it
on for the whole run and fails the run on any line. It is an environment variable, not a flag, so
`--help` never offers it (as `runtime/faults.py`'s).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import orjson

from mnote_mcp.tools.registry import ToolSpec
from mnote_mcp.tools.typeschemas import declared_schema
from mnote_mcp.vocabulary.envelope import Envelope

if TYPE_CHECKING:
    from jsonschema_rs import Validator

CHECK_RESULTS_ENV = "MNOTE_CHECK_RESULTS"


class ResultCheck:
    """Checks envelopes against their tools' output schemas, each compiled once, and records what fails."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._validators: dict[str, Validator] = {}

    def check(self, spec: ToolSpec, envelope: Envelope) -> None:
        """Checks a success's `result` against the tool's result schema (not the whole envelope, whose
        `anyOf [result, null]` would hide where a result is wrong behind one error at `/result`)."""
        validator = self._validators.get(spec.name)
        if validator is None:
            from jsonschema_rs import Draft202012Validator

            # The result's own schema: its `$defs` at its root, where its `$ref`s point.
            validator = self._validators[spec.name] = Draft202012Validator(declared_schema(spec.output))
        lines = [
            orjson.dumps(
                {
                    "tool": spec.name,
                    "pointer": "/result" + "".join(f"/{step}" for step in error.instance_path),
                    "message": error.message[:300],
                }
            )
            + b"\n"
            for error in validator.iter_errors(envelope["result"])
        ]
        if lines:
            # One write per line in append mode: lines from many processes never interleave.
            descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                for line in lines:
                    os.write(descriptor, line)
            finally:
                os.close(descriptor)


def result_check() -> ResultCheck | None:
    """The check `MNOTE_CHECK_RESULTS` asks for, if it does."""
    path = os.environ.get(CHECK_RESULTS_ENV, "").strip()
    return ResultCheck(path) if path else None
