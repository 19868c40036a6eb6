"""`mnote-mcp demo`: a newcomer's first run. A real MCP client session over stdio, against a store
that is thrown away afterwards, calling every tool and printing each call as it is sent (`->`, the
`tools/call` params) and the envelope that comes back (`<-`), so a reader learns the calls too.

The tour is the narrated steps (`STEPS`), then, for any registered tool they leave out, one step made
from the tool's first declared example (`derived_steps`): a new tool is in the tour the day it is
declared, and a test holds the two together.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, TextContent
from pydantic import JsonValue

from mnote_mcp.kernel.port import JSONObject
from mnote_mcp.kernel.sqlite.opening import open_store
from mnote_mcp.tools.catalog import ALL_TOOLS
from mnote_mcp.tools.examples import Call, Example, Target
from mnote_mcp.tools.registry import ToolSpec
from mnote_mcp.vocabulary.messages import DEFAULT_LOCALE

WS, DOC = "ws_1", "doc_1"
TRACE = "trace_demo"
IDS = {"sessionId": "demo_session", "runId": "demo_run", "traceId": TRACE}
REVISION = "<the revision step 1 read>"  # stands for it in a step's arguments
# What a call answers: the envelope, read from its text block (the default form) or structuredContent.
Envelope = dict[str, Any]


@dataclass(frozen=True)
class Step:
    """One call of the tour: what it shows, the tool, its toolCallId and its own arguments."""

    title: str
    tool: str
    call_id: str
    args: Mapping[str, JsonValue] = field(default_factory=dict)
    page: tuple[str, str] | None = (WS, DOC)  # None: the tool names no page (search)
    example: Example | Call | None = None  # a derived step: the tool's example (or a setup call of it)

    def arguments(self, revision: JsonValue, target: Target | None = None) -> JSONObject:
        own = {name: revision if value == REVISION else value for name, value in self.args.items()}
        if self.example is not None and target is not None:
            own = {**self.example.resolved(target), **own}
        page = {"workspaceId": self.page[0], "documentId": self.page[1]} if self.page else {}
        return {**page, **IDS, "toolCallId": self.call_id, **own}


BLOCK: JsonValue = [{"type": "paragraph", "text": "Added by the demo."}]
SAVE: dict[str, JsonValue] = {"content": BLOCK, "mode": "append", "idempotencyKey": "demo_save"}
STEPS = (
    Step("1. read the page", "mnote.page.get", "call_get"),
    Step(
        "2. dry run an append: the diff, nothing written",
        "mnote.page.save",
        "call_plan",
        {**SAVE, "dryRun": True},
    ),
    Step(
        "3. save it for real, fenced by baseRevision",
        "mnote.page.save",
        "call_save",
        {**SAVE, "dryRun": False, "baseRevision": REVISION},
    ),
    Step(
        "4. retry with the same idempotencyKey: replayed, not written again",
        "mnote.page.save",
        "call_retry",
        {**SAVE, "dryRun": False, "baseRevision": REVISION},
    ),
    Step(
        "5. a write based on the old revision: a conflict carrying the current one",
        "mnote.page.update_title",
        "call_title",
        {
            "title": "Project plan v2",
            "idempotencyKey": "demo_title",
            "dryRun": False,
            "baseRevision": REVISION,
        },
    ),
    Step(
        "6. an option the runtime has not wired: a warning on a dry run",
        "mnote.page.update_options",
        "call_options",
        {
            "options": {"protectEditing": True, "showToc": True},
            "idempotencyKey": "demo_options",
            "dryRun": True,
        },
    ),
    Step(
        "7. the page's summary artifact",
        "mnote.artifact.create_summary",
        "call_summary",
        {"summary": "A plan for the mnote MCP server.", "idempotencyKey": "demo_summary", "dryRun": False},
    ),
    Step(
        "8. an AI note artifact",
        "mnote.artifact.create_ai_note",
        "call_note",
        {"content": "Consider adding a risk register.", "idempotencyKey": "demo_note", "dryRun": False},
    ),
    Step(
        "9. a precise edit: insert one block after another, nothing else rewritten",
        "mnote.block.insert",
        "call_insert",
        {
            "blocks": [{"type": "todo", "text": "Ship the block tools"}],
            "afterBlockId": "todo_2",
            "idempotencyKey": "demo_insert",
            "dryRun": False,
        },
    ),
    Step(
        "10. tick a todo: one block, one prop",
        "mnote.block.update",
        "call_update",
        {"blockId": "todo_2", "props": {"checked": True}, "idempotencyKey": "demo_update", "dryRun": False},
    ),
    Step(
        "11. move a block, with its children, after another",
        "mnote.block.move",
        "call_move",
        {"blockId": "list_1", "afterBlockId": "p_1", "idempotencyKey": "demo_move", "dryRun": False},
    ),
    Step(
        "12. a dry run of a delete: the diff names every block that would go",
        "mnote.block.delete",
        "call_delete",
        {"blockIds": ["list_1"], "idempotencyKey": "demo_delete", "dryRun": True},
    ),
    Step(
        "13. the page as Markdown: compact to read, every block id kept",
        "mnote.page.get",
        "call_markdown",
        {"format": "markdown", "includeOptions": False},
    ),
    Step(
        "14. find pages by what they say: ids, title and a snippet naming its block",
        "mnote.page.search",
        "call_search",
        {"query": "contract"},
        page=None,
    ),
    Step(
        "15. fix words in one call, the page named by its title (no search first): the exact text"
        " replaced where it stands, nothing else rewritten",
        "mnote.page.edit_text",
        "call_edit_text",
        {
            "edits": [{"oldText": "what we are building", "newText": "what we build"}],
            "idempotencyKey": "demo_edit_text",
            "dryRun": False,
        },
        page=("", "Project plan"),
    ),
    Step(
        "16. the page's history: every write above, newest first, with its run",
        "mnote.page.history",
        "call_history",
        {"limit": 3},
    ),
    Step(
        "17. undo this demo's run, as a dry run: what a revert would put back, nothing written",
        "mnote.page.revert",
        "call_revert",
        {"undoRunId": IDS["runId"], "idempotencyKey": "demo_revert", "dryRun": True},
    ),
    Step(
        "18. a page of a workspace user_1 is not a member of: refused, nothing leaked",
        "mnote.page.get",
        "call_denied",
        page=("ws_2", "doc_9"),
    ),
)


def derived_steps(specs: Sequence[ToolSpec], narrated: set[str]) -> list[Step]:
    """A step for each tool in `specs` that no narrated step calls: its first example on the demo
    page, as a dry run where it writes, after the real calls of the example's setup (the demo's store
    is thrown away)."""
    steps = []
    tools = {spec.name: spec for spec in specs}
    for spec in specs:
        if spec.name in narrated:
            continue
        for index, call in enumerate(spec.example.setup):
            before = tools[call.tool]
            steps.append(
                Step(
                    f"{before.title}, to set up {spec.title}",
                    before.name,
                    f"call_{spec.underscore_name}_setup_{index}",
                    {"idempotencyKey": f"demo_{spec.underscore_name}_setup_{index}", "dryRun": False},
                    example=call,
                )
            )
        own: dict[str, JsonValue] = {"idempotencyKey": f"demo_{spec.underscore_name}", "dryRun": True}
        steps.append(
            Step(
                f"{spec.title} ({spec.summary})",
                spec.name,
                f"call_{spec.underscore_name}",
                own if spec.writes else {},
                page=(WS, DOC) if spec.page_bound else None,
                example=spec.example,
            )
        )
    return steps


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)


def _show(step: str, envelope: object, sent: JSONObject | None = None) -> None:
    print(f"\n== {step}")
    if sent is not None:
        print(f"-> tools/call\n{_json(sent)}\n<- the envelope (one text block)")
    print(_json(envelope))


def _envelope(result: CallToolResult) -> Envelope:
    """The envelope of a `tools/call` result: its text block (the default form), or its structured
    content (`--result-form structured`)."""
    texts = [part.text for part in result.content if isinstance(part, TextContent)]
    found: Envelope = json.loads(texts[0]) if texts else dict(result.structured_content or {})
    return found


def server_parameters(db: Path, locale: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "mnote_mcp",
            "serve",
            "--db",
            str(db),
            "--demo",
            "--toolsets",
            "all",  # a tour of every tool, the three left out of the default selection too
            "--locale",
            locale,
            "--log-level",
            "warning",
        ],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


async def _list_tools(client: Client) -> None:
    tools = await client.list_tools()
    print("== tools/list")
    for tool in tools.tools:
        print(f"  {tool.name:34} {tool.title}")


async def _call(client: Client, step: Step, revision: JsonValue, target: Target | None) -> Envelope:
    arguments = step.arguments(revision, target)
    result = await client.call_tool(step.tool, arguments)
    envelope = _envelope(result)
    _show(f"{step.title}  [{step.tool}]", envelope, {"name": step.tool, "arguments": arguments})
    return envelope


def _show_audit_trail(db: Path, number: int) -> None:
    store = open_store(db)
    try:
        trail = store.audit_trail(trace_id=TRACE)
    finally:
        store.close()
    _show(
        f"{number}. the audit trail of trace {TRACE} (mnote-mcp audit --db DB --trace {TRACE}): every"
        " commandId above, with its correlation ids",
        trail,
    )


def _target(envelope: Envelope) -> Target | None:
    """The demo page as step 1 read it: what a derived step's example is aimed at."""
    result = envelope.get("result")
    if not isinstance(result, dict):
        return None
    blocks = tuple(str(block["id"]) for block in result.get("blocks", [])[:3])
    return Target(WS, DOC, blocks, int(result.get("revision", 1)))


async def tour(client: Client, db: Path) -> list[Envelope]:
    """Every tool once, and the behaviours that matter (`STEPS`, then `derived_steps`); returns the
    envelopes in order."""
    await _list_tools(client)
    steps = [*STEPS]
    derived = derived_steps(ALL_TOOLS, {step.tool for step in STEPS})
    for number, step in enumerate(derived, start=len(STEPS) + 1):
        steps.append(replace(step, title=f"{number}. {step.title}"))
    seen: list[Envelope] = []
    revision: JsonValue = None
    target: Target | None = None
    for step in steps:
        envelope = await _call(client, step, revision, target)
        seen.append(envelope)
        if target is None:  # step 1 read the page: the writes based on it send its revision
            target = _target(envelope)
            revision = target.revision if target else None
    _show_audit_trail(db, len(steps) + 1)
    return seen


async def run_demo(locale: str = DEFAULT_LOCALE) -> int:
    with tempfile.TemporaryDirectory(prefix="mnote-demo-") as tmp:
        db = Path(tmp) / "demo.db"
        async with Client(server_parameters(db, locale), read_timeout_seconds=30) as client:
            await tour(client, db)
    print("\nDone. The demo store was thrown away; run `mnote-mcp` to serve the default store over stdio.")
    return 0
