"""Issue 11 item 6: docs/contract.md's examples are what the server answers.

Each `<!-- example: NAME -->` is followed by two JSON blocks: the `tools/call` params and the envelope.
They run in the page's order against one server on a new store seeded with the demo workspace, as
`user_1`, in English, and every field must match; ids the server generates (new block ids, artifact
and edge ids, the random end of a commandId) are compared by their form, not their value.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from mnote_mcp.kernel.sqlite.opening import open_kernel
from mnote_mcp.kernel.store.fixtures import demo_fixture, load_fixture
from tests.support.helpers import MODES, ROOT, connect, envelope_of

pytestmark = pytest.mark.anyio
DOC = ROOT / "docs" / "contract.md"
_EXAMPLE = re.compile(r"<!-- example: ([\w-]+) -->\s*```json\n(.*?)\n```\s*```json\n(.*?)\n```", re.S)
_GENERATED = [
    (re.compile(r"^((?:page|artifact)_[a-z_]+_.+)_[0-9a-f]{8}$"), r"\1_<nonce>"),
    (re.compile(r"^b_[0-9a-z]{6,}$"), "<new block id>"),
    (re.compile(r"^(sum|note|edge)_[0-9a-f]{16}$"), r"<\1 id>"),
]


def examples() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    text = DOC.read_text(encoding="utf-8")
    return [(name, json.loads(call), json.loads(envelope)) for name, call, envelope in _EXAMPLE.findall(text)]


def generic(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: generic(item) for key, item in value.items()}
    if isinstance(value, list):
        return [generic(item) for item in value]
    if isinstance(value, str):
        for pattern, replacement in _GENERATED:
            if pattern.match(value):
                return pattern.sub(replacement, value)
    return value


def test_the_page_has_examples_of_every_kind() -> None:
    found = examples()
    assert len(found) == DOC.read_text(encoding="utf-8").count("<!-- example:"), "every example parses"
    names = {name for name, _, _ in found}
    assert {"read", "dry-run", "write", "replay", "conflict", "not-member", "invalid"} <= names
    effects = {envelope["audit"]["effect"] for _, _, envelope in found}
    assert effects == {"read", "write", "dry_run", "none"}


@pytest.mark.parametrize("mode", MODES)
async def test_the_examples_are_what_the_server_answers(tmp_path: Path, mode: str) -> None:
    db = tmp_path / "contract.db"
    kernel = open_kernel(db)
    load_fixture(kernel.store, demo_fixture())
    kernel.store.close()
    async with connect(db, mode, actor="user_1", locale="en") as client:
        for name, call, expected in examples():
            got = envelope_of(await client.call_tool(call["name"], call["arguments"]))
            assert generic(got) == generic(expected), f"example {name!r} differs from the server's answer"


def test_the_readme_links_the_contract_inside_the_repository() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/contract.md" in readme
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        assert "../shared/" not in text, f"{page.name} links outside the repository"
        assert "section 3 of the contract" not in text and "contract section" not in text.lower()
