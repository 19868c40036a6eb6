"""Workspace fixtures: the JSON format `mnote-mcp seed` and `serve --seed` read (DESIGN.md).

Seeding never destroys data: it creates what is missing (option names, workspaces, members, pages) and
leaves everything that exists as it is, even where the fixture says otherwise, and reports both
(`SeedReport`, also logged). Replacing a page with the fixture's version is a separate, explicit act
(`replace=`, `mnote-mcp seed --replace ws/doc`) that names the pages; it is a new revision in the
page's history, so an agent holding the old revision sees a conflict, and the replace can be reverted.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Collection
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from jsonschema_rs import Draft202012Validator

from mnote_mcp.kernel.blocks import Block, assign_ids, ids_in, normalize_blocks
from mnote_mcp.kernel.diff import replace_diff
from mnote_mcp.kernel.errors import MnoteError
from mnote_mcp.kernel.local import history, rows
from mnote_mcp.kernel.local.encoding import dumps, now
from mnote_mcp.kernel.local.history import HeadChange
from mnote_mcp.kernel.local.orderkeys import keys_between
from mnote_mcp.kernel.local.rows import TOP, BlockChange, PageBlocks, PageChange
from mnote_mcp.kernel.local.sql import Connection
from mnote_mcp.kernel.local.store import LocalStore
from mnote_mcp.kernel.policy import ROLES
from mnote_mcp.kernel.port import Correlation

logger = logging.getLogger(__name__)
SEED_CORRELATION = Correlation("seed", "seed", "seed", "seed")

_ID = {"type": "string", "minLength": 1, "maxLength": 128}
_MEMBER = {
    "type": "object",
    "required": ["actorId", "role"],
    "properties": {"actorId": _ID, "role": {"enum": list(ROLES)}},
    "additionalProperties": False,
}
FIXTURE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["workspaces"],
    "additionalProperties": False,
    "properties": {
        "optionRegistry": {
            "type": "object",
            "additionalProperties": {"type": "string", "minLength": 1},
        },
        "workspaces": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["id"],
                "additionalProperties": False,
                "properties": {
                    "id": _ID,
                    "name": {"type": "string"},
                    "members": {"type": "array", "items": _MEMBER},
                    "pages": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["id", "title"],
                            "additionalProperties": False,
                            "properties": {
                                "id": _ID,
                                "title": {"type": "string", "minLength": 1},
                                "options": {"type": "object", "additionalProperties": {"type": "boolean"}},
                                "blocks": {"type": "array"},
                                "members": {
                                    "type": "array",
                                    "items": _MEMBER,
                                    "description": "If present, only these actors may open the page.",
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}
_VALIDATOR = Draft202012Validator(FIXTURE_SCHEMA)


class FixtureError(ValueError):
    """A fixture that cannot be loaded; the message names where and why."""


def read_fixture(path: str | Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise FixtureError(f"{path}: {exc}") from exc
    if not isinstance(data, dict):
        raise FixtureError(f"{path}: a fixture is a JSON object with a 'workspaces' array")
    return data


def demo_fixture() -> dict[str, Any]:
    text = resources.files("mnote_mcp.data").joinpath("demo_workspace.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def validate_fixture(data: dict[str, Any]) -> None:
    error = next(iter(_VALIDATOR.iter_errors(data)), None)
    if error is not None:
        pointer = "/" + "/".join(str(part) for part in error.instance_path)
        raise FixtureError(f"fixture {pointer}: {error.message}")


@dataclass
class SeedReport:
    """What a seed did: created, left as it was (unchanged, or changed since and kept), replaced."""

    created: dict[str, int] = field(default_factory=lambda: {"workspaces": 0, "members": 0, "pages": 0})
    created_pages: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    kept_members: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "created": self.created,
            "kept": {"unchanged": self.unchanged, "changed": self.changed, "members": self.kept_members},
            "replaced": self.replaced,
        }

    def lines(self) -> list[str]:
        c = self.created
        parts = [_n(c[kind], kind[:-1]) for kind in ("workspaces", "members", "pages") if c[kind]]
        created = ", ".join(parts) + (f": {', '.join(self.created_pages)}" if self.created_pages else "")
        out = [
            f"seed: created {created}" if parts else "seed: created nothing (the fixture's contents exist)"
        ]
        if self.unchanged:
            out.append(f"seed: kept {_n(len(self.unchanged), 'page')} already as the fixture has them")
        if self.changed:
            out.append(
                f"seed: kept {_n(len(self.changed), 'page')} that differ from the fixture (edited since they"
                f" were seeded): {', '.join(self.changed)}; to overwrite them with the fixture, run"
                f" `mnote-mcp seed --db PATH FILE --replace {','.join(self.changed)}`"
            )
        if self.kept_members:
            out.append(f"seed: kept the current role of {', '.join(self.kept_members)} (the fixture differs)")
        out += [
            f"seed: replaced {page} with the fixture's version (a new revision)" for page in self.replaced
        ]
        return out


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def load_fixture(store: LocalStore, data: dict[str, Any], *, replace: Collection[str] = ()) -> SeedReport:
    """Load a fixture in one transaction: create what is missing, replace only the pages named in
    `replace` (as `workspace/page`), leave the rest. Returns (and logs) what it did."""
    validate_fixture(data)
    named = {f"{ws['id']}/{page['id']}" for ws in data["workspaces"] for page in ws.get("pages", [])}
    unknown = sorted(set(replace) - named)
    if unknown:
        raise FixtureError(
            f"--replace {', '.join(unknown)}: not a page of this fixture (known: {', '.join(sorted(named))})"
        )
    report = SeedReport()
    with store.transaction(write=True) as conn:
        store.db.serialize(conn, "fixtures")  # two replicas seeding at start-up: one after the other
        conn.executemany(
            "INSERT INTO option_registry (name, runtime_support) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
            list((data.get("optionRegistry") or {}).items()),
        )
        for w_index, ws in enumerate(data["workspaces"]):
            _load_workspace(store, conn, ws, w_index, set(replace), report)
    for line in report.lines():
        logger.info("%s", line)
    return report


def _load_workspace(
    store: LocalStore,
    conn: Connection,
    ws: dict[str, Any],
    index: int,
    replace: set[str],
    report: SeedReport,
) -> None:
    # RETURNING, not the cursor's rowcount: psycopg's is not the rows inserted here (issue 23: -2)
    created = conn.execute(
        "INSERT INTO workspaces (id, name) VALUES (?, ?) ON CONFLICT (id) DO NOTHING RETURNING id",
        (ws["id"], ws.get("name", ws["id"])),
    ).fetchone()
    report.created["workspaces"] += created is not None
    for member in ws.get("members", []):
        row = conn.execute(
            "SELECT role FROM members WHERE workspace_id = ? AND actor_id = ?", (ws["id"], member["actorId"])
        ).fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO members (workspace_id, actor_id, role) VALUES (?, ?, ?)",
                (ws["id"], member["actorId"], member["role"]),
            )
            report.created["members"] += 1
        elif row[0] != member["role"]:
            report.kept_members.append(f"{ws['id']}/{member['actorId']}")
    for p_index, page in enumerate(ws.get("pages", [])):
        name = f"{ws['id']}/{page['id']}"
        blocks = _blocks(ws["id"], page, f"/workspaces/{index}/pages/{p_index}")
        _load_page(store, conn, ws["id"], page, blocks, name in replace, report)


def _blocks(workspace_id: str, page: dict[str, Any], pointer: str) -> list[Block]:
    try:
        blocks = normalize_blocks(page.get("blocks", []), f"{pointer}/blocks")
    except MnoteError as exc:
        raise FixtureError(f"fixture {exc.details.get('pointer')}: {exc.details.get('reason')}") from exc
    return assign_ids(blocks, f"{workspace_id}/{page['id']}@fixture", ids_in(blocks))


def _load_page(
    store: LocalStore,
    conn: Connection,
    workspace_id: str,
    page: dict[str, Any],
    blocks: list[Block],
    replace: bool,
    report: SeedReport,
) -> None:
    name = f"{workspace_id}/{page['id']}"
    options = page.get("options", {})
    restricted = 1 if "members" in page else 0
    store.db.lock_page(conn, workspace_id, page["id"])
    row = conn.execute(
        "SELECT title, options, revision, restricted, block_count, byte_size, updated_at FROM pages"
        " WHERE workspace_id = ? AND id = ?",
        (workspace_id, page["id"]),
    ).fetchone()
    if row is None:
        changes = rows.new_rows(blocks, TOP, keys_between(None, None, len(blocks)), 1)
        count, size = _size(changes)
        _check(store, name, count, size)
        conn.execute(
            "INSERT INTO pages (workspace_id, id, title, options, revision, restricted, updated_at, block_count,"
            " byte_size, history_from) VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?, 1)",
            (workspace_id, page["id"], page["title"], dumps(options), restricted, now(), count, size),
        )
        rows.apply(conn, workspace_id, page["id"], changes)
        _set_access(conn, workspace_id, page)
        _hooks(store, conn, PageChange(workspace_id, page["id"], 1, None, changes))
        report.created["pages"] += 1
        report.created_pages.append(name)
        return
    title, stored_options, revision, stored_restricted, count, size, updated_before = row
    current = PageBlocks(conn, workspace_id, page["id"])
    old = {r.id: r for r in current.all()}
    body = rows.tree_of(old.values())
    same = (title, json.loads(stored_options), body, stored_restricted) == (
        page["title"],
        options,
        blocks,
        restricted,
    )
    if same:
        report.unchanged.append(name)
        return
    if not replace:
        report.changed.append(name)
        return
    revision += 1
    changes = rows.replace_rows(old, blocks, replace_diff(body, blocks), revision)
    for change in changes:
        count += (change.before is None) - (change.after is None)
        size += (change.after.size if change.after else 0) - (change.before.size if change.before else 0)
    _check(store, name, count, size)
    head = HeadChange(
        title=(title, page["title"]) if title != page["title"] else None,
        options=(json.loads(stored_options), options) if json.loads(stored_options) != options else None,
    )
    rows.apply(conn, workspace_id, page["id"], changes)
    conn.execute(
        "UPDATE pages SET title = ?, options = ?, restricted = ?, revision = ?, block_count = ?, byte_size = ?,"
        " updated_at = ? WHERE workspace_id = ? AND id = ?",
        (page["title"], dumps(options), restricted, revision, count, size, now(), workspace_id, page["id"]),
    )
    history.record(
        conn,
        workspace_id,
        page["id"],
        revision,
        command_id=f"fixture_replace_{secrets.token_hex(4)}",
        command_name="fixture.replace",
        actor_id="",
        correlation=SEED_CORRELATION,
        blocks=changes,
        head=head,
        updated_before=updated_before,
    )
    _set_access(conn, workspace_id, page)
    _hooks(store, conn, PageChange(workspace_id, page["id"], revision, head.title, changes))
    report.replaced.append(name)


def _size(changes: list[BlockChange]) -> tuple[int, int]:
    return len(changes), sum(change.after.size for change in changes if change.after is not None)


def _check(store: LocalStore, name: str, blocks: int, size: int) -> None:
    try:
        store.limits.check(blocks, size)
    except MnoteError as exc:
        limit = exc.details["limit"]
        raise FixtureError(f"fixture page {name} is larger than {limit} ({exc.details[limit]})") from None


def _set_access(conn: Connection, workspace_id: str, page: dict[str, Any]) -> None:
    conn.execute("DELETE FROM page_access WHERE workspace_id = ? AND page_id = ?", (workspace_id, page["id"]))
    conn.executemany(
        "INSERT INTO page_access (workspace_id, page_id, actor_id, role) VALUES (?, ?, ?, ?)",
        [(workspace_id, page["id"], m["actorId"], m["role"]) for m in page.get("members", [])],
    )


def _hooks(store: LocalStore, conn: Connection, change: PageChange) -> None:
    for hook in store.write_hooks:
        hook(conn, change)
