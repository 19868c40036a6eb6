"""The layers of docs/architecture.md are the code's: no import runs up them, and no import cycle.

The layer table is read from the document itself, so the document and the code cannot drift apart:
a module that is in no layer, a layer entry naming no module, an import of a higher layer, and a
cycle all fail here, each naming the modules involved.
"""

from __future__ import annotations

import ast
import graphlib
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import grimp
import pytest

from tests.support.helpers import ROOT

DOC = ROOT / "docs" / "architecture.md"
PACKAGE = "mnote_mcp"
# Cycles that another branch is removing, each with who removes it. The test fails as soon as one
# is gone, so that this list only ever shrinks.
KNOWN_CYCLES: dict[frozenset[str], str] = {}


@cache
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(PACKAGE, cache_dir=None)


@cache
def layers() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(layer, module patterns) from the first table of docs/architecture.md, top layer first."""
    rows: list[tuple[str, tuple[str, ...]]] = []
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| layer |"))
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows.append((cells[0], tuple(re.findall(r"`([\w.*]+)`", cells[1]))))
    return tuple(rows)


def _matches(pattern: str, module: str) -> int:
    """How specifically `pattern` names `module`: 0 not at all; `pkg.*` is the package and below."""
    if pattern.endswith(".*"):
        package = pattern[:-2]
        return len(package) if module == package or module.startswith(package + ".") else 0
    return len(pattern) + 1 if module == pattern else 0


def layer_of(module: str) -> int | None:
    """The index of the layer whose most specific pattern names `module` (0 is the top)."""
    best: tuple[int, int] | None = None
    for index, (_, patterns) in enumerate(layers()):
        for pattern in patterns:
            score = _matches(pattern, module)
            if score and (best is None or score > best[0]):
                best = (score, index)
    return best[1] if best else None


def imports() -> Iterator[tuple[str, str]]:
    for importer in graph().modules:
        for imported in graph().find_modules_directly_imported_by(importer):
            if imported.split(".")[0] == PACKAGE:
                yield importer, imported


def test_the_document_has_the_layer_table() -> None:
    assert len(layers()) >= 8
    assert all(patterns for _, patterns in layers()), "every layer names its modules"


def test_every_module_is_in_a_layer() -> None:
    unplaced = sorted(module for module in graph().modules if layer_of(module) is None)
    assert not unplaced, f"add these modules to the layer table of docs/architecture.md: {unplaced}"


def test_every_layer_entry_names_an_existing_module() -> None:
    modules = graph().modules
    for layer, patterns in layers():
        for pattern in patterns:
            assert any(_matches(pattern, module) for module in modules), f"{layer}: {pattern} names no module"


def folder_of(module: str) -> str:
    """The package a module's file is in: a package's `__init__.py` is in its own folder."""
    return module if (ROOT / Path(*module.split("."))).is_dir() else module.rsplit(".", 1)[0]


def test_a_folder_is_a_layer() -> None:
    """Issue 33: the tree reads as the layer table. Below the package's root a module is placed by its
    folder (a row names `pkg.*`, never one module inside a folder), so every module of a folder is of
    one layer, and what a module may import is read off its path."""
    named_one_by_one = [
        f"{layer}: {pattern}"
        for layer, patterns in layers()
        for pattern in patterns
        if not pattern.endswith(".*") and pattern.count(".") > 1
    ]
    assert named_one_by_one == [], "name the folder, and move the module into the folder of its layer"
    mixed = {}
    for package in {folder_of(module) for module in graph().modules if module.count(".") > 1}:
        found = {layer_of(m) for m in graph().modules if folder_of(m) == package}
        if len(found) > 1:
            mixed[package] = sorted(layers()[index][0] for index in found if index is not None)
    assert mixed == {}


def test_the_root_keeps_only_entry_points_wiring_and_the_server() -> None:
    """A module at the root is of the top layers (entry, wiring, server) or is the package itself: a
    shared piece goes to `base/`, a piece of the call path to its folder."""
    top = {name for name, _ in layers()[: [name for name, _ in layers()].index("server") + 1]}
    names = [name for name, _ in layers()]
    stray = sorted(
        module
        for module in graph().modules
        if module.count(".") == 1
        and folder_of(module) == PACKAGE
        and (index := layer_of(module)) is not None
        and names[index] not in top
    )
    assert stray == []


def test_no_import_runs_up_the_layers() -> None:
    names = [name for name, _ in layers()]
    upward = []
    for importer, imported in imports():
        low, high = layer_of(importer), layer_of(imported)
        if low is not None and high is not None and high < low:
            details = graph().get_import_details(importer=importer, imported=imported)
            line = details[0]["line_number"] if details else "?"
            upward.append(f"{importer}:{line} ({names[low]}) imports {imported} ({names[high]})")
    assert not upward, "imports running up the layers:\n" + "\n".join(sorted(upward))


def test_no_import_cycle() -> None:
    """Every import counts, lazy ones and those for type checking included."""
    edges: dict[str, set[str]] = {module: set() for module in graph().modules}
    for importer, imported in imports():
        edges[importer].add(imported)
    found: list[frozenset[str]] = []
    while True:
        try:
            graphlib.TopologicalSorter(edges).prepare()
            break
        except graphlib.CycleError as error:
            members: list[str] = error.args[1]
            found.append(frozenset(members))
            edges[members[-2]].discard(members[-1])  # break it, and look for the next one
    unknown = [sorted(cycle) for cycle in found if cycle not in KNOWN_CYCLES]
    assert not unknown, f"import cycles: {unknown}"
    for cycle, owner in KNOWN_CYCLES.items():
        if cycle not in found:
            pytest.fail(f"the cycle {sorted(cycle)} is gone ({owner}): remove it from KNOWN_CYCLES")


def test_the_document_names_only_modules_that_exist() -> None:
    text = DOC.read_text(encoding="utf-8")
    paths = set(re.findall(r"mnote_mcp/[\w/{},.]+\.py", text))
    missing = []
    for written in paths:
        # `mnote_mcp/transports/{http,auth}.py` names several files
        stem, _, rest = written.partition("{")
        names = rest.split("}", 1)[0].split(",") if rest else [""]
        suffix = rest.split("}", 1)[1] if rest else ""
        for name in names:
            if not (ROOT / f"{stem}{name}{suffix}").exists():
                missing.append(f"{stem}{name}{suffix}")
    dotted = set(re.findall(r"`(mnote_mcp(?:\.\w+)+)`", text))
    missing += [name for name in dotted if name not in graph().modules]
    assert not missing, f"docs/architecture.md names what does not exist: {sorted(missing)}"


def test_the_layer_table_covers_the_package_directory() -> None:
    """grimp sees what is importable; this sees every file, so nothing hides from the layers."""
    files = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for path in Path(ROOT / PACKAGE).rglob("*.py")
    }
    assert files == set(graph().modules)


def test_the_settings_runtime_cli_parses_import_only_the_base_and_the_kernel() -> None:
    """Issue 33: `runtime cli` starts once per call and parses its command line from
    `mnote_mcp.settings`; an import there of a layer above the kernel (the call path, the tools, the
    MCP surface, whose limits the MCP server's settings in `mnote_mcp.config` take as defaults) would
    be paid on every call. tests/e2e/test_runtime_relay.py checks the process itself."""
    imported = sorted(graph().find_modules_directly_imported_by("mnote_mcp.settings"))
    above_the_kernel = [
        module
        for module in imported
        if module.startswith(PACKAGE + ".") and not _within(module, ("mnote_mcp.base", "mnote_mcp.kernel"))
    ]
    assert imported and above_the_kernel == []


# -- the portable kernel and its dialects (issue 21) ---------------------------------------------

PORTABLE = "mnote_mcp.kernel.store"
DIALECTS = ("mnote_mcp.kernel.sqlite", "mnote_mcp.kernel.postgres")
DATABASE_DRIVERS = ("sqlite3", "psycopg", "psycopg_pool")


def _modules_of(package: str) -> list[str]:
    return sorted(m for m in graph().modules if m == package or m.startswith(package + "."))


def _source(module: str) -> ast.Module:
    path = ROOT / Path(*module.split("."))
    file = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    return ast.parse(file.read_text(encoding="utf-8"))


def _imported(tree: ast.Module) -> set[str]:
    """Every module a source imports, lazy and TYPE_CHECKING imports included."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_the_portable_kernel_imports_no_database() -> None:
    """kernel/store runs on any database: no driver, no dialect, only the seam (`dialect.py`)."""
    leaks = {
        module: sorted(m for m in _imported(_source(module)) if _within(m, (*DATABASE_DRIVERS, *DIALECTS)))
        for module in _modules_of(PORTABLE)
    }
    assert {module: found for module, found in leaks.items() if found} == {}


def test_the_dialects_stand_side_by_side() -> None:
    """Neither dialect imports the other: what they share is the portable kernel's."""
    crossing = [
        f"{importer} imports {imported}"
        for importer, imported in imports()
        for mine, other in (DIALECTS, DIALECTS[::-1])
        if _within(importer, (mine,)) and _within(imported, (other,))
    ]
    assert crossing == []


def test_no_dialect_reaches_into_the_portable_kernel() -> None:
    """A dialect uses the portable kernel's public names only: no `from kernel.store.x import _name`,
    no `x._name` of a module of it (the seam is what a dialect may count on)."""
    reached = []
    for module in [m for package in DIALECTS for m in _modules_of(package)]:
        tree = _source(module)
        portable: set[str] = set()  # local names bound to a module of the portable kernel
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and _within(node.module, (PORTABLE,)):
                for alias in node.names:
                    if alias.name.startswith("_"):
                        reached.append(f"{module}: from {node.module} import {alias.name}")
                    elif f"{node.module}.{alias.name}" in graph().modules:
                        portable.add(alias.asname or alias.name)
            elif isinstance(node, ast.Import):
                portable.update(
                    alias.asname or alias.name for alias in node.names if _within(alias.name, (PORTABLE,))
                )
        reached += [
            f"{module}: {node.value.id}.{node.attr}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in portable
            and node.attr.startswith("_")
        ]
    assert reached == []
