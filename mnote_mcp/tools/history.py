"""Page history and revert (toolset `history`): what changed a page, by which run, and undoing it.

Every write that changes a page is a revision with its command, actor, the four correlation ids, time
and a compact diff; `mnote.page.history` lists them. `mnote.page.revert` undoes an agent's run on a
page, one write, or everything since a revision, as a new revision (history is never rewritten).
The filters that name a run, session or actor sit in `filter` (and the run to undo is `undoRunId`):
top-level `runId`, `sessionId` and `actorId` name the caller, as on every tool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mnote_mcp.kernel.errors import ErrorCode, Reason
from mnote_mcp.kernel.port import HistoryFilter, HistoryQuery, Kernel
from mnote_mcp.kernel.store.commands import revert as revert_commands
from mnote_mcp.tools.consent import reverts
from mnote_mcp.tools.cost import Cost
from mnote_mcp.tools.examples import HUGE_KEY, MANY_NEW_BLOCKS, Call, Example, Ref, Stage, edited_everywhere
from mnote_mcp.tools.failures import BAD_CURSOR, PAGE_NOT_FOUND, PAGE_TOO_LARGE, WRITE_ERRORS, ErrorCase
from mnote_mcp.tools.inputs import HistoryArgs, HistoryFilterArgs, RevertArgs, arguments_of
from mnote_mcp.tools.lists import fit_list
from mnote_mcp.tools.outputs import HistoryRead, WriteAnswer
from mnote_mcp.tools.permissions import READ_PAGE, WRITE_PAGE
from mnote_mcp.tools.registry import Annotations, ToolSpec
from mnote_mcp.tools.schemas import page_schema, write_schema
from mnote_mcp.tools.sizes import SizeBudget
from mnote_mcp.tools.toolsets import Toolset
from mnote_mcp.vocabulary.envelope import CORRELATION_FIELDS, ToolRequest, ToolResult

MAX_LIMIT = 100


async def _history(request: ToolRequest, kernel: Kernel) -> ToolResult:
    args = arguments_of(request, HistoryArgs)
    where = args.get("filter") or HistoryFilterArgs()
    view = await kernel.page_history(
        HistoryQuery(
            workspace_id=request.workspace_id,
            document_id=request.document_id,
            actor_id=request.actor_id,
            correlation=request.correlation,
            filter=HistoryFilter(  # "": no filter (a strict host fills every field)
                run_id=where.get("runId") or None,
                session_id=where.get("sessionId") or None,
                actor_id=where.get("actorId") or None,
            ),
            since_revision=args.get("sinceRevision"),
            limit=args.get("limit", 20),
            cursor=args.get("cursor"),
        )
    )
    return ToolResult(result=dict(view), effect="read")


PAGE_HISTORY = ToolSpec(
    name="mnote.page.history",
    title="Page history",
    description=(
        "A page's change history 修改历史: writes newest first (revision, command, actor, runId, time,"
        " diff). More: cursor=nextCursor."
    ),
    summary=(
        "the page's writes, newest first: revision, command, actor, correlation ids, time, compact diff; "
        "filter by run, session, actor, `sinceRevision`; paged"
    ),
    returns="`revision`, `historyFrom`, `entries` (newest first: revision, command, actor, ids, time, diff), `nextCursor`",
    toolset=Toolset.HISTORY,
    cost=Cost.HEAVY,
    annotations=Annotations(destructive=False, idempotent=True),
    contract_schema=page_schema(
        {
            "filter": {
                "type": "object",
                "properties": {
                    "runId": {"type": "string"},
                    "sessionId": {"type": "string"},
                    "actorId": {"type": "string"},
                },
                "additionalProperties": False,
            },
            "sinceRevision": {"type": "integer", "minimum": 0, "description": "only writes after it"},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": 20},
            "cursor": {"type": "string"},
        },
        required=CORRELATION_FIELDS,
    ),
    read=_history,
    fit=fit_list("entries", _history),
    empty_means_absent=frozenset({"cursor"}),
    permissions=READ_PAGE,
    errors=(PAGE_NOT_FOUND, BAD_CURSOR),
    examples=(
        Example({}, note="the latest writes"),
        Example({"filter": {"runId": "run_example"}, "limit": 5}, note="what one run wrote"),
    ),
    oversized=(
        Example({"limit": MAX_LIMIT}, stage=Stage.HISTORY, note="60 writes"),
        Example({"filter": {HUGE_KEY: "x"}}, stage=Stage.HISTORY, fits=True, note="a huge filter"),
    ),
    by_default=False,  # --toolsets all (or block / history, or --tools) adds it
    arguments=HistoryArgs,
    output=HistoryRead,
    asked=(("show the edit history of this page", "查看这个页面的修改历史"),),
    budget=SizeBudget(contract=810, strict=1_070),
)


# The kernel's `runId` target is the tool's `undoRunId`: a call's own `runId` is its correlation id.
_REVERT_RENAMED = {"runId": "undoRunId"}


def _revert_payload(args: Mapping[str, Any]) -> dict[str, Any]:
    payload = {name: args[name] for name in ("toRevision", "commandId") if name in args}
    if "undoRunId" in args:
        payload["runId"] = args["undoRunId"]
    return payload


PAGE_REVERT = ToolSpec(
    name="mnote.page.revert",
    title="Revert page",
    description=(
        "Undo changes or restore a version 撤销修改、恢复版本, as a new revision: undoRunId (the runId"
        " your writes name), commandId or toRevision."
    ),
    summary=(
        "undo one run's writes (`undoRunId`), one write (`commandId`) or everything since a revision "
        "(`toRevision`), as a new revision; refuses where later writes touched the same blocks"
    ),
    returns="`commandName`, `revision`, `changed`, `diff`, `revertedRevisions`, `blockIds`",
    toolset=Toolset.HISTORY,
    annotations=Annotations(destructive=True, idempotent=True),
    contract_schema=write_schema(
        {
            "undoRunId": {"type": "string"},
            "commandId": {"type": "string"},
            "toRevision": {"type": "integer", "minimum": 0},
        },
        required=[],
    ),
    empty_means_absent=frozenset({"undoRunId", "commandId"}),
    command=revert_commands.REVERT,
    payload=_revert_payload,
    renamed=_REVERT_RENAMED,
    consent=reverts,
    permissions=WRITE_PAGE,
    errors=(
        *WRITE_ERRORS,
        ErrorCase(
            ErrorCode.CONFLICT,
            Reason.REVERT,
            "a later write changed what the revert would undo (`details.conflicts`)",
        ),
        ErrorCase(
            ErrorCode.NOT_FOUND,
            Reason.RUN,
            "`undoRunId` names no run of yours that wrote to this page (nothing is recorded)",
            example={"toRevision": None, "undoRunId": "run_that_wrote_nothing_here"},
        ),
        ErrorCase(
            ErrorCode.NOT_FOUND,
            Reason.COMMAND,
            "`commandId` names no write of this page",
            "find the write in mnote.page.history",
            example={"toRevision": None, "commandId": "page_head_update_title_no_such_write"},
        ),
        ErrorCase(
            ErrorCode.INVALID_ARGUMENT,
            Reason.SCHEMA,
            "none, or more than one, of `undoRunId`, `commandId` and `toRevision` (`details.given`)",
            "give exactly one",
            example={"toRevision": None},
        ),
        ErrorCase(
            ErrorCode.INVALID_ARGUMENT,
            Reason.SCHEMA,
            "`toRevision` is before the page's history (`details.historyFrom`) or after its revision",
            "pick a revision from mnote.page.history",
            example={"toRevision": 0},
        ),
        PAGE_TOO_LARGE,
    ),
    examples=(
        Example(
            {"toRevision": Ref.SEEDED_REVISION},
            setup=(Call("mnote.page.update_title", {"title": "Renamed to be reverted"}),),
            note="undo everything since the page was seeded, after a write",
        ),
    ),
    arguments=RevertArgs,
    output=WriteAnswer,
    oversized=(
        Example(
            {"toRevision": Ref.SEEDED_REVISION, "dryRun": True},
            stage=Stage.HISTORY,
            note="60 writes, dry run",
        ),
        Example(
            {"undoRunId": "run_first"},
            setup=(
                Call(
                    "mnote.block.insert", {"blocks": MANY_NEW_BLOCKS, "position": "end", "runId": "run_first"}
                ),
                edited_everywhere("New", "Later"),
            ),
            stage=Stage.BIG,
            fits=True,
            note="a conflict over 2,000 blocks",
        ),
    ),
    asked=(
        ("undo what you just changed", "撤销刚才的修改"),
        ("restore the page to an earlier version", "把页面恢复到之前的版本"),
    ),
    budget=SizeBudget(contract=690, strict=820),
)

HISTORY_TOOLS = (PAGE_HISTORY, PAGE_REVERT)
