"""The documentation keeps its promises: the README's two commands, a complete error catalogue, and
the test layout docs/testing.md describes (a row for every test file, `tests/unit/` mirroring the
package, no page naming a test path that is not there)."""

from __future__ import annotations

import re
from pathlib import Path

from mnote_mcp.vocabulary.messages import HINTS, MESSAGES
from tests.support.helpers import ROOT

TESTS = ROOT / "tests"
TESTING = ROOT / "docs" / "testing.md"
PACKAGE = ROOT / "mnote_mcp"
# tests/unit/'s files about the project rather than one module (docs/testing.md says so too)
PROJECT_WIDE = frozenset({"test_architecture.py", "test_ci.py", "test_contract_doc.py", "test_docs.py"})


def test_readme_opens_with_the_two_setup_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands[0] == "python3.11 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/mnote-mcp"
    assert commands[1] == "bash .ci/run"
    assert ".venv/bin/python -m pytest" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_every_hermes_install_pins_the_version_ci_tests() -> None:
    """Issue 35: the README installed `hermes-agent[mcp]` unpinned, whatever the index serves that
    day; every install the docs and examples show pins the version `.ci/run` installs and tests."""
    tested = re.search(
        r"'hermes-agent\[mcp\]==([0-9.]+)'", (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    )
    assert tested is not None
    pages = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "examples").iterdir()]
    installs = [
        (page.name, found)
        for page in pages
        if page.is_file()
        for found in re.findall(
            r"install [^\n]*?hermes-agent\[mcp\][^'\s]*", page.read_text(encoding="utf-8")
        )
    ]
    assert installs, "the docs show how to install Hermes"
    for page, found in installs:
        assert found.endswith(f"hermes-agent[mcp]=={tested.group(1)}"), (page, found)


def test_error_catalogue_is_documented_in_both_languages() -> None:
    page = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    for table in (MESSAGES, HINTS):
        for (code, _), texts in table.items():
            assert code.value in page
            for text in texts.values():
                assert text in page, text


def test_the_error_catalogue_page_is_generated_from_the_messages() -> None:
    from mnote_mcp.vocabulary.messages import CATALOGUE_BEGIN, CATALOGUE_END, catalogue_markdown

    page = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    start, end = page.index(CATALOGUE_BEGIN), page.index(CATALOGUE_END) + len(CATALOGUE_END)
    assert page[start:end] == catalogue_markdown(), "run: python -m mnote_mcp.vocabulary.messages"


def all_test_files() -> set[str]:
    return {path.relative_to(ROOT).as_posix() for path in TESTS.rglob("test_*.py")}


def test_the_testing_page_has_a_row_for_every_test_file_and_no_other() -> None:
    rows = re.findall(r"^\| `(tests/[^`]+\.py)` \|", TESTING.read_text(encoding="utf-8"), re.MULTILINE)
    assert len(rows) == len(set(rows)), (
        f"a file with two rows: {sorted(r for r in rows if rows.count(r) > 1)}"
    )
    listed = set(rows)
    assert not all_test_files() - listed, (
        f"docs/testing.md has no row for {sorted(all_test_files() - listed)}"
    )
    assert not listed - all_test_files(), (
        f"docs/testing.md has a row for no file: {sorted(listed - all_test_files())}"
    )


def test_every_test_path_the_docs_name_exists() -> None:
    """A file or folder under tests/ named in the README or docs/, and a `file.py::test` named there."""
    missing = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for path, test in re.findall(r"(?<![\w/.])(tests/[\w/.-]*\w)(?:::(\w+))?", text):
            target = ROOT / path
            if not target.exists():
                missing.append(f"{page.name}: {path}")
            elif test and not re.search(rf"^(async )?def {test}\(", target.read_text(encoding="utf-8"), re.M):
                missing.append(f"{page.name}: {path}::{test}")
    assert not missing, missing


def module_of(test_file: Path) -> bool:
    """Is `test_<module>.py` or `test_<module>_<aspect>.py` named after a module of its package?"""
    package = PACKAGE / test_file.parent.relative_to(TESTS / "unit")
    name = test_file.stem.removeprefix("test_")
    modules = {path.stem for path in package.glob("*.py")} | {
        path.name for path in package.iterdir() if path.is_dir()
    }
    return any(name == module or name.startswith(f"{module}_") for module in modules - {"__init__"})


def test_the_unit_tests_mirror_the_package() -> None:
    """tests/unit/kernel/store/test_group.py is about mnote_mcp/kernel/store/group.py: every folder of
    tests/unit is a package of mnote_mcp, every file is named after a module of its folder's package."""
    unit = TESTS / "unit"
    folders = [path for path in unit.rglob("*") if path.is_dir() and path.name != "__pycache__"]
    assert [f for f in folders if not (PACKAGE / f.relative_to(unit) / "__init__.py").exists()] == []
    strays = [
        path.relative_to(ROOT).as_posix()
        for path in unit.rglob("test_*.py")
        if not module_of(path) and not (path.parent == unit and path.name in PROJECT_WIDE)
    ]
    assert not strays, f"named after no module of their package (docs/testing.md, 'Layout'): {strays}"
