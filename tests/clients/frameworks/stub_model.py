"""The model of the framework runs: a scripted OpenAI-compatible endpoint (tests/clients/hermes/fake_model.py)
that plays a strict model.

Every framework run is one conversation, named by its first user message (`run <label>`). Its script
reads the conversation so far, as the framework sent it, and takes the next step: read the page, dry
run an append with the revision it read, make a refusal (a stale `baseRevision`), append for real,
retry the same call (a replay), then answer. Tools are found by name in what the framework offered,
and each call's arguments are filled the way a strict model must fill them (`tests/support/strict_fill.py`,
nulls) when the framework marked the tool strict. What the framework sent (tool definitions, tool
messages) stays in the transcript for the test to check.
"""

from __future__ import annotations

import json
from typing import Any

from tests.clients.hermes.fake_model import ToolCall, Transcript, Turn, _text
from tests.support.strict_fill import fill

STEPS = ("read", "dry_run", "refusal", "write", "replay")
FINAL = "finished"


def envelope_in(content: str) -> dict[str, Any] | None:
    """The mnote envelope inside a tool message, however the framework wrapped it."""
    decoder = json.JSONDecoder()
    for start in [0, *(i for i, char in enumerate(content) if char == "{")]:
        try:
            value, _ = decoder.raw_decode(content, start)
        except ValueError:
            continue
        found = _find(value)
        if found is not None:
            return found
    return None


def _find(value: Any) -> dict[str, Any] | None:
    if isinstance(value, dict):
        if "ok" in value and "toolName" in value:
            return value
        for item in value.values():
            found = _find(item)
            if found is not None:
                return found
    if isinstance(value, list):
        for item in value:
            found = _find(item)
            if found is not None:
                return found
    if isinstance(value, str) and value.lstrip().startswith("{"):
        return envelope_in(value)
    return None


def conversations(transcript: Transcript) -> dict[str, list[dict[str, Any]]]:
    """The agent requests of each run, by its label."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for request in transcript.agent_requests:
        runs.setdefault(label_of(request), []).append(request)
    return runs


def label_of(request: dict[str, Any]) -> str:
    for message in request.get("messages", []):
        if message.get("role") == "user":
            return _text(message.get("content")).removeprefix("run ").strip()
    return "?"


def tool_results(request: dict[str, Any]) -> list[dict[str, Any] | None]:
    """The envelopes the model was shown so far in this conversation, in order."""
    return [
        envelope_in(_text(message.get("content")))
        for message in request.get("messages", [])
        if message.get("role") == "tool"
    ]


def _tool(request: dict[str, Any], suffix: str) -> dict[str, Any]:
    for tool in request["tools"]:
        if tool["function"]["name"].endswith(suffix):
            function: dict[str, Any] = tool["function"]
            return function
    raise AssertionError(
        f"no tool ending in {suffix} among {[t['function']['name'] for t in request['tools']]}"
    )


def _call(request: dict[str, Any], suffix: str, arguments: dict[str, Any]) -> ToolCall:
    function = _tool(request, suffix)
    if function.get("strict"):
        arguments = fill(function["parameters"], arguments, "null")
    return ToolCall(function["name"], arguments)


def strict_model(transcript: Transcript) -> Turn:
    request = transcript.requests[-1]
    label = label_of(request)
    seen = tool_results(request)
    page = {"workspaceId": "ws_1", "documentId": "doc_1"}
    revision = (seen[0] or {}).get("result", {}).get("revision") if seen else None
    save = {
        **page,
        "content": [{"type": "paragraph", "text": f"written by {label}"}],
        "mode": "append",
        "idempotencyKey": f"{label}-save",
        "baseRevision": revision,
    }
    step = len(seen)
    if step == 0:
        return Turn(calls=(_call(request, "page_get", dict(page)),))
    if step == 1:
        return Turn(calls=(_call(request, "page_save", {**save, "dryRun": True}),))
    if step == 2:
        title = {
            **page,
            "title": "stale",
            "idempotencyKey": f"{label}-title",
            "dryRun": False,
            "baseRevision": 0,
        }
        return Turn(calls=(_call(request, "page_update_title", title),))
    if step in (3, 4):
        return Turn(calls=(_call(request, "page_save", {**save, "dryRun": False}),))
    return Turn(text=FINAL)


REFUSED = "refused three times, then read the page"


def refusing_model(transcript: Transcript) -> Turn:
    """Three ordinary refusals in a row (no such page, another workspace's page, a stale revision),
    then a read, then an answer: what a model does while it finds its way."""
    request = transcript.requests[-1]
    label = label_of(request)
    page = {"workspaceId": "ws_1", "documentId": "doc_1"}
    steps: list[tuple[str, dict[str, Any]]] = [
        ("page_get", {**page, "documentId": "doc_missing"}),
        ("page_get", {"workspaceId": "ws_2", "documentId": "doc_9"}),
        (
            "page_update_title",
            {
                **page,
                "title": "stale",
                "idempotencyKey": f"{label}-stale",
                "dryRun": False,
                "baseRevision": 0,
            },
        ),
        ("page_get", dict(page)),
    ]
    done = len(tool_results(request))
    if done < len(steps):
        suffix, arguments = steps[done]
        return Turn(calls=(_call(request, suffix, arguments),))
    return Turn(text=REFUSED)
