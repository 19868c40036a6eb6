"""What each kernel command validates, plans and writes, declared once per command.

`validate` is pure (payload in, canonical payload out). `plan` reads what it needs of the page (a
block edit: the rows it names, their neighbours and ancestors; a replace: every row) and computes the
row changes, the new title or options, and the diff that both a dry run and the real call report. The
store writes a plan; only artifact commands bring their own `apply`. The Markdown text diff is a
function, called for dry runs only. `depends` names the blocks a block edit relies on, so that a
stale `baseRevision` can be accepted when none of them changed since (block-level concurrency).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from mnote_mcp.kernel.blocks import (
    BLOCK_TYPES,
    MAX_DEPTH,
    Block,
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
from mnote_mcp.kernel.diff import append_diff, placed, replace_diff
from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason, invalid
from mnote_mcp.kernel.local.access import PageHead, option_registry
from mnote_mcp.kernel.local.encoding import now
from mnote_mcp.kernel.local.history import HeadChange
from mnote_mcp.kernel.local.orderkeys import keys_between, too_long
from mnote_mcp.kernel.local.plan import CommandSpec, Plan, Tx, body_plan
from mnote_mcp.kernel.local.revert import plan_revert, validate_revert
from mnote_mcp.kernel.local.rows import (
    FEW_IDS,
    TOP,
    BlockChange,
    BlockRow,
    PageBlocks,
    new_rows,
    replace_rows,
    tree_of,
)
from mnote_mcp.kernel.local.sql import Connection
from mnote_mcp.kernel.port import CommandName

MAX_TITLE_LENGTH = 500
MAX_ARTIFACT_LENGTH = 100_000

Position = Literal["start", "end"]


def _text(payload: Mapping[str, Any], name: str, limit: int) -> str:
    value = payload.get(name)
    if not isinstance(value, str):
        raise invalid(f"/{name}", "must be a string")
    if not value.strip():
        raise invalid(f"/{name}", "must not be empty or blank")
    if len(value) > limit:
        raise invalid(f"/{name}", f"longer than {limit} characters")
    return value


class _PageIds:
    """The ids on the page (asked one at a time) plus the ones being added."""

    def __init__(self, blocks: PageBlocks, adding: set[str]) -> None:
        self.blocks = blocks
        self.adding = adding

    def __contains__(self, block: object) -> bool:
        return block in self.adding or (isinstance(block, str) and self.blocks.exists(block))

    def add(self, block: str) -> None:
        self.adding.add(block)


# -- placement ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Slot:
    """Where blocks go: under `parent_id` (TOP: the page), between the order keys `low` and `high`,
    right after the block `after_id` (None: first). `depth` is the depth of a block placed there."""

    parent_id: str
    after_id: str | None
    low: str | None
    high: str | None
    depth: int

    def check_fits(self, heights: int, pointer: str) -> None:
        deepest = self.depth - 1 + heights
        if deepest > MAX_DEPTH:
            raise invalid(pointer, f"would nest deeper than {MAX_DEPTH} levels", depth=deepest)


def _slot(tx: Tx, p: dict[str, Any], moving: str | None = None) -> Slot:
    """Resolve where blocks would go, refusing what cannot be: the parent first, then the anchor."""
    blocks = tx.blocks
    parent_id: str | None = p["parentId"]
    after_id: str | None = p["afterBlockId"]
    parent_depth = 0
    if parent_id is not None:
        parent = blocks.get(parent_id)
        if parent is None:
            raise block_not_found(parent_id, "/parentId")
        if moving is not None and blocks.within(parent_id, moving):
            raise invalid("/parentId", "is the moved block or inside it", blockId=parent_id)
        if not BLOCK_TYPES[parent.type].has_children:
            raise invalid(
                "/parentId",
                f"a {parent.type} block has no children",
                typesWithChildren=[name for name, spec in BLOCK_TYPES.items() if spec.has_children],
            )
        parent_depth = blocks.depth(parent_id)
    if after_id is None:
        container = parent_id if parent_id is not None else TOP
        if p["position"] == "start":
            first = blocks.edge_child(container, last=False, skip=moving)
            return Slot(container, None, None, first.position if first else None, parent_depth + 1)
        last = blocks.edge_child(container, last=True, skip=moving)
        return Slot(
            container, last.id if last else None, last.position if last else None, None, parent_depth + 1
        )
    anchor = blocks.get(after_id)
    if anchor is None:
        raise block_not_found(after_id, "/afterBlockId")
    if moving is not None and blocks.within(after_id, moving):
        raise invalid("/afterBlockId", "is the moved block or inside it", blockId=after_id)
    if parent_id is not None and anchor.parent_id != parent_id:
        raise invalid(
            "/afterBlockId",
            "is not a direct child of parentId",
            blockId=after_id,
            parentId=parent_id,
            actualParentId=anchor.parent_id or None,
        )
    following = blocks.sibling(anchor, following=True, skip=moving)
    return Slot(
        anchor.parent_id,
        anchor.id,
        anchor.position,
        following.position if following else None,
        blocks.depth(after_id),
    )


def _keys(tx: Tx, slot: Slot, count: int, moving: str | None = None) -> tuple[list[str], list[BlockChange]]:
    """Order keys for `count` blocks placed at `slot`; if the gap is worn thin, the siblings are
    respaced and their new keys come back as `rekey` changes."""
    keys = keys_between(slot.low, slot.high, count)
    if not too_long(keys):
        return keys, []
    siblings = [row for row in tx.blocks.children(slot.parent_id) if row.id != moving]
    index = (
        0 if slot.after_id is None else 1 + next(i for i, r in enumerate(siblings) if r.id == slot.after_id)
    )
    fresh = keys_between(None, None, len(siblings) + count)
    others = fresh[:index] + fresh[index + count :]
    rekeys = [
        BlockChange(row.id, row, replace(row, position=key), rekey=True)
        for row, key in zip(siblings, others, strict=True)
        if row.position != key
    ]
    return fresh[index : index + count], rekeys


# -- page.body.save --------------------------------------------------------------------------


def _validate_save(payload: Mapping[str, Any]) -> dict[str, Any]:
    mode = payload.get("mode", "replace")
    if mode not in ("replace", "append"):
        raise invalid("/mode", "must be 'replace' or 'append'")
    content = normalize_blocks(payload.get("content"), "/content")
    if mode == "append" and not content:
        raise invalid("/content", "nothing to append: content is empty")
    return {"mode": mode, "content": content}


def _plan_save(tx: Tx, p: dict[str, Any]) -> Plan:
    content: list[Block] = p["content"]
    page = tx.page
    seed = f"{page.workspace_id}/{page.id}@{page.revision}:{p['mode']}"
    if p["mode"] == "append":
        given = ids_in(content)
        clash = sorted(tx.blocks.get_many(given))
        if clash:
            raise invalid(
                "/content", "block id already on the page; append adds new blocks", blockId=clash[0]
            )
        added = assign_ids(content, seed, _PageIds(tx.blocks, set(given)))
        slot = _slot(tx, {"parentId": None, "afterBlockId": None, "position": "end"})
        keys, rekeys = _keys(tx, slot, len(added))
        changes = rekeys + new_rows(added, TOP, keys, tx.next_revision)
        return body_plan(tx, changes, append_diff(added), {"blockIds": [block["id"] for block in added]})
    tx.whole_page(len(content))
    rows = {row.id: row for row in tx.blocks.all()}
    old = tree_of(rows.values())
    body = assign_ids(content, seed, ids_in(content) | set(rows))
    diff = replace_diff(old, body)
    return body_plan(tx, replace_rows(rows, body, diff, tx.next_revision), diff, {}, body)


# -- page.head.updateTitle, page.layout.updateOptions ----------------------------------------


def _validate_title(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {"title": _text(payload, "title", MAX_TITLE_LENGTH)}


def _plan_title(tx: Tx, p: dict[str, Any]) -> Plan:
    title: str = p["title"]
    if title == tx.page.title:
        return Plan(diff=[], changed=False)
    return Plan(
        diff=[{"op": "set", "field": "title", "from": tx.page.title, "to": title}],
        changed=True,
        head=HeadChange(title=(tx.page.title, title)),
    )


def _validate_options(payload: Mapping[str, Any]) -> dict[str, Any]:
    options = payload.get("options")
    if not isinstance(options, dict):
        raise invalid("/options", "must be an object")
    if not options:
        raise invalid("/options", "no option given: name at least one option to change")
    for name, value in options.items():
        if not isinstance(value, bool):
            raise invalid(f"/options/{name}", "must be a boolean")
    return {"options": dict(options)}


def _plan_options(tx: Tx, p: dict[str, Any]) -> Plan:
    registry = option_registry(tx.conn)
    requested: dict[str, bool] = p["options"]
    current = tx.page.options
    unknown = sorted(name for name in requested if name not in registry)
    if unknown:
        raise invalid(f"/options/{unknown[0]}", "unknown page option", knownOptions=sorted(registry))
    not_wired = sorted(name for name in requested if registry[name] != "wired")
    if not_wired and not tx.command.dry_run:
        raise MnoteError(
            ErrorCode.OPTION_NOT_WIRED,
            Reason.OPTION,
            {"options": not_wired, "runtimeSupport": {name: registry[name] for name in not_wired}},
        )
    warnings = [
        {
            "code": ErrorCode.OPTION_NOT_WIRED.value,
            "reason": Reason.OPTION.value,
            "details": {"options": [name], "runtimeSupport": {name: registry[name]}},
        }
        for name in not_wired
    ]
    diff = [
        {"op": "set", "option": name, "from": current.get(name), "to": value}
        for name, value in requested.items()
        if current.get(name) != value
    ]
    return Plan(
        diff=diff,
        changed=bool(diff),
        head=HeadChange(options=(dict(current), {**current, **requested})) if diff else HeadChange(),
        warnings=warnings,
    )


# -- page.block.* ----------------------------------------------------------------------------
# One block-level edit each, addressed by id. A target that does not exist is `not_found`; a change
# that cannot be made is `invalid_argument` with a pointer; nothing ever falls back to a rewrite.


def _optional_id(payload: Mapping[str, Any], name: str) -> str | None:
    value = payload.get(name)
    return None if value is None else block_id(value, f"/{name}")


def _placement(payload: Mapping[str, Any]) -> dict[str, Any]:
    after = _optional_id(payload, "afterBlockId")
    position = payload.get("position")
    if position is not None and position not in ("start", "end"):
        raise invalid("/position", "must be 'start' or 'end'")
    if after is not None and position is not None:
        raise invalid("/position", "give afterBlockId or position, not both")
    return {
        "afterBlockId": after,
        "parentId": _optional_id(payload, "parentId"),
        "position": position or "start",
    }


def _validate_insert(payload: Mapping[str, Any]) -> dict[str, Any]:
    blocks = normalize_blocks(payload.get("blocks"), "/blocks")
    if not blocks:
        raise invalid("/blocks", "nothing to insert: blocks is empty")
    return {"blocks": blocks, **_placement(payload)}


def _plan_insert(tx: Tx, p: dict[str, Any]) -> Plan:
    blocks: list[Block] = p["blocks"]
    given = ids_in(blocks)
    on_page = tx.blocks.get_many(given)
    for block, pointer in walk_pointers(blocks, "/blocks"):
        if block["id"] in on_page:
            raise invalid(f"{pointer}/id", "block id already on the page", blockId=block["id"])
    slot = _slot(tx, p)
    slot.check_fits(max(height(block) for block in blocks), "/blocks")
    page = tx.page
    added = assign_ids(
        blocks, f"{page.workspace_id}/{page.id}@{page.revision}:block.insert", _PageIds(tx.blocks, set(given))
    )
    keys, rekeys = _keys(tx, slot, len(added))
    diff: list[dict[str, Any]] = []
    for block, parent, _ in walk(added, slot.parent_id or None):
        diff.append(placed("insert", block["id"], parent, None))
    _link_afters(diff, added, slot.after_id)
    changes = rekeys + new_rows(added, slot.parent_id, keys, tx.next_revision)
    return body_plan(tx, changes, diff, {"blockIds": [op["blockId"] for op in diff]})


def _link_afters(diff: list[dict[str, Any]], added: list[Block], first_after: str | None) -> None:
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


def _insert_depends(tx: Tx, p: dict[str, Any]) -> list[str]:
    return [bid for bid in (p["afterBlockId"], p["parentId"]) if bid is not None]


def _validate_update(payload: Mapping[str, Any]) -> dict[str, Any]:
    target = block_id(payload.get("blockId"), "/blockId")
    changes = {
        name: payload[name] for name in ("type", "text", "props") if payload.get(name) not in (None, {})
    }
    if not changes:
        raise invalid("", "nothing to change: give type, text or props")
    if "type" in changes and (not isinstance(changes["type"], str) or changes["type"] not in BLOCK_TYPES):
        normalize_block({"type": changes["type"]})  # raises the block model's own block_type refusal
    if "text" in changes and not isinstance(changes["text"], str):
        raise invalid("/text", "must be a string")
    if "props" in changes and not isinstance(changes["props"], dict):
        raise invalid("/props", "must be an object")
    return {"blockId": target, **changes}


def _plan_update(tx: Tx, p: dict[str, Any]) -> Plan:
    row = tx.blocks.get(p["blockId"])
    if row is None:
        raise block_not_found(p["blockId"], "/blockId")
    kind = str(p.get("type", row.type))
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
    fields = [
        name
        for name, old, new in (
            ("type", row.type, after.type),
            ("text", row.text, after.text),
            ("props", row.props, after.props),
        )
        if old != new
    ]
    changes = [BlockChange(row.id, row, after)]
    return body_plan(
        tx, changes, [{"op": "update", "blockId": row.id, "fields": fields}], {"blockIds": [row.id]}
    )


def _update_depends(tx: Tx, p: dict[str, Any]) -> list[str]:
    return [p["blockId"]]


def _validate_delete(payload: Mapping[str, Any]) -> dict[str, Any]:
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


def _plan_delete(tx: Tx, p: dict[str, Any]) -> Plan:
    removed = _deleted_rows(tx, p["blockIds"])
    changes = [BlockChange(row.id, row, None) for row in removed]
    diff = [{"op": "delete", "blockId": row.id} for row in removed]
    return body_plan(tx, changes, diff, {"blockIds": [row.id for row in removed]})


def _delete_depends(tx: Tx, p: dict[str, Any]) -> list[str]:
    """The named blocks (a missing one may have been deleted since) and everything under them."""
    named: list[str] = p["blockIds"]
    found = tx.blocks.get_many(named)
    under = _subtrees(tx, [bid for bid in named if bid in found])
    return list(dict.fromkeys([*named, *(row.id for subtree in under for row in subtree)]))


def _validate_move(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {"blockId": block_id(payload.get("blockId"), "/blockId"), **_placement(payload)}


def _plan_move(tx: Tx, p: dict[str, Any]) -> Plan:
    row = tx.blocks.get(p["blockId"])
    if row is None:
        raise block_not_found(p["blockId"], "/blockId")
    slot = _slot(tx, p, moving=row.id)
    subtree = tx.blocks.subtree(row.id)
    slot.check_fits(_height(subtree, row.id), "/blockId")
    previous = tx.blocks.sibling(row, following=False)
    if slot.parent_id == row.parent_id and slot.after_id == (previous.id if previous else None):
        return Plan(diff=[], changed=False, data={"blockIds": []})
    (key,), rekeys = _keys(tx, slot, 1, moving=row.id)
    after = replace(row, parent_id=slot.parent_id, position=key, revision=tx.next_revision)
    diff = [placed("move", row.id, slot.parent_id or None, slot.after_id)]
    return body_plan(tx, [*rekeys, BlockChange(row.id, row, after)], diff, {"blockIds": [row.id]})


def _height(subtree: list[BlockRow], root: str) -> int:
    depth = {root: 1}
    for row in subtree[1:]:
        depth[row.id] = depth[row.parent_id] + 1
    return max(depth.values())


def _move_depends(tx: Tx, p: dict[str, Any]) -> list[str]:
    row = tx.blocks.get(p["blockId"])
    old_parent = [row.parent_id] if row is not None and row.parent_id != TOP else []
    return [p["blockId"], *(b for b in (p["afterBlockId"], p["parentId"]) if b is not None), *old_parent]


# -- artifacts -------------------------------------------------------------------------------


def _validate_summary(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {"summary": _text(payload, "summary", MAX_ARTIFACT_LENGTH)}


def _validate_note(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {"content": _text(payload, "content", MAX_ARTIFACT_LENGTH)}


def _artifact_id(prefix: str, *parts: str) -> str:
    return f"{prefix}_{hashlib.sha256(chr(0).join(parts).encode()).hexdigest()[:16]}"


def _plan_summary(tx: Tx, p: dict[str, Any]) -> Plan:
    page, cmd, conn = tx.page, tx.command, tx.conn
    text: str = p["summary"]
    row = conn.execute(
        "SELECT id, content FROM artifacts WHERE workspace_id = ? AND page_id = ? AND kind = 'summary'",
        (page.workspace_id, page.id),
    ).fetchone()
    artifact_id = row[0] if row else _artifact_id("sum", page.workspace_id, page.id)
    edge_id = _artifact_id("edge", artifact_id, page.id, "reference")
    edge_exists = row is not None and _edge_exists(conn, artifact_id, page.id)
    data = {"artifactId": artifact_id, "edgeId": edge_id, "kind": "summary", "sourceRevision": page.revision}
    diff: list[dict[str, Any]] = []
    if row is None or row[1] != text:
        diff.append({"op": "update" if row else "create", "artifact": "summary", "artifactId": artifact_id})
    diff.append({"op": "confirm" if edge_exists else "create", "edge": "reference", "edgeId": edge_id})
    changed = row is None or row[1] != text or not edge_exists

    def apply(conn: Connection, command_id: str) -> int:
        c = cmd.correlation
        stamp = now()
        provenance = (cmd.actor_id, c.session_id, c.run_id, c.tool_call_id, c.trace_id, command_id)
        if row is None:
            conn.execute(
                "INSERT INTO artifacts (id, workspace_id, page_id, kind, content, version, source_revision,"
                " actor_id, session_id, run_id, tool_call_id, trace_id, command_id, created_at, updated_at)"
                " VALUES (?, ?, ?, 'summary', ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (artifact_id, page.workspace_id, page.id, text, page.revision, *provenance, stamp, stamp),
            )
        elif row[1] != text:
            conn.execute(
                "UPDATE artifacts SET content = ?, version = version + 1, source_revision = ?, actor_id = ?,"
                " session_id = ?, run_id = ?, tool_call_id = ?, trace_id = ?, command_id = ?, updated_at = ?"
                " WHERE id = ?",
                (text, page.revision, *provenance, stamp, artifact_id),
            )
        if not edge_exists:
            _insert_edge(conn, edge_id, page, artifact_id, stamp)
        return page.revision

    return Plan(diff=diff, changed=changed, apply=apply, data=data)


def _plan_note(tx: Tx, p: dict[str, Any]) -> Plan:
    page, cmd = tx.page, tx.command
    text: str = p["content"]
    artifact_id = _artifact_id("note", page.workspace_id, page.id, cmd.actor_id, cmd.idempotency_key)
    edge_id = _artifact_id("edge", artifact_id, page.id, "reference")
    data = {"artifactId": artifact_id, "edgeId": edge_id, "kind": "ai_note", "sourceRevision": page.revision}
    diff = [
        {"op": "create", "artifact": "ai_note", "artifactId": artifact_id},
        {"op": "create", "edge": "reference", "edgeId": edge_id},
    ]

    def apply(conn: Connection, command_id: str) -> int:
        c = cmd.correlation
        stamp = now()
        conn.execute(
            "INSERT INTO artifacts (id, workspace_id, page_id, kind, content, version, source_revision,"
            " actor_id, session_id, run_id, tool_call_id, trace_id, command_id, created_at, updated_at)"
            " VALUES (?, ?, ?, 'ai_note', ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                artifact_id,
                page.workspace_id,
                page.id,
                text,
                page.revision,
                cmd.actor_id,
                c.session_id,
                c.run_id,
                c.tool_call_id,
                c.trace_id,
                command_id,
                stamp,
                stamp,
            ),
        )
        _insert_edge(conn, edge_id, page, artifact_id, stamp)
        return page.revision

    return Plan(diff=diff, changed=True, apply=apply, data=data)


def _edge_exists(conn: Connection, artifact_id: str, page_id: str) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM edges WHERE from_id = ? AND to_page_id = ? AND kind = 'reference'",
            (artifact_id, page_id),
        ).fetchone()
        is not None
    )


def _insert_edge(conn: Connection, edge_id: str, page: PageHead, artifact_id: str, stamp: str) -> None:
    conn.execute(
        "INSERT INTO edges (id, workspace_id, from_id, to_page_id, kind, created_at)"
        " VALUES (?, ?, ?, ?, 'reference', ?)",
        (edge_id, page.workspace_id, artifact_id, page.id, stamp),
    )


COMMANDS: dict[str, CommandSpec] = {
    CommandName.PAGE_BODY_SAVE: CommandSpec(_validate_save, _plan_save),
    CommandName.PAGE_HEAD_UPDATE_TITLE: CommandSpec(_validate_title, _plan_title),
    CommandName.PAGE_LAYOUT_UPDATE_OPTIONS: CommandSpec(_validate_options, _plan_options),
    CommandName.ARTIFACT_SUMMARY_UPSERT: CommandSpec(
        _validate_summary, _plan_summary, conflict_reason=Reason.SUMMARY
    ),
    CommandName.ARTIFACT_AI_NOTE_CREATE: CommandSpec(_validate_note, _plan_note),
    CommandName.PAGE_BLOCK_INSERT: CommandSpec(_validate_insert, _plan_insert, depends=_insert_depends),
    CommandName.PAGE_BLOCK_UPDATE: CommandSpec(_validate_update, _plan_update, depends=_update_depends),
    CommandName.PAGE_BLOCK_DELETE: CommandSpec(_validate_delete, _plan_delete, depends=_delete_depends),
    CommandName.PAGE_BLOCK_MOVE: CommandSpec(_validate_move, _plan_move, depends=_move_depends),
    CommandName.PAGE_REVERT: CommandSpec(validate_revert, plan_revert),
}
