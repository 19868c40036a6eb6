"""Markdown rendering of a page body: compact for a model to read, and for text diffs.

With `with_ids`, each block's id follows it as a trailing `<!-- id -->` comment so that an agent
reading Markdown can still address blocks precisely.
"""

from __future__ import annotations

from mnote_mcp.kernel.blocks import Block


def render_markdown(blocks: list[Block], *, title: str | None = None, with_ids: bool = False) -> str:
    lines: list[str] = []
    if title is not None:
        lines.append(f"# {title}" if title else "#")
        lines.append("")
    _render(blocks, 0, lines, with_ids)
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"


def _render(blocks: list[Block], indent: int, lines: list[str], with_ids: bool) -> None:
    pad = " " * indent
    number = 0
    for block in blocks:
        kind = block["type"]
        number = number + 1 if kind == "numbered_list" else 0
        text: str = block["text"]
        props = block.get("props", {})
        tag = f" <!-- {block['id']} -->" if with_ids and block.get("id") else ""
        if kind == "heading":
            lines.append(f"{pad}{'#' * props.get('level', 1)} {text}{tag}")
        elif kind == "bulleted_list":
            lines.append(f"{pad}- {_inline(text)}{tag}")
        elif kind == "numbered_list":
            lines.append(f"{pad}{number}. {_inline(text)}{tag}")
        elif kind == "todo":
            mark = "x" if props.get("checked") else " "
            lines.append(f"{pad}- [{mark}] {_inline(text)}{tag}")
        elif kind == "quote":
            lines.extend(f"{pad}> {line}".rstrip() for line in text.split("\n"))
            lines[-1] += tag
        elif kind == "callout":
            icon = props.get("icon")
            lines.append(f"{pad}> [!CALLOUT{' ' + icon if icon else ''}]{tag}")
            lines.extend(f"{pad}> {line}".rstrip() for line in text.split("\n"))
        elif kind == "code":
            fence = "````" if "```" in text else "```"
            lines.append(f"{pad}{fence}{props.get('language', '')}{tag}")
            lines.extend(f"{pad}{line}" for line in text.split("\n"))
            lines.append(f"{pad}{fence}")
        elif kind == "divider":
            lines.append(f"{pad}---{tag}")
        else:
            lines.extend(f"{pad}{line}" for line in text.split("\n"))
            lines[-1] += tag
        children = block.get("children")
        if children:
            _render(children, indent + 2, lines, with_ids)
        if indent == 0:
            lines.append("")


def _inline(text: str) -> str:
    return text.replace("\n", " ")
