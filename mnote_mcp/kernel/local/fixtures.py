"""Workspace fixtures: the JSON format `mnote-mcp seed` and `serve --seed` read (DESIGN.md).

Loading is idempotent: the same ids are replaced, not duplicated, and a page whose content really
changed gets a new revision, so an agent holding the old one sees a conflict instead of clobbering.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from jsonschema_rs import Draft202012Validator

from mnote_mcp.kernel.blocks import assign_ids, ids_in, normalize_blocks
from mnote_mcp.kernel.errors import MnoteError
from mnote_mcp.kernel.local.encoding import dumps, now
from mnote_mcp.kernel.local.store import LocalStore
from mnote_mcp.kernel.policy import ROLES

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


def load_fixture(store: LocalStore, data: dict[str, Any]) -> dict[str, int]:
    """Load a fixture in one transaction; returns counts of what it holds."""
    validate_fixture(data)
    counts = {"workspaces": 0, "members": 0, "pages": 0}
    with store.transaction(write=True) as conn:
        for name, support in (data.get("optionRegistry") or {}).items():
            conn.execute(
                "INSERT INTO option_registry (name, runtime_support) VALUES (?, ?)"
                " ON CONFLICT (name) DO UPDATE SET runtime_support = excluded.runtime_support",
                (name, support),
            )
        for ws in data["workspaces"]:
            counts["workspaces"] += 1
            conn.execute(
                "INSERT INTO workspaces (id, name) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET name = excluded.name",
                (ws["id"], ws.get("name", ws["id"])),
            )
            if "members" in ws:
                conn.execute("DELETE FROM members WHERE workspace_id = ?", (ws["id"],))
                conn.executemany(
                    "INSERT OR REPLACE INTO members (workspace_id, actor_id, role) VALUES (?, ?, ?)",
                    [(ws["id"], m["actorId"], m["role"]) for m in ws["members"]],
                )
                counts["members"] += len(ws["members"])
            for index, page in enumerate(ws.get("pages", [])):
                counts["pages"] += 1
                _load_page(conn, ws["id"], page, f"/workspaces/{counts['workspaces'] - 1}/pages/{index}")
    return counts


def _load_page(conn: Any, workspace_id: str, page: dict[str, Any], pointer: str) -> None:
    try:
        blocks = normalize_blocks(page.get("blocks", []), f"{pointer}/blocks")
    except MnoteError as exc:
        raise FixtureError(f"fixture {exc.details.get('pointer')}: {exc.details.get('reason')}") from exc
    blocks = assign_ids(blocks, f"{workspace_id}/{page['id']}@fixture", ids_in(blocks))
    options, body = dumps(page.get("options", {})), dumps(blocks)
    restricted = 1 if "members" in page else 0
    row = conn.execute(
        "SELECT title, options, blocks, revision, restricted FROM pages WHERE workspace_id = ? AND id = ?",
        (workspace_id, page["id"]),
    ).fetchone()
    if row is None:
        conn.execute(
            "INSERT INTO pages (workspace_id, id, title, options, blocks, revision, restricted, updated_at)"
            " VALUES (?, ?, ?, ?, ?, 1, ?, ?)",
            (workspace_id, page["id"], page["title"], options, body, restricted, now()),
        )
    elif (row[0], dumps(json.loads(row[1])), dumps(json.loads(row[2])), row[4]) != (
        page["title"],
        options,
        body,
        restricted,
    ):
        conn.execute(
            "UPDATE pages SET title = ?, options = ?, blocks = ?, restricted = ?, revision = ?, updated_at = ?"
            " WHERE workspace_id = ? AND id = ?",
            (page["title"], options, body, restricted, row[3] + 1, now(), workspace_id, page["id"]),
        )
    conn.execute("DELETE FROM page_access WHERE workspace_id = ? AND page_id = ?", (workspace_id, page["id"]))
    conn.executemany(
        "INSERT OR REPLACE INTO page_access (workspace_id, page_id, actor_id, role) VALUES (?, ?, ?, ?)",
        [(workspace_id, page["id"], m["actorId"], m["role"]) for m in page.get("members", [])],
    )
