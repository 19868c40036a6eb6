"""The block commands: one block-level edit each, addressed by id (insert, update, delete, move).

A target that does not exist is `not_found`; a change that cannot be made is `invalid_argument` with a
pointer; nothing ever falls back to a rewrite. Each says which blocks it relies on (`depends`), so that
a stale `baseRevision` is accepted when none of them changed since (block-level concurrency).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, NotRequired, TypedDict

from mnote_mcp.kernel.blocks import (
    BLOCK_TYPES,
    Block,
    NewBlock,
    assign_ids,
    block_id,
    block_ids,
    block_not_found,
    height,
    ids_in,
    normalize_block,
    normalize_blocks,
    walk,
    walk_pointers,
)
from mnote_mcp.kernel.diff import FIELDS, Op, PlacedOp, placed
from mnote_mcp.kernel.errors import invalid
from mnote_mcp.kernel.scopes import Scope
from mnote_mcp.kernel.store.commands.placement import PageIds, Placement, keys, placement, slot
from mnote_mcp.kernel.store.commands.spec import CommandSpec
from mnote_mcp.kernel.store.plan import Plan, Tx, body_plan
from mnote_mcp.kernel.store.rows import FEW_IDS, TOP, BlockChange, BlockRow, new_rows

# -- page.block.insert -----------------------------------------------------------------------


class InsertPayload(Placement):
    blocks: list[NewBlock]


def _validate_insert(payload: Mapping[str, Any]) -> InsertPayload:
    blocks = normalize_blocks(payload.get("blocks"), "/blocks")
    if not blocks:
        raise invalid("/blocks", "nothing to insert: blocks is empty")
    return {"blocks": blocks, **placement(payload)}


def _plan_insert(tx: Tx, p: InsertPayload) -> Plan:
    blocks = p["blocks"]
    given = ids_in(blocks)
    on_page = tx.blocks.get_many(given)
    for new, pointer in walk_pointers(blocks, "/blocks"):
        if new["id"] in on_page:
            raise invalid(f"{pointer}/id", "block id already on the page", blockId=new["id"])
    at = slot(tx, p)
    at.check_fits(max(height(block) for block in blocks), "/blocks")
    page = tx.page
    added = assign_ids(
        blocks, f"{page.workspace_id}/{page.id}@{page.revision}:block.insert", PageIds(tx.blocks, set(given))
    )
    new_keys, rekeys = keys(tx, at, len(added))
    diff: list[PlacedOp] = []
    for block, parent, _ in walk(added, at.parent_id or None):
        diff.append(placed("insert", block["id"], parent, None))
    _link_afters(diff, added, at.after_id)
    changes = rekeys + new_rows(added, at.parent_id, new_keys, tx.next_revision)
    return body_plan(tx, changes, diff, {"blockIds": [op["blockId"] for op in diff]})


def _link_afters(diff: list[PlacedOp], added: list[Block], first_after: str | None) -> None:
    """Fill each insert op's `after` (its previous sibling), in the walk order of `diff`."""
    afters: dict[str, str | None] = {}

    def visit(siblings: list[Block], previous: str | None) -> None:
        for block in siblings:
            afters[block["id"]] = previous
            previous = block["id"]
            visit(block.get("children") or [], None)

    visit(added, first_after)
    for op in diff:
        op["after"] = afters[op["blockId"]]


def _insert_depends(tx: Tx, p: InsertPayload) -> list[str]:
    return [bid for bid in (p["afterBlockId"], p["parentId"]) if bid is not None]


INSERT = CommandSpec(
    name="page.block.insert",
    scope=Scope.PAGE_WRITE,
    payload="{blocks, afterBlockId?, parentId?, position?}",
    does="insert `blocks` (ids optional, assigned deterministically)",
    validate=_validate_insert,
    plan=_plan_insert,
    depends=_insert_depends,
    relies_on="the anchor (`afterBlockId`) and the parent (`parentId`), if named",
)


# -- page.block.update -----------------------------------------------------------------------


class UpdatePayload(TypedDict):
    blockId: str
    type: NotRequired[str]
    text: NotRequired[str]
    props: NotRequired[dict[str, Any]]


def _validate_update(payload: Mapping[str, Any]) -> UpdatePayload:
    target = block_id(payload.get("blockId"), "/blockId")
    given = {name: payload[name] for name in ("type", "text", "props") if payload.get(name) not in (None, {})}
    if not given:
        raise invalid("", "nothing to change: give type, text or props")
    out: UpdatePayload = {"blockId": target}
    if "type" in given:
        kind = given["type"]
        if not isinstance(kind, str) or kind not in BLOCK_TYPES:
            normalize_block({"type": kind})  # raises the block model's own block_type refusal
        out["type"] = kind
    if "text" in given:
        if not isinstance(given["text"], str):
            raise invalid("/text", "must be a string")
        out["text"] = given["text"]
    if "props" in given:
        if not isinstance(given["props"], dict):
            raise invalid("/props", "must be an object")
        out["props"] = given["props"]
    return out


def _plan_update(tx: Tx, p: UpdatePayload) -> Plan:
    row = tx.blocks.get(p["blockId"])
    if row is None:
        raise block_not_found(p["blockId"], "/blockId")
    kind = p.get("type", row.type)
    spec = BLOCK_TYPES[kind]
    if not spec.has_children and tx.blocks.has_children(row.id):
        raise invalid(
            "/type",
            f"the block has children; a {kind} block has none",
            typesWithChildren=[name for name, t in BLOCK_TYPES.items() if t.has_children],
        )
    props = dict(row.props)
    if kind != row.type:  # props the new type does not have go; shared ones stay
        props = {name: value for name, value in props.items() if name in spec.props}
    props.update(p.get("props", {}))
    merged = {
        "id": row.id,
        "type": kind,
        "text": p.get("text", row.text if spec.has_text else ""),
        "props": {name: value for name, value in props.items() if value is not None},
    }
    updated = normalize_block(merged, "")
    after = replace(
        row,
        type=updated["type"],
        text=updated["text"],
        props=updated.get("props", {}),
        revision=tx.next_revision,
    )
    if after.same_content(row):
        return Plan(diff=[], changed=False, data={"blockIds": []})
    fields = [name for name in FIELDS if getattr(row, name) != getattr(after, name)]
    changes = [BlockChange(row.id, row, after)]
    return body_plan(
        tx, changes, [{"op": "update", "blockId": row.id, "fields": fields}], {"blockIds": [row.id]}
    )


def _update_depends(tx: Tx, p: UpdatePayload) -> list[str]:
    return [p["blockId"]]


UPDATE = CommandSpec(
    name="page.block.update",
    scope=Scope.PAGE_WRITE,
    payload="{blockId, type?, text?, props?}",
    does=(
        "change one block; `props` merge into its props (`null` resets one), a type change drops props"
        " the new type lacks and, for a divider, the text"
    ),
    validate=_validate_update,
    plan=_plan_update,
    depends=_update_depends,
    relies_on="the block",
)


# -- page.block.delete -----------------------------------------------------------------------


class DeletePayload(TypedDict):
    blockIds: list[str]


def _validate_delete(payload: Mapping[str, Any]) -> DeletePayload:
    raw = payload.get("blockIds")
    if isinstance(raw, list) and not raw:
        raise invalid("/blockIds", "nothing to delete: blockIds is empty")
    return {"blockIds": block_ids(raw, "/blockIds", unique=True)}


def _subtrees(tx: Tx, ids: list[str]) -> list[list[BlockRow]]:
    """The subtrees of the named blocks that exist (`PageBlocks.named_subtrees`); many ids read the
    whole page, which a long page does off the event loop."""
    if len(ids) > FEW_IDS:
        tx.whole_page()
    return tx.blocks.named_subtrees(ids)


def _deleted_rows(tx: Tx, ids: list[str]) -> list[BlockRow]:
    """The rows the delete removes: each named block with its subtree, in document order."""
    found = tx.blocks.get_many(ids)
    for index, target in enumerate(ids):
        if target not in found:
            raise block_not_found(target, f"/blockIds/{index}")
    return [row for subtree in _subtrees(tx, ids) for row in subtree]


def _plan_delete(tx: Tx, p: DeletePayload) -> Plan:
    removed = _deleted_rows(tx, p["blockIds"])
    changes = [BlockChange(row.id, row, None) for row in removed]
    diff: list[Op] = [{"op": "delete", "blockId": row.id} for row in removed]
    return body_plan(tx, changes, diff, {"blockIds": [row.id for row in removed]})


def _delete_depends(tx: Tx, p: DeletePayload) -> list[str]:
    """The named blocks (a missing one may have been deleted since) and everything under them."""
    named = p["blockIds"]
    found = tx.blocks.get_many(named)
    under = _subtrees(tx, [bid for bid in named if bid in found])
    return list(dict.fromkeys([*named, *(row.id for subtree in under for row in subtree)]))


DELETE = CommandSpec(
    name="page.block.delete",
    scope=Scope.PAGE_WRITE,
    payload="{blockIds}",
    does=(
        "delete blocks with their children (at most 20,000 ids, none twice; with more than 2,000 the"
        " checkpoints come before the ids are looked at)"
    ),
    validate=_validate_delete,
    plan=_plan_delete,
    depends=_delete_depends,
    relies_on="each block named and every block now under it (a child added since would be lost)",
)


# -- page.block.move -------------------------------------------------------------------------


class MovePayload(Placement):
    blockId: str  # noqa: N815 - the payload's own key (a TypedDict of a TypedDict)


def _validate_move(payload: Mapping[str, Any]) -> MovePayload:
    return {"blockId": block_id(payload.get("blockId"), "/blockId"), **placement(payload)}


def _plan_move(tx: Tx, p: MovePayload) -> Plan:
    row = tx.blocks.get(p["blockId"])
    if row is None:
        raise block_not_found(p["blockId"], "/blockId")
    at = slot(tx, p, moving=row.id)
    subtree = tx.blocks.subtree(row.id)
    at.check_fits(_height(subtree, row.id), "/blockId")
    previous = tx.blocks.sibling(row, following=False)
    if at.parent_id == row.parent_id and at.after_id == (previous.id if previous else None):
        return Plan(diff=[], changed=False, data={"blockIds": []})
    (key,), rekeys = keys(tx, at, 1, moving=row.id)
    after = replace(row, parent_id=at.parent_id, position=key, revision=tx.next_revision)
    diff = [placed("move", row.id, at.parent_id or None, at.after_id)]
    return body_plan(tx, [*rekeys, BlockChange(row.id, row, after)], diff, {"blockIds": [row.id]})


def _height(subtree: list[BlockRow], root: str) -> int:
    depth = {root: 1}
    for row in subtree[1:]:
        depth[row.id] = depth[row.parent_id] + 1
    return max(depth.values())


def _move_depends(tx: Tx, p: MovePayload) -> list[str]:
    row = tx.blocks.get(p["blockId"])
    old_parent = [row.parent_id] if row is not None and row.parent_id != TOP else []
    return [p["blockId"], *(b for b in (p["afterBlockId"], p["parentId"]) if b is not None), *old_parent]


MOVE = CommandSpec(
    name="page.block.move",
    scope=Scope.PAGE_WRITE,
    payload="{blockId, afterBlockId?, parentId?, position?}",
    does="move a block with its children",
    validate=_validate_move,
    plan=_plan_move,
    depends=_move_depends,
    relies_on="the block, the anchor, its old parent and its new parent",
)

COMMANDS: tuple[CommandSpec[Any], ...] = (INSERT, UPDATE, DELETE, MOVE)
