"""The block commands: one block-level edit each, addressed by id (insert, update, delete, move).

A target that does not exist is `not_found`; a change that cannot be made is `invalid_argument` with a
pointer; nothing ever falls back to a rewrite. Each says which blocks it relies on (`depends`), so that
a stale `baseRevision` is accepted when none of them changed since (block-level concurrency).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import NotRequired, TypedDict

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
from mnote_mcp.kernel.store.commands.section import Chosen, choose, refuse_nested
from mnote_mcp.kernel.store.commands.spec import CommandSpec
from mnote_mcp.kernel.store.plan import Plan, Tx, body_plan
from mnote_mcp.kernel.store.rows import TOP, BlockChange, BlockRow, PageBlocks, new_rows

# -- page.block.insert -----------------------------------------------------------------------


class InsertPayload(Placement):
    blocks: list[NewBlock]


def _validate_insert(payload: Mapping[str, object]) -> InsertPayload:
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
    named=lambda p: [
        *(bid for bid in (p["afterBlockId"], p["parentId"]) if bid is not None),
        *ids_in(p["blocks"]),
    ],
)


# -- page.block.update -----------------------------------------------------------------------


class UpdatePayload(TypedDict):
    blockId: str
    type: NotRequired[str]
    text: NotRequired[str]
    props: NotRequired[dict[str, object]]


def _validate_update(payload: Mapping[str, object]) -> UpdatePayload:
    target = block_id(payload.get("blockId"), "/blockId")
    given = {name: payload[name] for name in ("type", "text", "props") if payload.get(name) not in (None, {})}
    if not given:  # named at the argument meant (issue 30: the pointer was "", "invalid argument at : ...")
        raise invalid(
            "/props" if "props" in payload else "/text", "nothing to change: give type, text or props"
        )
    out: UpdatePayload = {"blockId": target}
    if "type" in given:
        kind = given["type"]
        if isinstance(kind, str) and kind in BLOCK_TYPES:
            out["type"] = kind
        else:
            normalize_block({"type": kind})  # raises the block model's own block_type refusal
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
    props: dict[str, object] = dict(row.props)
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
    named=lambda p: [p["blockId"]],
)


# -- page.block.delete -----------------------------------------------------------------------


class DeletePayload(TypedDict):
    blockIds: list[str]
    section: bool


def _validate_delete(payload: Mapping[str, object]) -> DeletePayload:
    raw = payload.get("blockIds")
    if isinstance(raw, list) and not raw:
        raise invalid("/blockIds", "nothing to delete: blockIds is empty")
    return {"blockIds": block_ids(raw, "/blockIds", unique=True), "section": _flag(payload, "section")}


def _flag(payload: Mapping[str, object], name: str) -> bool:
    value = payload.get(name)
    if value is not None and not isinstance(value, bool):
        raise invalid(f"/{name}", "must be a boolean")
    return bool(value)


def _pointers(name: str, count: int) -> list[str]:
    return [f"/{name}/{index}" for index in range(count)]


def _subtrees(tx: Tx, ids: list[str]) -> list[list[BlockRow]]:
    """The subtrees of the named blocks that exist (`PageBlocks.named_subtrees`); many ids read the
    whole page (a long page is planned off the event loop: `bounds.inline_ok`)."""
    return tx.blocks.named_subtrees(ids)


def _chosen_for_delete(tx: Tx, p: DeletePayload, *, strict: bool = True) -> Chosen:
    named = p["blockIds"]
    return choose(tx, named, _pointers("blockIds", len(named)), sections=p["section"], strict=strict)


def _plan_delete(tx: Tx, p: DeletePayload) -> Plan:
    removed = [row for subtree in _subtrees(tx, _chosen_for_delete(tx, p).ids) for row in subtree]
    changes = [BlockChange(row.id, row, None) for row in removed]
    diff: list[Op] = [{"op": "delete", "blockId": row.id} for row in removed]
    return body_plan(tx, changes, diff, {"blockIds": [row.id for row in removed]})


def _delete_depends(tx: Tx, p: DeletePayload) -> list[str]:
    """The named blocks (a missing one may have been deleted since), their sections and the headings
    that end them, and everything under them."""
    chosen = _chosen_for_delete(tx, p, strict=False)
    under = _subtrees(tx, chosen.ids)
    return list(
        dict.fromkeys(
            [
                *p["blockIds"],
                *(row.id for subtree in under for row in subtree),
                *(end.id for end in chosen.ends),
            ]
        )
    )


DELETE = CommandSpec(
    name="page.block.delete",
    scope=Scope.PAGE_WRITE,
    payload="{blockIds, section?}",
    does=(
        "delete blocks with their children, with `section` a heading with its section (at most 20,000"
        " ids, none twice; with more than 2,000 the checkpoints come before the ids are looked at)"
    ),
    validate=_validate_delete,
    plan=_plan_delete,
    depends=_delete_depends,
    relies_on=(
        "each block named and every block now under it (a child added since would be lost), with"
        " `section` every block of the section and the heading that ends it"
    ),
)


# -- page.block.move -------------------------------------------------------------------------


class MovePayload(Placement):
    blockId: str  # noqa: N815 - the payload's own key (a TypedDict of a TypedDict)
    blockIds: list[str]  # noqa: N815 - more blocks, placed after it in this order
    section: bool


def _validate_move(payload: Mapping[str, object]) -> MovePayload:
    first = block_id(payload.get("blockId"), "/blockId")
    more = [] if payload.get("blockIds") is None else block_ids(payload["blockIds"], "/blockIds", unique=True)
    if first in more:
        raise invalid(f"/blockIds/{more.index(first)}", "is blockId again", blockId=first)
    return {"blockId": first, "blockIds": more, "section": _flag(payload, "section"), **placement(payload)}


def _move_named(p: MovePayload) -> tuple[list[str], list[str]]:
    """The blocks named, in order, and their pointers."""
    return [p["blockId"], *p["blockIds"]], ["/blockId", *_pointers("blockIds", len(p["blockIds"]))]


def _plan_move(tx: Tx, p: MovePayload) -> Plan:
    named, pointers = _move_named(p)
    chosen = choose(tx, named, pointers, sections=p["section"])
    refuse_nested(tx.blocks, named, pointers, chosen)
    rows, ids = chosen.rows, chosen.ids
    at = slot(tx, p, moving=ids)
    at.check_fits(max(_height(subtree) for subtree in _subtrees(tx, ids)), "/blockId")
    if _in_place(tx.blocks, rows, at.parent_id, at.after_id):
        return Plan(diff=[], changed=False, data={"blockIds": []})
    new_keys, rekeys = keys(tx, at, len(rows), moving=ids)
    changes = list(rekeys)
    diff: list[PlacedOp] = []
    previous = at.after_id
    for row, key in zip(rows, new_keys, strict=True):
        after = replace(row, parent_id=at.parent_id, position=key, revision=tx.next_revision)
        changes.append(BlockChange(row.id, row, after))
        diff.append(placed("move", row.id, at.parent_id or None, previous))
        previous = row.id
    return body_plan(tx, changes, diff, {"blockIds": ids})


def _in_place(blocks: PageBlocks, rows: list[BlockRow], parent_id: str, after_id: str | None) -> bool:
    """Whether the blocks already sit, in this order, right after `after_id` under `parent_id`."""
    previous = after_id
    for row in rows:
        if row.parent_id != parent_id:
            return False
        before = blocks.sibling(row, following=False)
        if (before.id if before else None) != previous:
            return False
        previous = row.id
    return True


def _height(subtree: list[BlockRow]) -> int:
    depth = {subtree[0].id: 1}
    for row in subtree[1:]:
        depth[row.id] = depth[row.parent_id] + 1
    return max(depth.values())


def _move_depends(tx: Tx, p: MovePayload) -> list[str]:
    named, pointers = _move_named(p)
    chosen = choose(tx, named, pointers, sections=p["section"], strict=False)
    old_parents = [row.parent_id for row in chosen.rows if row.parent_id != TOP]
    return [
        *named,
        *chosen.ids,
        *(end.id for end in chosen.ends),
        *(b for b in (p["afterBlockId"], p["parentId"]) if b is not None),
        *old_parents,
    ]


MOVE = CommandSpec(
    name="page.block.move",
    scope=Scope.PAGE_WRITE,
    payload="{blockId, blockIds?, section?, afterBlockId?, parentId?, position?}",
    does=(
        "move a block with its children, then `blockIds` after it in that order; with `section` each"
        " heading with its section"
    ),
    validate=_validate_move,
    plan=_plan_move,
    depends=_move_depends,
    relies_on=(
        "the blocks, the anchor, their old parents and the new parent, with `section` every block of"
        " the section and the heading that ends it"
    ),
)

COMMANDS = (INSERT, UPDATE, DELETE, MOVE)
