"""Which planned writes are destructive: the rule each write tool declares (`ToolSpec.consent`).

Under `--confirm destructive` (the default) a write is run as a dry run first, and its tool's rule
reads the plan (`vocabulary.consent.Impact`) to say whether the person must be asked before it is
made (docs/decisions.md, "Which writes ask first"):

- `removes_blocks` (mnote.page.save): the save deletes blocks. A `mode=replace` that keeps every
  block (ids kept) or an `append` never asks.
- `deletes_subtrees_or_many` (mnote.block.delete): the delete takes children with the blocks it names,
  or a heading's section (`section: true`: the blocks after the heading count as deleted, as they are),
  or more than `FEW_BLOCKS` blocks in all. One leaf block (or a few) does not ask: the agent saw them.
- `reverts` (mnote.page.revert): every revert that changes the page (it can undo many writes at once),
  except the undo of the caller's own run (`undoRunId` naming the run the call is in, not one its
  own arguments name: `undoes_own_run`): that is `Exempt.OWN_RUN` and never asks, under any policy (issue 31). It takes back only what this agent
  wrote in this run (the kernel reverts the calling actor's writes of the run, and refuses where a
  later write of anyone else changed the same blocks), and is itself undone by a revert; asking would
  make the way back depend on a channel to the person that may not exist.
- `renames_shared_page` (mnote.page.update_title): a rename of a page someone else has written to (an
  entry by another actor among its last `SHARED_LOOKBACK` writes): others find it by its title.
- everything else never asks under `destructive` (inserts, moves, one block's update, options,
  artifacts); `--confirm always` asks before every write that changes something.

The MCP annotation `destructiveHint` says what a tool *may* do, for a client's own policy; these rules
say what one call *will* do, from its plan.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from enum import StrEnum

from mnote_mcp.kernel.port import HistoryQuery, Kernel
from mnote_mcp.vocabulary.consent import Impact
from mnote_mcp.vocabulary.envelope import ToolRequest

FEW_BLOCKS = 3  # a delete of more blocks than this (children included) asks first
SHARED_LOOKBACK = 50  # the writes of a page looked at for another actor's


class Exempt(StrEnum):
    """A planned write that never asks, whatever `--confirm` says."""

    OWN_RUN = "own_run"  # the undo of the caller's own run


class Destruction(StrEnum):
    """Why a planned write asks first (None from a rule: it does not)."""

    REMOVES_BLOCKS = "removes_blocks"
    DELETES_SUBTREES = "deletes_subtrees"
    DELETES_SECTION = "deletes_section"
    DELETES_MANY = "deletes_many"
    REVERTS = "reverts"
    RENAMES_SHARED = "renames_shared"


Verdict = Destruction | Exempt | None
Destructive = Callable[[ToolRequest, Impact, Kernel], Awaitable[Verdict]]


async def never(request: ToolRequest, impact: Impact, kernel: Kernel) -> Destruction | None:
    return None


async def removes_blocks(request: ToolRequest, impact: Impact, kernel: Kernel) -> Destruction | None:
    """when it deletes blocks"""
    return Destruction.REMOVES_BLOCKS if impact.deleted else None


async def deletes_subtrees_or_many(
    request: ToolRequest, impact: Impact, kernel: Kernel
) -> Destruction | None:
    """when it deletes children or a heading's section with the named blocks, or more than 3 blocks"""
    named = request.args.get("blockIds") or []
    if impact.deleted > len(set(named)):
        return Destruction.DELETES_SECTION if request.args.get("section") else Destruction.DELETES_SUBTREES
    if impact.deleted > FEW_BLOCKS:
        return Destruction.DELETES_MANY
    return None


async def reverts(request: ToolRequest, impact: Impact, kernel: Kernel) -> Destruction | Exempt | None:
    """always (a revert that changes the page), but never the undo of the caller's own run"""
    return Exempt.OWN_RUN if undoes_own_run(request) else Destruction.REVERTS


def undoes_own_run(request: ToolRequest) -> bool:
    """The revert undoes the run the call is in, a run the connection (stdio, the session, the HTTP
    client, `X-Mnote-Run-Id`, `--run-id`) or the client's `_meta` chose: not one the call's arguments
    name, which an instruction planted in a page could choose (another session's run, the person's)."""
    return request.args.get("undoRunId") == request.correlation.run_id and not request.run_named


async def renames_shared_page(request: ToolRequest, impact: Impact, kernel: Kernel) -> Destruction | None:
    """when another actor wrote one of the page's last 50 writes"""
    if impact.title is None:
        return None
    history = await kernel.page_history(
        HistoryQuery(
            workspace_id=request.workspace_id,
            document_id=request.document_id,
            actor_id=request.actor_id,
            correlation=request.correlation,
            limit=SHARED_LOOKBACK,
        )
    )
    others = {entry.get("actorId") for entry in history.get("entries", [])} - {request.actor_id}
    return Destruction.RENAMES_SHARED if others else None


class Undecided(StrEnum):
    UNDECIDED = "undecided"  # the rule needs the call's plan


UNDECIDED = Undecided.UNDECIDED


def before_plan(rule: Destructive, request: ToolRequest) -> Verdict | Undecided:
    """What `rule` says of `request` from its arguments alone, where it needs no plan: an `append`
    save never removes blocks, and the undo of the caller's own run is exempt. Anything else is
    `UNDECIDED` and planned (a dry run) first: the check costs nothing where the answer is known."""
    if rule is removes_blocks and request.args.get("mode") == "append":
        return None
    if rule is reverts and undoes_own_run(request):
        return Exempt.OWN_RUN
    return UNDECIDED
