"""The hostile-input sweep (issue 30): for every declared tool and every MCP request kind the server
answers, requests that amplify, derived from the declarations, so a new tool joins by being declared.

A tool's attacks come from its declaration: its first example aimed at a long page (few blocks, each
near the block cap) and at a wide one (more blocks than the event loop may work on), the example with
every string at the block cap, every array at `--max-block-ids` items, every array of blocks nested
past `MAX_DEPTH` and every object past `--max-argument-depth`, a write's dry run on the long page, and
what the tool declares beyond that (`ToolSpec.hostile`: replace-all doubling, broad searches, ...). A
request kind's attacks are written here, one entry per kind in `KIND_ATTACKS`; the sweep's test fails
on a kind the server answers that has none (`tests/unit/test_server_sweep.py`).

Each attack is a JSON-RPC method and its params, so the same list drives the in-process sweep (the
SDK client) and `bench.sweep` (raw JSON-RPC over HTTP against any checkout, for the before/after
figures). The stage is a fixture file (`stage_fixture`): any version of `mnote-mcp seed` loads it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mnote_mcp.kernel.blocks import MAX_DEPTH, MAX_TEXT_LENGTH
from mnote_mcp.surface.resources.uris import PAGE_URI_TEMPLATE
from mnote_mcp.tools.catalog import ALL_TOOLS
from mnote_mcp.tools.examples import Example, Target, Value
from mnote_mcp.tools.registry import ToolSpec
from mnote_mcp.vocabulary.envelope import DEFAULT_MAX_ARGUMENT_DEPTH
from tests.support.helpers import FIXTURE, IDS

WORKSPACE = "ws_1"
LONG = "doc_long"  # 24 blocks of 60,000 characters and one of 99,990: 1.5 MB, few blocks
WIDE = "doc_wide"  # 3,000 blocks (headings every 100), past what the event loop may work on
MANY_PAGES = 1_000  # small pages beside them, for listings, searches and completions
MANY_ITEMS = 20_000  # `--max-block-ids`' default: the most ids a request may name
BUDGET = 4_000  # `--max-result-chars` the sweep runs at (the smallest allowed)
LONG_TEXT = ("alpha beta gamma delta " * 5_000)[:60_000]
_GENERIC_KEYS = frozenset({"workspaceId", "documentId", *IDS, "idempotencyKey", "dryRun", "capabilityScope"})


@dataclass(frozen=True)
class Attack:
    """One request of the sweep: `target` (a tool's name or a request kind) `variant` (what amplifies),
    the JSON-RPC `method` and `params`, and the real calls to make first (`prior`: the example's setup,
    as a revert's write to undo). `budgeted`: its answer must fit `--max-result-chars`."""

    target: str
    variant: str
    method: str
    params: Mapping[str, Any]
    prior: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    budgeted: bool = True
    era: str = "legacy"  # "auto": needs the 2026-07-28 era (subscriptions/listen)
    note: str = field(default="", compare=False)

    @property
    def id(self) -> str:
        return f"{self.target}:{self.variant}"


def stage_fixture(path: Path) -> Path:
    """The sweep's workspace fixture: the tests' fixture with the long, the wide and many small pages."""
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    pages = data["workspaces"][0]["pages"]
    long_blocks = [{"id": f"l{n}", "type": "paragraph", "text": LONG_TEXT} for n in range(24)]
    long_blocks.insert(1, {"id": "l_huge", "type": "paragraph", "text": "a" * 99_990})
    pages.append({"id": LONG, "title": "Long page", "blocks": long_blocks})
    wide: list[dict[str, Any]] = []
    for n in range(3_000):
        if n % 100 == 0:
            wide.append({"id": f"w{n}", "type": "heading", "text": f"Part {n}", "props": {"level": 1}})
        else:
            wide.append({"id": f"w{n}", "type": "paragraph", "text": f"wide line {n} alpha"})
    pages.append({"id": WIDE, "title": "Wide page", "blocks": wide})
    pages += [
        {"id": f"many_{n:04d}", "title": f"w{n:04d} many", "blocks": [{"type": "paragraph", "text": "w"}]}
        for n in range(MANY_PAGES)
    ]
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _target(document_id: str) -> Target:
    prefix = {LONG: ("l0", "l_huge", "l1"), WIDE: ("w0", "w1", "w2")}[document_id]
    return Target(WORKSPACE, document_id, prefix)


def _call(spec: ToolSpec, arguments: Mapping[str, Any], key: str, *, dry_run: bool = False) -> dict[str, Any]:
    write = {"idempotencyKey": f"sweep-{key}", "dryRun": dry_run} if spec.writes else {}
    return {"name": spec.name, "arguments": {**IDS, **arguments, **write}}


def _prior(spec: ToolSpec, example: Example, target: Target) -> tuple[tuple[str, Mapping[str, Any]], ...]:
    """The real calls `example`'s setup makes first."""
    tools = {tool.name: tool for tool in ALL_TOOLS}
    return tuple(
        (
            "tools/call",
            _call(
                tools[step.tool], tools[step.tool].arguments_for(target, step), f"setup-{index}-{spec.name}"
            ),
        )
        for index, step in enumerate(example.setup)
    )


def _longest(value: Value, key: str = "") -> Value:
    """Every string the caller writes at the block cap (ids included: those are refused, cheaply)."""
    if isinstance(value, str) and key not in _GENERIC_KEYS:
        return (LONG_TEXT * 2)[:MAX_TEXT_LENGTH]
    if isinstance(value, dict):
        return {name: _longest(item, name) for name, item in value.items()}
    if isinstance(value, list):
        return [_longest(item, key) for item in value]
    return value


def _most(value: Value, key: str = "") -> Value:
    """Every array at `MANY_ITEMS` items (copies of its first, or of a string)."""
    if isinstance(value, dict):
        return {name: _most(item, name) for name, item in value.items()}
    if isinstance(value, list):
        first = value[0] if value else "x"
        return [first] * MANY_ITEMS
    return value


def _nested_block(depth: int) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "bulleted_list", "text": "deep"}
    for _ in range(depth):
        block = {"type": "bulleted_list", "text": "deep", "children": [block]}
    return block


def _nested_object(depth: int) -> Value:
    value: Value = "deep"
    for _ in range(depth):
        value = {"k": value}
    return value


def _deepest(value: Value, key: str = "") -> Value:
    """Arrays of objects nested past `MAX_DEPTH` (as blocks), objects past the argument depth."""
    if isinstance(value, dict):
        if key in _GENERIC_KEYS:
            return value
        deep = {name: _deepest(item, name) for name, item in value.items()}
        return deep if deep != value else {**value, "nested": _nested_object(DEFAULT_MAX_ARGUMENT_DEPTH + 4)}
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return [_nested_block(3 * MAX_DEPTH), *value[1:]]
    return value


def tool_attacks(spec: ToolSpec) -> Iterator[Attack]:
    """The attacks on one tool, from its declaration (see the module)."""
    long, wide = _target(LONG), _target(WIDE)
    example = spec.example
    for index, each in enumerate(spec.examples):
        for name, target in (("long", long), ("wide", wide)):
            yield Attack(
                spec.name,
                f"example-{index}-on-{name}-page",
                "tools/call",
                _call(spec, spec.arguments_for(target, each), f"{index}-{name}"),
                _prior(spec, each, target),
            )
    own = {name: value for name, value in spec.arguments_for(long).items() if name not in _GENERIC_KEYS}
    page = {name: value for name, value in spec.arguments_for(long).items() if name in _GENERIC_KEYS}
    for variant, amplify in (("longest-strings", _longest), ("most-items", _most), ("deepest", _deepest)):
        amplified = amplify(own)
        assert isinstance(amplified, dict)
        if amplified != own:
            yield Attack(spec.name, variant, "tools/call", _call(spec, {**page, **amplified}, variant))
    if spec.writes:
        yield Attack(
            spec.name,
            "dry-run-on-long-page",
            "tools/call",
            _call(spec, spec.arguments_for(long), "dry", dry_run=True),
            _prior(spec, example, long),
        )
    for index, hostile in enumerate(spec.hostile):
        for name, target in (("long", long), ("wide", wide)):
            yield Attack(
                spec.name,
                f"declared-{index}-on-{name}-page",
                "tools/call",
                _call(spec, spec.arguments_for(target, hostile), f"hostile-{index}-{name}"),
                _prior(spec, hostile, target),
                note=hostile.note,
            )


def _uri(document_id: str) -> str:
    return f"mnote://workspaces/{WORKSPACE}/pages/{document_id}"


_LONG_STRING = "w" * MAX_TEXT_LENGTH
_PROMPT_ARGS = {"workspaceId": WORKSPACE, "documentId": LONG}


def _kind_attacks() -> dict[str, list[Attack]]:
    long_uri, wide_uri, junk_uri = _uri(LONG), _uri(WIDE), _uri("x" * MAX_TEXT_LENGTH)
    template = {"type": "ref/resource", "uri": PAGE_URI_TEMPLATE}
    many_uris = [_uri(f"many_{n:04d}") for n in range(MANY_PAGES)] + [junk_uri[:2_000]] * 9_000
    return {
        "ping": [Attack("ping", "plain", "ping", {}, budgeted=False)],
        "server/discover": [
            Attack("server/discover", "plain", "server/discover", {}, budgeted=False, era="auto")
        ],
        "tools/list": [
            Attack("tools/list", "plain", "tools/list", {}, budgeted=False),
            Attack("tools/list", "long-cursor", "tools/list", {"cursor": _LONG_STRING}, budgeted=False),
        ],
        "resources/list": [
            Attack("resources/list", "many-pages", "resources/list", {}),
            Attack("resources/list", "long-cursor", "resources/list", {"cursor": _LONG_STRING}),
        ],
        "resources/templates/list": [
            Attack("resources/templates/list", "plain", "resources/templates/list", {}),
        ],
        "resources/read": [
            Attack("resources/read", "long-page", "resources/read", {"uri": long_uri}),
            Attack("resources/read", "wide-page", "resources/read", {"uri": wide_uri}),
            Attack("resources/read", "long-uri", "resources/read", {"uri": junk_uri}),
        ],
        "resources/subscribe": [
            Attack(
                "resources/subscribe", "long-page", "resources/subscribe", {"uri": long_uri}, budgeted=False
            ),
            Attack(
                "resources/subscribe", "long-uri", "resources/subscribe", {"uri": junk_uri}, budgeted=False
            ),
        ],
        "resources/unsubscribe": [
            Attack(
                "resources/unsubscribe",
                "long-uri",
                "resources/unsubscribe",
                {"uri": junk_uri},
                budgeted=False,
            ),
        ],
        "subscriptions/listen": [
            Attack(
                "subscriptions/listen",
                "many-uris",
                "subscriptions/listen",
                {"resourceSubscriptions": many_uris},
                budgeted=False,
                era="auto",
            ),
        ],
        "prompts/list": [Attack("prompts/list", "plain", "prompts/list", {})],
        "prompts/get": [
            Attack(
                "prompts/get",
                f"{name}-on-{page}-page",
                "prompts/get",
                {"name": name, "arguments": {**_PROMPT_ARGS, "documentId": page, **extra}},
            )
            for name, extra in PROMPTS.items()
            for page in (LONG, WIDE)
        ]
        + [
            Attack(
                "prompts/get",
                f"{name}-long-arguments",
                "prompts/get",
                {"name": name, "arguments": {key: _LONG_STRING for key in (*_PROMPT_ARGS, *extra)}},
            )
            for name, extra in PROMPTS.items()
        ],
        "completion/complete": [
            Attack(
                "completion/complete",
                f"{argument}-{typed_name}",
                "completion/complete",
                {"ref": template, "argument": {"name": argument, "value": typed}},
            )
            for argument in ("workspaceId", "documentId")
            for typed_name, typed in (
                ("everything", ""),
                ("shared-prefix", "w"),
                ("long-prefix", _LONG_STRING),
            )
        ]
        + [
            Attack(
                "completion/complete",
                f"{name}-{argument}-long-prefix",
                "completion/complete",
                {
                    "ref": {"type": "ref/prompt", "name": name},
                    "argument": {"name": argument, "value": _LONG_STRING},
                    "context": {"arguments": _PROMPT_ARGS},
                },
            )
            for name, extra in PROMPTS.items()
            for argument in (*_PROMPT_ARGS, *extra)
        ],
    }


# The prompts and the arguments each takes beyond the page (`surface/prompts/catalog.py`); the sweep's test
# checks this against prompts/list, so a new prompt fails it until it is named here.
PROMPTS: dict[str, dict[str, str]] = {
    "summarise_page": {},
    "review_run": {"runId": "run_sweep"},
    "tidy_page": {},
}


def tool_sweep() -> list[Attack]:
    return [attack for spec in ALL_TOOLS for attack in tool_attacks(spec)]


def kind_sweep() -> dict[str, list[Attack]]:
    """Every request kind's attacks; `tools/call`'s are every tool's (`tool_sweep`)."""
    return {"tools/call": tool_sweep(), **_kind_attacks()}


def all_attacks() -> list[Attack]:
    return [attack for attacks in kind_sweep().values() for attack in attacks]


def sweep_table() -> str:
    """docs/testing.md's table of the sweep: what each tool and request kind is sent."""
    rows: dict[str, list[str]] = {}
    for attack in all_attacks():
        rows.setdefault(attack.target, []).append(attack.variant)
    lines = ["| tool or request kind | attacks |", "|---|---|"]
    for target, variants in rows.items():
        lines.append(f"| `{target}` | {', '.join(variants)} |")
    return "\n".join(lines)
