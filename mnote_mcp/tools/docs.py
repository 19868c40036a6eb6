"""The documentation made from the tool declarations, never typed by hand.

Each `Section` is a block of a Markdown page between two markers, rendered from `catalog.ALL_TOOLS`:
the README's tool table and size table, docs/contract.md's tool list, docs/errors.md's errors per
tool (and the error catalogue, from `vocabulary/messages.py`), the runtime protocol's schemas
(`kernel/wiredoc.py`: kernel/schemas.py and docs/runtime-protocol.md's section), and docs/kernel.md's
table of the kernel commands (from their declarations in `kernel/store/commands`). `python -m mnote_mcp.tools.docs`
rewrites every section in place; `--check` only says which differ (exit 1). tests/unit/tools/test_registry.py
fails when a page is stale, so a new tool's rows appear once the command is run.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mnote_mcp.kernel.store.commands import command_table
from mnote_mcp.kernel.wiredoc import SCHEMAS_BEGIN, SCHEMAS_END, schemas_markdown, schemas_module
from mnote_mcp.tools.catalog import ALL_TOOLS
from mnote_mcp.tools.consent import never
from mnote_mcp.tools.examples import Example
from mnote_mcp.tools.failures import CONSENT_ERRORS, EVERY_TOOL, NAMED_PAGE, ErrorCase
from mnote_mcp.tools.permissions import Caller, Refusal
from mnote_mcp.tools.registry import ToolSpec
from mnote_mcp.tools.schemas import WRITE_EXTENSIONS
from mnote_mcp.tools.sizes import HERMES_UTILITY_TOOLS, utility_tool_bytes
from mnote_mcp.tools.typeschemas import TYPED_BEGIN, TYPED_END, typed_schemas_module
from mnote_mcp.vocabulary.envelope import CORRELATION_FIELDS
from mnote_mcp.vocabulary.messages import CATALOGUE_BEGIN, CATALOGUE_END, catalogue_markdown
from mnote_mcp.vocabulary.scopes import Scope

COMMAND = "python -m mnote_mcp.tools.docs"


@dataclass(frozen=True)
class Section:
    """A generated block of `path` (relative to the repository root), markers included."""

    name: str
    path: str
    render: Callable[[], str]
    begin: str = ""
    end: str = ""

    def __post_init__(self) -> None:
        if not self.begin:
            object.__setattr__(self, "begin", f"<!-- generated: {self.name}, by `{COMMAND}`; do not edit -->")
            object.__setattr__(self, "end", f"<!-- end of generated: {self.name} -->")

    def block(self) -> str:
        rendered = self.render()
        return rendered if rendered.startswith(self.begin) else f"{self.begin}\n{rendered}\n{self.end}"

    def span(self, text: str) -> tuple[int, int]:
        """Where the section stands in `text`; ValueError where its markers are missing or repeated."""
        if text.count(self.begin) != 1 or text.count(self.end) != 1:
            raise ValueError(f"{self.path}: the markers of '{self.name}' must appear once each")
        return text.index(self.begin), text.index(self.end) + len(self.end)

    def apply(self, text: str) -> str:
        start, end = self.span(text)
        return text[:start] + self.block() + text[end:]


def _mark(flag: bool) -> str:
    return "✓" if flag else "–"


def tool_table(specs: Iterable[ToolSpec] = ALL_TOOLS) -> str:
    """The README's table: what each tool does, its toolset, scope, hints and kernel command."""
    lines = [
        "| tool | what it does | toolset | by default | scope | readOnly | destructive | idempotent | asks first | kernel command |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for spec in specs:
        command = f"`{spec.command.name}`" if spec.command is not None else "(query)"
        lines.append(
            f"| `{spec.name}` | {spec.summary} | {spec.toolset.value} | {_mark(spec.by_default)} | {spec.scope.value} "
            f"| {_mark(not spec.writes)} | {_mark(spec.annotations.destructive)} "
            f"| {_mark(spec.annotations.idempotent)} | {asks_first(spec)} | {command} |"
        )
    return "\n".join(lines)


def read_scope_tools(specs: Iterable[ToolSpec] = ALL_TOOLS) -> str:
    """The README's words for what `--scope page.read` lists with the default selection: every tool
    that needs no other scope."""
    return ", ".join(f"`{spec.name}`" for spec in specs if spec.scope is Scope.PAGE_READ and spec.by_default)


def asks_first(spec: ToolSpec) -> str:
    """When `--confirm destructive` asks before the tool's write: its rule's own words."""
    if spec.consent is never:
        return "–"
    return (spec.consent.__doc__ or spec.consent.__name__).strip().rstrip(".")


def size_table(specs: Sequence[ToolSpec] = ALL_TOOLS) -> str:
    """Each tool's definition as the model is given it (`ToolSpec.model_bytes`), in both schema forms,
    with its budget and its `tools/list` entry; then the whole list as Hermes gives it to the model,
    its two resource tools included, and per tool."""
    lines = [
        "| tool | model bytes | budget | `--schema-form strict` | budget | `tools/list` entry |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    totals = [0, 0, 0, 0, 0]
    defaults = [0, 0, 0, 0, 0]
    for spec in specs:
        row = [
            spec.model_bytes("contract"),
            spec.budget.contract,
            spec.model_bytes("strict"),
            spec.budget.strict,
            spec.entry_bytes("contract"),
        ]
        totals = [total + value for total, value in zip(totals, row, strict=True)]
        if spec.by_default:
            defaults = [total + value for total, value in zip(defaults, row, strict=True)]
        marked = "" if spec.by_default else " (not by default)"
        lines.append(f"| `{spec.name}`{marked} | " + " | ".join(f"{value:,}" for value in row) + " |")
    extra = utility_tool_bytes()
    utility = "Hermes's `list_resources`, `read_resource`, `list_prompts`, `get_prompt`"
    count = sum(1 for spec in specs if spec.by_default)
    for label, sums, tools in (
        (f"the default selection ({count} tools)", defaults, count),
        (f"every tool (`--toolsets all`, {len(specs)})", totals, len(specs)),
    ):
        shown = tools + len(HERMES_UTILITY_TOOLS)
        contract, strict = sums[0] + extra, sums[2] + extra
        lines += [
            f"| {label} | " + " | ".join(f"{value:,}" for value in sums) + " |",
            f"| … with {utility} ({extra:,}) | {contract:,} | | {strict:,} | | |",
            f"| … per tool ({shown} tools) | {contract // shown:,} | | {strict // shown:,} | | |",
        ]
    return "\n".join(lines)


# Arguments every tool (or every write tool) takes, said once above the tool list, not per tool.
_COMMON = frozenset({*CORRELATION_FIELDS, *WRITE_EXTENSIONS, "capabilityScope", "dryRun"})


def _argument(name: str, schema: Mapping[str, Any], required: bool) -> str:
    notes: list[str] = []
    if "enum" in schema:
        values = [f"`{value}`" for value in schema["enum"]]
        notes.append(" or ".join(values) if len(values) <= 2 else "one of " + ", ".join(values))
    if schema.get("type") == "object" and "properties" in schema:
        notes.append(", ".join(f"`{key}`" for key in schema["properties"]))
    if "minimum" in schema and "maximum" in schema:
        notes.append(f"{schema['minimum']}–{schema['maximum']}")
    if "default" in schema:
        notes.append(f"default `{str(schema['default']).lower()}`")
    label = f"`{name}`" + ("*" if required else "")
    return f"{label} ({', '.join(notes)})" if notes else label


def arguments_of(spec: ToolSpec) -> str:
    """A tool's own arguments, from its advertised schema: required ones starred, enums, ranges, defaults."""
    schema = spec.accepted_schema(strict=False)
    page = {"workspaceId", "documentId"} if spec.page_bound else set()
    own = [name for name in schema["properties"] if name not in _COMMON | page]
    required = set(schema["required"])
    return ", ".join(_argument(name, schema["properties"][name], name in required) for name in own) or "–"


def _example(example: Example) -> str:
    shown = json.dumps(dict(example.arguments), ensure_ascii=False).replace("|", "\\|")
    made = [
        f"`{step.tool}` `{json.dumps(dict(step.arguments), ensure_ascii=False)}`" for step in example.setup
    ]
    after = f" (after {', '.join(made)})".replace("|", "\\|") if made else ""
    return f"`{shown}`{after}" + (f": {example.note}" if example.note else "")


def tool_list(specs: Sequence[ToolSpec] = ALL_TOOLS) -> str:
    """docs/contract.md's list: each tool's own arguments and what its result holds, then the example
    calls it declares (the ones the tests make of it)."""
    lines = [
        "| tool | toolset | arguments (* required) | result |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| `{spec.name}` | {spec.toolset.value} | {arguments_of(spec)} | {spec.returns} |" for spec in specs
    ]
    lines += [
        "",
        "Example calls, as each tool declares them (the page and ids left out; `<block n>` is the n-th",
        "top-level block of the page, `<seeded revision>` its revision before the test wrote to it):",
        "",
        "| tool | example |",
        "|---|---|",
    ]
    lines += [f"| `{spec.name}` | {'<br>'.join(_example(e) for e in spec.examples)} |" for spec in specs]
    return "\n".join(lines)


def _error_rows(cases: Sequence[tuple[str, str, str, str]]) -> list[str]:
    return [
        "| code | reason | when | what to do |",
        "|---|---|---|---|",
        *(f"| `{code}` | {reason} | {when} | {recovery} |" for code, reason, when, recovery in cases),
    ]


def _declared(case: ErrorCase) -> tuple[str, str, str, str]:
    return case.code.value, case.reason.value, case.when, case.recovery


def _refused(refusal: Refusal, callers: Iterable[Caller]) -> tuple[str, str, str, str]:
    who = ", ".join(caller.value for caller in callers)
    return refusal.code.value, refusal.reason.value, f"refused to: {who}", refusal.recovery


def errors_of(spec: ToolSpec) -> list[tuple[str, str, str, str]]:
    """Who the tool refuses (from its permission cases), then what else it declares it can answer."""
    refused = [
        _refused(refusal, [caller for caller, said in spec.permissions.refused.items() if said == refusal])
        for refusal in spec.permissions.refusals()
    ]
    return refused + [_declared(case) for case in spec.errors]


def errors_per_tool(specs: Iterable[ToolSpec] = ALL_TOOLS) -> str:
    """docs/errors.md's errors per tool: what any tool can answer, then each tool's own."""
    lines = ["Any tool can also answer:", "", *_error_rows([_declared(case) for case in EVERY_TOOL])]
    lines += [
        "",
        "Any tool that acts on a page can also answer, when `documentId` is a title (`workspaceId` may be",
        '`""`; a title that names no page the caller may read is `mnote_tool_not_found` as an unknown id is):',
        "",
        *_error_rows([_declared(case) for case in NAMED_PAGE]),
    ]
    lines += [
        "",
        "Any write tool can also answer, when the person is asked to confirm it (`--confirm`; the tools",
        "whose *asks first* column in the README names a rule, or every write under `--confirm always`):",
        "",
        *_error_rows([_declared(case) for case in CONSENT_ERRORS]),
    ]
    for spec in specs:
        lines += ["", f"### `{spec.name}`", "", *_error_rows(errors_of(spec))]
    return "\n".join(lines)


SECTIONS: tuple[Section, ...] = (
    Section("tool table", "README.md", tool_table),
    Section("tool sizes", "README.md", size_table),
    Section("page.read tools", "README.md", read_scope_tools),
    Section("tool list", "docs/contract.md", tool_list),
    Section("errors per tool", "docs/errors.md", errors_per_tool),
    Section("error catalogue", "docs/errors.md", catalogue_markdown, CATALOGUE_BEGIN, CATALOGUE_END),
    Section("runtime protocol schemas", "docs/runtime-protocol.md", schemas_markdown),
    Section("wire schemas", "mnote_mcp/kernel/schemas.py", schemas_module, SCHEMAS_BEGIN, SCHEMAS_END),
    Section("kernel commands", "docs/kernel.md", command_table),
    Section(
        "typed schemas",
        "mnote_mcp/tools/typedschemas.py",
        lambda: typed_schemas_module(
            {spec.output: None for spec in ALL_TOOLS}, {spec.arguments: None for spec in ALL_TOOLS}
        ),
        TYPED_BEGIN,
        TYPED_END,
    ),
)


def stale(root: Path, sections: Iterable[Section] = SECTIONS) -> dict[Path, str]:
    """The pages under `root` whose generated sections differ from the declarations: their new text."""
    pages: dict[Path, str] = {}
    for section in sections:
        path = root / section.path
        text = pages.get(path) or path.read_text(encoding="utf-8")
        pages[path] = section.apply(text)
    return {path: text for path, text in pages.items() if text != path.read_text(encoding="utf-8")}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__)
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the repository (default: here)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a page is stale")
    options = parser.parse_args(argv)
    changed = stale(options.root)
    for path, text in changed.items():
        if not options.check:
            path.write_text(text, encoding="utf-8")
        print(f"{'stale' if options.check else 'rewrote'}: {path.relative_to(options.root)}")
    return 1 if options.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
