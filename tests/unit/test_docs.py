"""The documentation keeps its promises: the README's two commands, and a complete error catalogue."""

from __future__ import annotations

from mnote_mcp.vocabulary.messages import HINTS, MESSAGES
from tests.support.helpers import ROOT


def test_readme_opens_with_the_two_setup_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands[0] == "python3.11 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/mnote-mcp"
    assert commands[1] == "bash .ci/run"
    assert ".venv/bin/python -m pytest" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


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
