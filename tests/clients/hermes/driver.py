"""Runs inside Hermes's own virtual environment (`.ci/hermes`), never in the project's.

It drives hermes-agent's MCP client exactly as the agent does, through Hermes's public entry points:
`tools.mcp_tool.discover_mcp_tools()` reads `$HERMES_HOME/config.yaml` and connects,
`model_tools.get_tool_definitions()` is the tool list the model is given, and
`model_tools.handle_function_call()` is the dispatch the agent loop runs for each tool call (name
rewriting, argument coercion, the circuit breaker, result wrapping). Nothing of Hermes's logic is
re-implemented here: the test sends one JSON command per line on stdin and reads one JSON answer per
line on the original stdout (anything Hermes prints goes to stderr).

Commands: {"op": "discover", "toolsets": [...]}, {"op": "call", "name": ..., "args": {...}, "approve":
"o"}, {"op": "present", "name": ..., "text": ..., "context_length": N} (what the agent loop then makes of a
call's text for the model: its per-result cut for that window, without a sandbox to save the rest in,
and its untrusted-data banner), {"op": "status"}, {"op": "quit"}.

A call runs with a stdin of its own holding `approve` (nothing: end of input): when mnote asks for
confirmation (form elicitation), Hermes's own approval prompt (`tools.approval.prompt_dangerous_approval`,
through `request_elicitation_consent`) prints the question and reads the person's answer from stdin, as
it does in a terminal; `o` is "once", `d` "deny", end of input a denial. What it printed comes back as
`printed`.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def _answer_channel() -> Any:
    """The original stdout for answers; fd 1 becomes stderr so that Hermes's prints cannot mix in."""
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return channel


class _Tee(io.TextIOBase):
    """Writes go to `out` and are kept (the approval prompt prints from a worker thread)."""

    def __init__(self, out: Any) -> None:
        self.out = out
        self.kept: list[str] = []

    def write(self, text: str) -> int:
        self.kept.append(text)
        return int(self.out.write(text))

    def flush(self) -> None:
        self.out.flush()


@contextmanager
def _person(answer: str) -> Iterator[Callable[[], str]]:
    """stdin holding `answer` (and then its end), stdout kept, for the length of one call."""
    read, write = os.pipe()
    os.write(write, (answer + "\n").encode() if answer else b"")
    os.close(write)
    saved_in, saved_out = sys.stdin, sys.stdout
    sys.stdin = os.fdopen(read, encoding="utf-8")
    tee = _Tee(saved_out)
    sys.stdout = tee
    try:
        yield lambda: "".join(tee.kept)
    finally:
        sys.stdin.close()
        sys.stdin, sys.stdout = saved_in, saved_out


def main() -> int:
    answers = _answer_channel()
    mcp_tool = importlib.import_module("tools.mcp_tool")
    model_tools = importlib.import_module("model_tools")
    commands = sys.stdin  # the person's answers get a stdin of their own per call (`_person`)
    for line in commands:
        if not line.strip():
            continue
        command = json.loads(line)
        op = command["op"]
        try:
            if op == "discover":
                registered = mcp_tool.discover_mcp_tools()
                definitions = model_tools.get_tool_definitions(
                    enabled_toolsets=command["toolsets"], quiet_mode=True
                )
                answer: dict[str, Any] = {"registered": registered, "definitions": definitions}
            elif op == "call":
                with _person(command.get("approve") or "") as printed:
                    text = model_tools.handle_function_call(command["name"], command["args"])
                answer = {"text": text, "printed": printed()}
            elif op == "present":
                storage = importlib.import_module("tools.tool_result_storage")
                budget = importlib.import_module("tools.budget_config")
                helpers = importlib.import_module("agent.tool_dispatch_helpers")
                config = budget.budget_for_context_window(command["context_length"])
                kept = storage.maybe_persist_tool_result(
                    command["text"], command["name"], "presented", env=None, config=config
                )
                answer = {"text": helpers._maybe_wrap_untrusted(command["name"], kept)}
            elif op == "status":
                answer = {"status": mcp_tool.get_mcp_status()}
            elif op == "quit":
                mcp_tool.shutdown_mcp_servers()
                answers.write(json.dumps({"bye": True}) + "\n")
                return 0
            else:
                answer = {"failure": f"unknown op {op!r}"}
        except Exception:
            answer = {"failure": traceback.format_exc()}
        answers.write(json.dumps(answer, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
