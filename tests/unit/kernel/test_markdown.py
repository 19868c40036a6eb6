"""The Markdown rendering reads back into exactly the blocks it came from, for every block type,
whatever the text looks like; and `mnote.page.get` with format=markdown gives that rendering."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnote_mcp.kernel.blocks import BLOCK_TYPES, MAX_DEPTH, Block, assign_ids, normalize_blocks, walk
from mnote_mcp.kernel.errors import MnoteError
from mnote_mcp.kernel.markdown import parse_markdown, render_markdown
from tests.support.helpers import MODES, call, connect, page_args, write_args

# Text that is nasty for Markdown: markers, fences, our own id comment, entities, escapes, blank lines.
TRICKY = [
    "#",
    "# ",
    "##",
    "> ",
    ">",
    "- ",
    "-",
    "---",
    "***",
    "___",
    "* ",
    "+ ",
    "1. ",
    "1) ",
    "10.",
    "- [ ] ",
    "- [x] ",
    "[!CALLOUT]",
    "> [!CALLOUT x]",
    "```",
    "````",
    "~~~",
    "<!--",
    "-->",
    "<!-- x -->",
    "<!---->",
    "&#32;",
    "&#10;",
    "&amp;",
    "&",
    "\\",
    "\\#",
    "\\\\",
    "=",
    "==",
    "|",
    "[",
    "]",
    " ",
    "  ",
    "\t",
    "\n",
    "\r",
    "\r\n",
    "\n\n",
    "é",
    "中文",
    "\u2028",
    "\x0b",
    "a",
    "b",
    "*x*",
    "`c`",
]
TEXT = st.lists(st.sampled_from(TRICKY), max_size=8).map("".join) | st.text(max_size=24)
NESTING = [name for name, spec in BLOCK_TYPES.items() if spec.has_children]


def block(depth: int) -> st.SearchStrategy[dict[str, Any]]:
    leaves = st.one_of(
        st.builds(lambda t: {"type": "paragraph", "text": t}, TEXT),
        st.builds(
            lambda t, n: {"type": "heading", "text": t, "props": {"level": n}}, TEXT, st.integers(1, 6)
        ),
        st.builds(lambda t: {"type": "quote", "text": t}, TEXT),
        st.builds(lambda t, lang: {"type": "code", "text": t, "props": {"language": lang}}, TEXT, TEXT),
        st.builds(lambda t, icon: {"type": "callout", "text": t, "props": {"icon": icon}}, TEXT, TEXT),
        st.just({"type": "divider"}),
    )
    children = st.lists(st.deferred(lambda: block(depth + 1)), max_size=3) if depth < 4 else st.just([])
    lists = st.builds(
        lambda kind, text, checked, kids: {
            "type": kind,
            "text": text,
            "children": kids,
            **({"props": {"checked": checked}} if kind == "todo" else {}),
        },
        st.sampled_from(NESTING),
        TEXT,
        st.booleans(),
        children,
    )
    return st.one_of(leaves, lists)


def canonical(raw: list[dict[str, Any]]) -> list[Block]:
    return assign_ids(normalize_blocks(raw), "markdown-test", set())


@pytest.mark.slow
@settings(max_examples=600, deadline=None)
@given(st.lists(block(1), max_size=6))
def test_render_then_parse_gives_the_same_blocks(raw: list[dict[str, Any]]) -> None:
    blocks = canonical(raw)
    rendered = render_markdown(blocks, with_ids=True)
    assert parse_markdown(rendered) == blocks, rendered


def test_every_block_type_round_trips() -> None:
    """One of each type, nested to the depth limit, so no type is left to chance."""
    nested: dict[str, Any] = {"type": "todo", "text": "deepest", "props": {"checked": True}}
    for level in range(MAX_DEPTH - 1):
        nested = {"type": NESTING[level % len(NESTING)], "text": f"level {level}", "children": [nested]}
    blocks = canonical(
        [
            {"type": "paragraph", "text": "plain\nsecond line"},
            *({"type": "heading", "text": f"h{n}", "props": {"level": n}} for n in range(1, 7)),
            {"type": "quote", "text": "quoted\n\nparagraphs"},
            {"type": "code", "text": "def f():\n    return '```'\n", "props": {"language": "python"}},
            {"type": "code", "text": ""},
            {"type": "callout", "text": "careful", "props": {"icon": "⚠️"}},
            {"type": "callout", "text": ""},
            {"type": "divider"},
            nested,
        ]
    )
    assert {b["type"] for b, _, _ in walk(blocks)} == set(BLOCK_TYPES)
    assert parse_markdown(render_markdown(blocks, with_ids=True)) == blocks


@pytest.mark.parametrize(
    "text",
    [
        "# not a heading",
        "- not a list",
        "1. not numbered",
        "> not a quote",
        "```",
        "---",
        "<!-- b_1 -->",
        "  indented",
    ],
)
def test_text_that_looks_like_markdown_is_escaped(text: str) -> None:
    (paragraph,) = canonical([{"type": "paragraph", "text": text}])
    rendered = render_markdown([paragraph], with_ids=True)
    assert rendered != f"{text} <!-- {paragraph['id']} -->\n", "escaped, not written verbatim"
    assert parse_markdown(rendered) == [paragraph]


@pytest.mark.parametrize(
    ("markdown", "line"),
    [
        ("a paragraph without its id\n", 1),
        ("- item <!-- a -->\n   - wrongly indented <!-- b -->\n", 2),
        ("```py <!-- c -->\nno closing fence\n", 2),
        ("> [!CALLOUT unclosed <!-- d -->\n", 1),
        ("first <!-- e -->\nsecond <!-- f -->\n", 2),
    ],
)
def test_markdown_that_is_not_the_dialect_is_refused_with_its_line(markdown: str, line: int) -> None:
    with pytest.raises(MnoteError) as caught:
        parse_markdown(markdown)
    assert caught.value.code.value == "mnote_tool_invalid_argument"
    assert caught.value.details["pointer"] == "/markdown"
    assert caught.value.details["line"] == line


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_page_get_markdown_keeps_block_ids_recoverable(db: Path, mode: str) -> None:
    body = [
        {"type": "heading", "text": "Plan", "props": {"level": 2}},
        {"type": "todo", "text": "- [ ] looks like a todo", "children": [{"type": "code", "text": "x = 1"}]},
        {"type": "callout", "text": "two\nlines", "props": {"icon": "💡"}},
    ]
    async with connect(db, mode) as client:
        await call(client, "mnote.page.save", **write_args("k", content=body))
        blocks = await call(client, "mnote.page.get", **page_args())
        markdown = await call(client, "mnote.page.get", **page_args(format="markdown"))
    result = markdown["result"]
    assert "blocks" not in result and result["revision"] == blocks["result"]["revision"]
    assert parse_markdown(result["markdown"]) == blocks["result"]["blocks"]
    compact_json = json.dumps(blocks["result"]["blocks"], ensure_ascii=False, separators=(",", ":"))
    assert len(result["markdown"]) < len(compact_json), "Markdown is the compact form"
