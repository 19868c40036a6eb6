"""`mnote-mcp demo`: a newcomer's first run. A real MCP client session over stdio, against a store
that is thrown away afterwards, calling every tool and printing each call as it is sent (`->`, the
`tools/call` params) and the envelope that comes back (`<-`), so a reader learns the calls too.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from mnote_mcp.kernel.local import LocalStore
from mnote_mcp.vocabulary.messages import DEFAULT_LOCALE

WS, DOC = "ws_1", "doc_1"
TRACE = "trace_demo"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)


def _show(step: str, envelope: Any, sent: dict[str, Any] | None = None) -> None:
    print(f"\n== {step}")
    if sent is not None:
        print(f"-> tools/call\n{_json(sent)}\n<- the envelope (one text block)")
    print(_json(envelope))


def _envelope(result: Any) -> dict[str, Any]:
    """The envelope of a `tools/call` result: its text block (the default form), or its structured
    content (`--result-form structured`)."""
    texts = [part.text for part in result.content if getattr(part, "type", "") == "text"]
    found: dict[str, Any] = json.loads(texts[0]) if texts else dict(result.structured_content or {})
    return found


def server_parameters(db: Path, locale: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "mnote_mcp", "serve", "--db", str(db), "--locale", locale, "--log-level", "warning"],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


async def tour(client: Client, db: Path) -> list[dict[str, Any]]:
    """Every tool once, and the behaviours that matter; returns the envelopes in order."""
    seen: list[dict[str, Any]] = []
    ids = {"sessionId": "demo_session", "runId": "demo_run", "traceId": TRACE}

    async def call(step: str, tool: str, call_id: str, **args: Any) -> dict[str, Any]:
        arguments = {"workspaceId": WS, "documentId": DOC, **ids, "toolCallId": call_id, **args}
        result = await client.call_tool(tool, arguments)
        envelope = _envelope(result)
        _show(f"{step}  [{tool}]", envelope, {"name": tool, "arguments": arguments})
        seen.append(envelope)
        return envelope

    tools = await client.list_tools()
    print("== tools/list")
    for tool in tools.tools:
        print(f"  {tool.name:34} {tool.title}")

    page = await call("1. read the page", "mnote.page.get", "call_get")
    revision = page["result"]["revision"]
    block = [{"type": "paragraph", "text": "Added by the demo."}]
    await call(
        "2. dry run an append: the diff, nothing written",
        "mnote.page.save",
        "call_plan",
        content=block,
        mode="append",
        idempotencyKey="demo_save",
        dryRun=True,
    )
    await call(
        "3. save it for real, fenced by baseRevision",
        "mnote.page.save",
        "call_save",
        content=block,
        mode="append",
        idempotencyKey="demo_save",
        dryRun=False,
        baseRevision=revision,
    )
    await call(
        "4. retry with the same idempotencyKey: replayed, not written again",
        "mnote.page.save",
        "call_retry",
        content=block,
        mode="append",
        idempotencyKey="demo_save",
        dryRun=False,
        baseRevision=revision,
    )
    await call(
        "5. a write based on the old revision: a conflict carrying the current one",
        "mnote.page.update_title",
        "call_title",
        title="Project plan v2",
        idempotencyKey="demo_title",
        dryRun=False,
        baseRevision=revision,
    )
    await call(
        "6. an option the runtime has not wired: a warning on a dry run",
        "mnote.page.update_options",
        "call_options",
        options={"protectEditing": True, "showToc": True},
        idempotencyKey="demo_options",
        dryRun=True,
    )
    await call(
        "7. the page's summary artifact",
        "mnote.artifact.create_summary",
        "call_summary",
        summary="A plan for the mnote MCP server.",
        idempotencyKey="demo_summary",
        dryRun=False,
    )
    await call(
        "8. an AI note artifact",
        "mnote.artifact.create_ai_note",
        "call_note",
        content="Consider adding a risk register.",
        idempotencyKey="demo_note",
        dryRun=False,
    )
    await call(
        "9. a precise edit: insert one block after another, nothing else rewritten",
        "mnote.block.insert",
        "call_insert",
        blocks=[{"type": "todo", "text": "Ship the block tools"}],
        afterBlockId="todo_2",
        idempotencyKey="demo_insert",
        dryRun=False,
    )
    await call(
        "10. tick a todo: one block, one prop",
        "mnote.block.update",
        "call_update",
        blockId="todo_2",
        props={"checked": True},
        idempotencyKey="demo_update",
        dryRun=False,
    )
    await call(
        "11. move a block, with its children, after another",
        "mnote.block.move",
        "call_move",
        blockId="list_1",
        afterBlockId="p_1",
        idempotencyKey="demo_move",
        dryRun=False,
    )
    await call(
        "12. a dry run of a delete: the diff names every block that would go",
        "mnote.block.delete",
        "call_delete",
        blockIds=["list_1"],
        idempotencyKey="demo_delete",
        dryRun=True,
    )
    await call(
        "13. the page as Markdown: compact to read, every block id kept",
        "mnote.page.get",
        "call_markdown",
        format="markdown",
        includeOptions=False,
    )
    arguments = {"workspaceId": "ws_2", "documentId": "doc_9", **ids, "toolCallId": "call_denied"}
    result = await client.call_tool("mnote.page.get", arguments)
    envelope = _envelope(result)
    _show(
        "14. a page of a workspace user_1 is not a member of: refused, nothing leaked  [mnote.page.get]",
        envelope,
        {"name": "mnote.page.get", "arguments": arguments},
    )
    seen.append(envelope)

    store = LocalStore(db)
    try:
        trail = store.audit_trail(trace_id=TRACE)
    finally:
        store.close()
    _show(
        f"15. the audit trail of trace {TRACE} (mnote-mcp audit --db DB --trace {TRACE}): every commandId"
        " above, with its correlation ids",
        trail,
    )
    return seen


async def run_demo(locale: str = DEFAULT_LOCALE) -> int:
    with tempfile.TemporaryDirectory(prefix="mnote-demo-") as tmp:
        db = Path(tmp) / "demo.db"
        async with Client(server_parameters(db, locale), read_timeout_seconds=30) as client:
            await tour(client, db)
    print("\nDone. The demo store was thrown away; run `mnote-mcp` to serve the default store over stdio.")
    return 0
