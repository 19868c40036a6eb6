"""What each kernel command validates, plans and writes, declared once per command.

`validate` is pure (payload in, canonical payload out); `plan` reads the page and computes the diff
that both a dry run and the real call report; `apply` is the only code that writes, and the store
calls it only for a real call that changes something.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mnote_mcp.kernel.blocks import (
    BLOCK_TYPES,
    MAX_BLOCKS,
    Block,
    assign_ids,
    block_id,
    count_blocks,
    ids_in,
    normalize_block,
    normalize_blocks,
    walk,
    walk_pointers,
)
from mnote_mcp.kernel.diff import append_diff, placed, replace_diff, text_diff
from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason, invalid
from mnote_mcp.kernel.local.encoding import dumps, now
from mnote_mcp.kernel.markdown import render_markdown
from mnote_mcp.kernel.port import Command, CommandName
from mnote_mcp.kernel.tree import BlockTree, Position, Target

if TYPE_CHECKING:
    from mnote_mcp.kernel.local.store import LocalStore, PageRow

MAX_TITLE_LENGTH = 500
MAX_ARTIFACT_LENGTH = 100_000

Apply = Callable[[sqlite3.Connection, str], int]


@dataclass(slots=True)
class Plan:
    diff: list[dict[str, Any]]
    changed: bool
    apply: Apply | None = None
    warnings: list[dict[str, Any]] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    dry_run_data: dict[str, Any] = field(default_factory=dict)


Planner = Callable[["LocalStore", sqlite3.Connection, "PageRow", Command, dict[str, Any]], Plan]


@dataclass(frozen=True, slots=True)
class CommandSpec:
    validate: Callable[[Mapping[str, Any]], dict[str, Any]]
    plan: Planner
    conflict_reason: Reason = Reason.GENERIC


def _write_page(conn: sqlite3.Connection, page: PageRow, column: str, value: str) -> int:
    revision = page.revision + 1
    conn.execute(
        f"UPDATE pages SET {column} = ?, revision = ?, updated_at = ? WHERE workspace_id = ? AND id = ?",
        (value, revision, now(), page.workspace_id, page.id),
    )
    return revision


def _text(payload: Mapping[str, Any], name: str, limit: int) -> str:
    value = payload.get(name)
    if not isinstance(value, str):
        raise invalid(f"/{name}", "must be a string")
    if not value.strip():
        raise invalid(f"/{name}", "must not be empty or blank")
    if len(value) > limit:
        raise invalid(f"/{name}", f"longer than {limit} characters")
    return value


# -- page.body.save --------------------------------------------------------------------------


def _validate_save(payload: Mapping[str, Any]) -> dict[str, Any]:
    mode = payload.get("mode", "replace")
    if mode not in ("replace", "append"):
        raise invalid("/mode", "must be 'replace' or 'append'")
    content = normalize_blocks(payload.get("content"), "/content")
    if mode == "append" and not content:
        raise invalid("/content", "nothing to append: content is empty")
    return {"mode": mode, "content": content}


def _plan_save(
    store: LocalStore, conn: sqlite3.Connection, page: PageRow, cmd: Command, p: dict[str, Any]
) -> Plan:
    content: list[Block] = p["content"]
    seed = f"{page.workspace_id}/{page.id}@{page.revision}:{p['mode']}"
    existing = ids_in(page.blocks)
    if p["mode"] == "append":
        clash = sorted(ids_in(content) & existing)
        if clash:
            raise invalid(
                "/content", "block id already on the page; append adds new blocks", blockId=clash[0]
            )
        added = assign_ids(content, seed, set(existing))
        body = page.blocks + added
        diff = append_diff(added)
        data: dict[str, Any] = {"blockIds": [block["id"] for block in added]}
    else:
        body = assign_ids(content, seed, ids_in(content) | existing)
        diff = replace_diff(page.blocks, body)
        data = {}
    return _body_plan(page, body, diff, data)


def _body_plan(page: PageRow, body: list[Block], diff: list[dict[str, Any]], data: dict[str, Any]) -> Plan:
    """A plan that writes `body` as the page's new blocks, with a text diff for a dry run."""
    dry_run_data = (
        {"textDiff": text_diff(render_markdown(page.blocks), render_markdown(body))} if diff else {}
    )
    encoded = dumps(body)
    return Plan(
        diff=diff,
        changed=bool(diff),
        apply=lambda conn, _cid: _write_page(conn, page, "blocks", encoded),
        data=data,
        dry_run_data=dry_run_data,
    )


# -- page.head.updateTitle -------------------------------------------------------------------


def _validate_title(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {"title": _text(payload, "title", MAX_TITLE_LENGTH)}


def _plan_title(
    store: LocalStore, conn: sqlite3.Connection, page: PageRow, cmd: Command, p: dict[str, Any]
) -> Plan:
    title: str = p["title"]
    if title == page.title:
        return Plan(diff=[], changed=False)
    return Plan(
        diff=[{"op": "set", "field": "title", "from": page.title, "to": title}],
        changed=True,
        apply=lambda conn, _cid: _write_page(conn, page, "title", title),
    )


# -- page.layout.updateOptions ---------------------------------------------------------------


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


def _plan_options(
    store: LocalStore, conn: sqlite3.Connection, page: PageRow, cmd: Command, p: dict[str, Any]
) -> Plan:
    registry = store.option_registry(conn)
    requested: dict[str, bool] = p["options"]
    unknown = sorted(name for name in requested if name not in registry)
    if unknown:
        raise invalid(f"/options/{unknown[0]}", "unknown page option", knownOptions=sorted(registry))
    not_wired = sorted(name for name in requested if registry[name] != "wired")
    if not_wired and not cmd.dry_run:
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
        {"op": "set", "option": name, "from": page.options.get(name), "to": value}
        for name, value in requested.items()
        if page.options.get(name) != value
    ]
    merged = dumps({**page.options, **requested})
    return Plan(
        diff=diff,
        changed=bool(diff),
        apply=lambda conn, _cid: _write_page(conn, page, "options", merged),
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


def _target(tree: BlockTree, p: dict[str, Any], moving: str | None = None) -> Target:
    position: Position = p["position"]
    return tree.target(after_id=p["afterBlockId"], parent_id=p["parentId"], position=position, moving=moving)


def _validate_insert(payload: Mapping[str, Any]) -> dict[str, Any]:
    blocks = normalize_blocks(payload.get("blocks"), "/blocks")
    if not blocks:
        raise invalid("/blocks", "nothing to insert: blocks is empty")
    return {"blocks": blocks, **_placement(payload)}


def _plan_insert(
    store: LocalStore, conn: sqlite3.Connection, page: PageRow, cmd: Command, p: dict[str, Any]
) -> Plan:
    blocks: list[Block] = p["blocks"]
    existing = ids_in(page.blocks)
    for block, pointer in walk_pointers(blocks, "/blocks"):
        if block["id"] in existing:
            raise invalid(f"{pointer}/id", "block id already on the page", blockId=block["id"])
    if count_blocks(page.blocks) + count_blocks(blocks) > MAX_BLOCKS:
        raise invalid("/blocks", f"the page would hold more than {MAX_BLOCKS} blocks")
    tree = BlockTree(page.blocks)
    target = _target(tree, p)
    target.check_fits(blocks, "/blocks")
    seed = f"{page.workspace_id}/{page.id}@{page.revision}:block.insert"
    added = assign_ids(blocks, seed, existing | ids_in(blocks))
    tree.attach(target, added)
    block_ids = [block["id"] for block, _, _ in walk(added)]
    return _body_plan(page, tree.blocks, replace_diff(page.blocks, tree.blocks), {"blockIds": block_ids})


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


def _plan_update(
    store: LocalStore, conn: sqlite3.Connection, page: PageRow, cmd: Command, p: dict[str, Any]
) -> Plan:
    tree = BlockTree(page.blocks)
    place = tree.find(p["blockId"], "/blockId")
    block = place.block
    kind = str(p.get("type", block["type"]))
    spec = BLOCK_TYPES[kind]
    if block.get("children") and not spec.has_children:
        raise invalid(
            "/type",
            f"the block has children; a {kind} block has none",
            typesWithChildren=[name for name, t in BLOCK_TYPES.items() if t.has_children],
        )
    props = dict(block.get("props", {}))
    if kind != block["type"]:  # props the new type does not have go; shared ones stay
        props = {name: value for name, value in props.items() if name in spec.props}
    props.update(p.get("props", {}))
    text = p.get("text", block["text"] if spec.has_text else "")
    merged = {
        "id": block["id"],
        "type": kind,
        "text": text,
        "props": {name: value for name, value in props.items() if value is not None},
        "children": block.get("children", []),
    }
    updated = normalize_block(merged, "", place.depth)
    block.clear()
    block.update(updated)
    diff = replace_diff(page.blocks, tree.blocks)
    return _body_plan(page, tree.blocks, diff, {"blockIds": [p["blockId"]] if diff else []})


def _validate_delete(payload: Mapping[str, Any]) -> dict[str, Any]:
    raw = payload.get("blockIds")
    if not isinstance(raw, list):
        raise invalid("/blockIds", "must be an array of block ids")
    if not raw:
        raise invalid("/blockIds", "nothing to delete: blockIds is empty")
    ids: list[str] = []
    for index, value in enumerate(raw):
        checked = block_id(value, f"/blockIds/{index}")
        if checked in ids:
            raise invalid(f"/blockIds/{index}", "listed twice", blockId=checked)
        ids.append(checked)
    return {"blockIds": ids}


def _plan_delete(
    store: LocalStore, conn: sqlite3.Connection, page: PageRow, cmd: Command, p: dict[str, Any]
) -> Plan:
    tree = BlockTree(page.blocks)
    for index, target in enumerate(p["blockIds"]):
        tree.find(target, f"/blockIds/{index}")
    for target in p["blockIds"]:
        if target in tree.places:  # not already gone with a deleted ancestor
            tree.detach(target)
    removed = [block["id"] for block, _, _ in walk(page.blocks) if block["id"] not in tree.places]
    return _body_plan(page, tree.blocks, replace_diff(page.blocks, tree.blocks), {"blockIds": removed})


def _validate_move(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {"blockId": block_id(payload.get("blockId"), "/blockId"), **_placement(payload)}


def _plan_move(
    store: LocalStore, conn: sqlite3.Connection, page: PageRow, cmd: Command, p: dict[str, Any]
) -> Plan:
    tree = BlockTree(page.blocks)
    moving = tree.find(p["blockId"], "/blockId").block
    target = _target(tree, p, moving=p["blockId"])
    target.check_fits([moving], "/blockId")
    tree.attach(target, [tree.detach(p["blockId"])])
    if tree.blocks == page.blocks:
        return Plan(diff=[], changed=False, data={"blockIds": []})
    after = tree.previous_sibling(p["blockId"])
    diff = [placed("move", p["blockId"], tree.places[p["blockId"]].parent_id, after)]
    return _body_plan(page, tree.blocks, diff, {"blockIds": [p["blockId"]]})


# -- artifacts -------------------------------------------------------------------------------


def _validate_summary(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {"summary": _text(payload, "summary", MAX_ARTIFACT_LENGTH)}


def _validate_note(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {"content": _text(payload, "content", MAX_ARTIFACT_LENGTH)}


def _artifact_id(prefix: str, *parts: str) -> str:
    return f"{prefix}_{hashlib.sha256(chr(0).join(parts).encode()).hexdigest()[:16]}"


def _plan_summary(
    store: LocalStore, conn: sqlite3.Connection, page: PageRow, cmd: Command, p: dict[str, Any]
) -> Plan:
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

    def apply(conn: sqlite3.Connection, command_id: str) -> int:
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


def _plan_note(
    store: LocalStore, conn: sqlite3.Connection, page: PageRow, cmd: Command, p: dict[str, Any]
) -> Plan:
    text: str = p["content"]
    artifact_id = _artifact_id("note", page.workspace_id, page.id, cmd.actor_id, cmd.idempotency_key)
    edge_id = _artifact_id("edge", artifact_id, page.id, "reference")
    data = {"artifactId": artifact_id, "edgeId": edge_id, "kind": "ai_note", "sourceRevision": page.revision}
    diff = [
        {"op": "create", "artifact": "ai_note", "artifactId": artifact_id},
        {"op": "create", "edge": "reference", "edgeId": edge_id},
    ]

    def apply(conn: sqlite3.Connection, command_id: str) -> int:
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


def _edge_exists(conn: sqlite3.Connection, artifact_id: str, page_id: str) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM edges WHERE from_id = ? AND to_page_id = ? AND kind = 'reference'",
            (artifact_id, page_id),
        ).fetchone()
        is not None
    )


def _insert_edge(conn: sqlite3.Connection, edge_id: str, page: PageRow, artifact_id: str, stamp: str) -> None:
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
    CommandName.PAGE_BLOCK_INSERT: CommandSpec(_validate_insert, _plan_insert),
    CommandName.PAGE_BLOCK_UPDATE: CommandSpec(_validate_update, _plan_update),
    CommandName.PAGE_BLOCK_DELETE: CommandSpec(_validate_delete, _plan_delete),
    CommandName.PAGE_BLOCK_MOVE: CommandSpec(_validate_move, _plan_move),
}
