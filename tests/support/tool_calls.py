"""Every tool's declared example, aimed at a page of a test fixture.

The one place per-tool tests turn declarations into calls: the permission matrix, the leak tests,
the strict-host recipes, Hermes's and the frameworks' "every tool once", the envelope shapes. Each
takes `TOOLS` (every registered tool) and the examples the tools declare, so a new tool is in every
one of them once it is declared; none keeps a table of its own.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from mcp import Client

from mnote_mcp.tools.catalog import ALL_TOOLS
from mnote_mcp.tools.examples import Call, Example, Target, overridden
from mnote_mcp.tools.permissions import Caller
from mnote_mcp.tools.registry import ToolSpec
from mnote_mcp.vocabulary.naming import ToolNames
from tests.support.helpers import FIXTURE, IDS, call

TOOLS: dict[str, ToolSpec] = {spec.name: spec for spec in ALL_TOOLS}
READS = tuple(spec for spec in ALL_TOOLS if not spec.writes)


def allowed(caller: Caller) -> set[str]:
    """The tools `caller` may call, as the declarations say."""
    return {spec.name for spec in ALL_TOOLS if spec.permissions.refusal(caller) is None}


@cache
def _pages(fixture: Path) -> dict[str, tuple[str, dict[str, Any]]]:
    data = json.loads(fixture.read_text(encoding="utf-8"))
    return {page["id"]: (ws["id"], page) for ws in data["workspaces"] for page in ws.get("pages", [])}


def target(document_id: str, workspace_id: str | None = None, fixture: Path = FIXTURE) -> Target:
    """A page of `fixture` (or a page it does not have, in `workspace_id`) as examples are aimed at it."""
    found = _pages(fixture).get(document_id)
    if found is None:
        assert workspace_id is not None, f"{document_id} is not in {fixture.name}: name its workspace"
        return Target(workspace_id, document_id, ())
    workspace, page = found
    return Target(workspace_id or workspace, document_id, tuple(block["id"] for block in page["blocks"][:3]))


def arguments(
    spec: ToolSpec,
    page: Target,
    key: str = "k",
    *,
    dry_run: bool = False,
    example: Example | Call | None = None,
) -> dict[str, Any]:
    """A call of `spec`'s example (the first by default) on `page`, without correlation ids: the page's
    ids where the tool names one, a write's `idempotencyKey` and `dryRun` (the key is `key` and the
    tool's name, so no two tools share one), and the example's arguments (which may set them)."""
    write = {"idempotencyKey": f"{key}-{spec.name}", "dryRun": dry_run} if spec.writes else {}
    return {**write, **spec.arguments_for(page, example)}


def error_examples(spec: ToolSpec, *, same_page: bool = False) -> list[Example]:
    """The calls `spec`'s declared errors are shown by (each a change to its first example);
    `same_page`: only those aimed at the page the example is (not another page or workspace)."""
    return [
        Example(overridden(spec.example.arguments, case.example))
        for case in spec.errors
        if case.example is not None and not (same_page and {"workspaceId", "documentId"} & set(case.example))
    ]


# A value of another JSON type than the schema's, per type: invalid whatever else the call says.
_WRONG_TYPE: dict[str, Any] = {
    "string": 42,
    "integer": "x",
    "number": "x",
    "boolean": "x",
    "array": "x",
    "object": "x",
}
_EVERY_CALL = frozenset({"workspaceId", "documentId", *IDS, "idempotencyKey", "dryRun", "capabilityScope"})


def wrong_types(spec: ToolSpec) -> dict[str, Any]:
    """Every argument of the tool's own (the page, the ids, the key, `dryRun` and `capabilityScope`
    aside) given a value of the wrong type: a call the schema refuses whoever makes it."""
    properties = spec.input_schema(strict=False)["properties"]
    return {
        name: _WRONG_TYPE.get(schema.get("type", "object"), 42)
        for name, schema in properties.items()
        if name not in _EVERY_CALL
    }


def calls(
    spec: ToolSpec,
    page: Target,
    key: str = "k",
    *,
    dry_run: bool = False,
    example: Example | None = None,
    style: ToolNames = "dotted",
) -> list[tuple[str, dict[str, Any]]]:
    """The calls (tool name as advertised in `style`, arguments) that make `example` (the first by
    default) on `page`: the real calls of its `setup` first, then the example itself."""
    chosen = example or spec.example
    made = [
        (
            TOOLS[step.tool].advertised_name(style),
            arguments(TOOLS[step.tool], page, f"{key}-setup-{index}-of-{spec.name}", example=step),
        )
        for index, step in enumerate(chosen.setup)
    ]
    return [*made, (spec.advertised_name(style), arguments(spec, page, key, dry_run=dry_run, example=chosen))]


async def call_example(
    client: Client,
    spec: ToolSpec,
    page: Target,
    key: str = "k",
    *,
    dry_run: bool = False,
    example: Example | None = None,
    style: ToolNames = "dotted",
    **extra: Any,
) -> dict[str, Any]:
    """`example` (the first by default) of `spec` on `page` through `client`, its prior call first,
    with the test's correlation ids; `extra` adds or replaces arguments. The example's envelope."""
    envelope: dict[str, Any] = {}
    for name, made in calls(spec, page, key, dry_run=dry_run, example=example, style=style):
        envelope = await call(client, name, **{**IDS, **made, **extra})
    return envelope
