"""The page's own commands: its body saved whole (replace, or append at the end), its title, its options."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypedDict

from mnote_mcp.kernel.blocks import NewBlock, assign_ids, ids_in, normalize_blocks
from mnote_mcp.kernel.diff import Op, append_diff, replace_diff
from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason, invalid
from mnote_mcp.kernel.scopes import Scope
from mnote_mcp.kernel.store.access import option_registry
from mnote_mcp.kernel.store.commands.placement import PageIds, keys, slot
from mnote_mcp.kernel.store.commands.spec import CommandSpec, text_field
from mnote_mcp.kernel.store.history import HeadChange
from mnote_mcp.kernel.store.plan import Plan, Tx, body_plan
from mnote_mcp.kernel.store.rows import TOP, new_rows, replace_rows, tree_of

MAX_TITLE_LENGTH = 500


# -- page.body.save --------------------------------------------------------------------------


class SavePayload(TypedDict):
    mode: Literal["replace", "append"]
    content: list[NewBlock]


def _validate_save(payload: Mapping[str, object]) -> SavePayload:
    mode = payload.get("mode", "replace")
    if mode not in ("replace", "append"):
        raise invalid("/mode", "must be 'replace' or 'append'")
    content = normalize_blocks(payload.get("content"), "/content")
    if mode == "append" and not content:
        raise invalid("/content", "nothing to append: content is empty")
    return {"mode": "append" if mode == "append" else "replace", "content": content}


def _plan_save(tx: Tx, p: SavePayload) -> Plan:
    content = p["content"]
    page = tx.page
    seed = f"{page.workspace_id}/{page.id}@{page.revision}:{p['mode']}"
    if p["mode"] == "append":
        given = ids_in(content)
        clash = sorted(tx.blocks.get_many(given))
        if clash:
            raise invalid(
                "/content", "block id already on the page; append adds new blocks", blockId=clash[0]
            )
        added = assign_ids(content, seed, PageIds(tx.blocks, set(given)))
        at = slot(tx, {"parentId": None, "afterBlockId": None, "position": "end"})
        new_keys, rekeys = keys(tx, at, len(added))
        changes = rekeys + new_rows(added, TOP, new_keys, tx.next_revision)
        return body_plan(tx, changes, append_diff(added), {"blockIds": [block["id"] for block in added]})
    rows = {row.id: row for row in tx.blocks.all()}
    old = tree_of(rows.values())
    body = assign_ids(content, seed, ids_in(content) | set(rows))
    diff = replace_diff(old, body)
    return body_plan(tx, replace_rows(rows, body, diff, tx.next_revision), diff, {}, body)


SAVE = CommandSpec(
    name="page.body.save",
    scope=Scope.PAGE_WRITE,
    payload="{mode, content}",
    does="replace the body (blocks matched by id) or append blocks at its end",
    validate=_validate_save,
    plan=_plan_save,
)


# -- page.head.updateTitle -------------------------------------------------------------------


class TitlePayload(TypedDict):
    title: str


def _validate_title(payload: Mapping[str, object]) -> TitlePayload:
    return {"title": text_field(payload, "title", MAX_TITLE_LENGTH)}


def _plan_title(tx: Tx, p: TitlePayload) -> Plan:
    title = p["title"]
    if title == tx.page.title:
        return Plan(diff=[], changed=False)
    return Plan(
        diff=[{"op": "set", "field": "title", "from": tx.page.title, "to": title}],
        changed=True,
        head=HeadChange(title=(tx.page.title, title)),
    )


TITLE = CommandSpec(
    name="page.head.updateTitle",
    scope=Scope.PAGE_WRITE,
    payload="{title}",
    does="rename the page",
    validate=_validate_title,
    plan=_plan_title,
)


# -- page.layout.updateOptions ---------------------------------------------------------------


class OptionsPayload(TypedDict):
    options: dict[str, bool]


def _validate_options(payload: Mapping[str, object]) -> OptionsPayload:
    options = payload.get("options")
    if not isinstance(options, dict):
        raise invalid("/options", "must be an object")
    if not options:
        raise invalid("/options", "no option given: name at least one option to change")
    for name, value in options.items():
        if not isinstance(value, bool):
            raise invalid(f"/options/{name}", "must be a boolean")
    return {"options": dict(options)}


def _plan_options(tx: Tx, p: OptionsPayload) -> Plan:
    registry = option_registry(tx.conn)
    requested = p["options"]
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
    diff: list[Op] = [
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


OPTIONS = CommandSpec(
    name="page.layout.updateOptions",
    scope=Scope.PAGE_WRITE,
    payload="{options}",
    does="set page options (a non-wired one fails a real call and warns on a dry run)",
    validate=_validate_options,
    plan=_plan_options,
)

COMMANDS = (SAVE, TITLE, OPTIONS)
