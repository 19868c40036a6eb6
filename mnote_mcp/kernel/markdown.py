"""Markdown for a page body: compact for a model to read, exact enough to be read back into blocks.

With `with_ids`, every block ends with its id as a `<!-- id -->` comment (a code block carries it on
its opening fence), so an agent reading Markdown can still address blocks precisely, and
`parse_markdown` turns the rendering back into exactly the blocks it came from.

The dialect is CommonMark-shaped: `#` headings, `-` / `1.` / `- [ ]` list items whose children are
indented to the item's content column, `>` quotes, `> [!CALLOUT icon]` callouts, fenced code, `---`.
Text is plain text, so whatever in it would read as Markdown structure is escaped the CommonMark way:
a backslash before a line-leading marker (`\\#`, `1\\.`), before a backslash that would escape, and
in `<\\!--`; leading whitespace and carriage returns as numeric entities (`&#32;`, `&#13;`). Inline
syntax (`*`, `_`, links) is left as it is: the text round-trips exactly, a viewer may style it.
A multi-line text continues on lines indented to the block's content column (or `>`-prefixed).
"""

from __future__ import annotations

import re

from mnote_mcp.kernel.blocks import BLOCK_TYPES, Block, NewBlock, Props, normalize_blocks
from mnote_mcp.kernel.errors import MnoteError, invalid

_PUNCT = r"!-/:-@\[-`{-~"  # ASCII punctuation: what a CommonMark backslash escapes
_ESCAPING_BACKSLASH = re.compile(rf"\\(?=[{_PUNCT}\r\n]|$)")
_ENTITY_AHEAD = re.compile(r"&(?=#\d+;)")
_BLOCK_START = re.compile(r"[#>|\[<`~]|[-+*](?:[ \t]|$)|[-*_]{3}|=+[ \t]*$")
_ORDERED_START = re.compile(r"\d{1,9}(?=[.)](?:[ \t]|$))")
_UNESCAPE = re.compile(rf"\\([{_PUNCT}])|&#(\d{{1,7}});")
_TAG = re.compile(r"<!-- ([A-Za-z0-9_][A-Za-z0-9_.:-]*) -->$")
_EMPTY_FIRST_LINE = "<!---->"  # a paragraph whose first line is empty still needs a visible line

_FENCE = re.compile(r"`{3,}")
_CALLOUT = re.compile(r"> \[!CALLOUT(?: ((?:[^\\\]]|\\.)*))?\]$")
_HEADING = re.compile(r"(#{1,6})(?: (.*))?$")
_TODO = re.compile(r"- \[([ x])\](?: (.*))?$")
_BULLET = re.compile(r"-(?: (.*))?$")
_NUMBERED = re.compile(r"(\d{1,9})\.(?: (.*))?$")


# -- rendering -------------------------------------------------------------------------------


def render_markdown(
    blocks: list[Block], *, title: str | None = None, with_ids: bool = False, numbered_before: int = 0
) -> str:
    """`numbered_before`: how many numbered-list siblings come just before `blocks` (a piece of a
    body goes on numbering where the one before it stopped, so the pieces join into the whole)."""
    lines: list[str] = []
    if title is not None:
        lines.append(f"# {title}" if title else "#")
        lines.append("")
    for block, number in _numbered(blocks, numbered_before):
        _render(block, "", number, lines, with_ids)
        lines.append("")
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"


def _numbered(blocks: list[Block], before: int = 0) -> list[tuple[Block, int]]:
    """Each block with its number in a run of numbered-list siblings (0 outside one), the run having
    `before` items already."""
    out: list[tuple[Block, int]] = []
    number = before
    for block in blocks:
        number = number + 1 if block["type"] == "numbered_list" else 0
        out.append((block, number))
    return out


def _render(block: Block, pad: str, number: int, lines: list[str], with_ids: bool) -> None:
    kind = block["type"]
    props = block.get("props", {})
    tag = f"<!-- {block['id']} -->" if with_ids and block.get("id") else ""
    text_lines = block["text"].split("\n")
    if kind == "code":
        longest = max((len(run) for run in re.findall(r"`+", block["text"])), default=0)
        fence = "`" * max(3, longest + 1)
        lines.append(_line(pad + fence, _escape_field(props.get("language", ""), "`"), tag))
        lines.extend(pad + line if line else "" for line in text_lines)
        lines.append(pad + fence)
    elif kind == "divider":
        lines.append(_line(pad + "---", "", tag))
    elif kind == "quote":
        _text(lines, text_lines, pad + "> ", pad + "> ", tag)
    elif kind == "callout":
        icon = props.get("icon")
        header = f"{pad}> [!CALLOUT{' ' + _escape_field(icon, ']') if icon else ''}]"
        if block["text"]:
            lines.append(header)
            _text(lines, text_lines, pad + "> ", pad + "> ", tag)
        else:
            lines.append(_line(header, "", tag))
    else:
        marker, width = _marker(kind, props, number)
        first = pad + marker + " " if marker else pad
        if not marker and not text_lines[0] and len(text_lines) > 1:
            lines.append(pad + _EMPTY_FIRST_LINE)
            _text(lines, text_lines[1:], pad, pad, tag)
        else:
            _text(lines, text_lines, first, pad + " " * width, tag)
    children = block.get("children")
    if children:
        child_pad = pad + " " * _marker(kind, props, number)[1]
        for child, child_number in _numbered(children):
            _render(child, child_pad, child_number, lines, with_ids)


def _marker(kind: str, props: Props, number: int) -> tuple[str, int]:
    """A text block's line marker and its content column (where continuation lines and children sit)."""
    if kind == "heading":
        level = int(props.get("level", 1))
        return "#" * level, level + 1
    if kind == "bulleted_list":
        return "-", 2
    if kind == "numbered_list":
        return f"{number}.", len(str(number)) + 2
    if kind == "todo":
        return ("- [x]" if props.get("checked") else "- [ ]"), 2
    return "", 0


def _text(lines: list[str], text_lines: list[str], first: str, rest: str, tag: str) -> None:
    last = len(text_lines) - 1
    for index, line in enumerate(text_lines):
        lines.append(_line(first if index == 0 else rest, _escape_line(line), tag if index == last else ""))


def _line(prefix: str, text: str, tag: str) -> str:
    """One line; the tag follows one space after the text (a marker's own space serves when empty)."""
    if not tag:
        return prefix + text if text else prefix.rstrip(" ")
    if text:
        return f"{prefix}{text} {tag}"
    if not prefix.strip(" "):
        return prefix + tag
    return prefix + tag if prefix.endswith(" ") else f"{prefix} {tag}"


def _escape_inline(text: str) -> str:
    text = _ESCAPING_BACKSLASH.sub(r"\\\\", text)
    text = _ENTITY_AHEAD.sub(r"\\&", text)
    return text.replace("<!--", "<\\!--").replace("\r", "&#13;")


def _escape_line(line: str) -> str:
    out = _escape_inline(line)
    if out[:1] in (" ", "\t"):
        return f"&#{ord(out[0])};{out[1:]}"
    ordered = _ORDERED_START.match(out)
    if ordered:
        return out[: ordered.end()] + "\\" + out[ordered.end() :]
    return "\\" + out if _BLOCK_START.match(out) else out


def _escape_field(value: object, special: str) -> str:
    """A one-line field (code language, callout icon): newlines as entities, `special` escaped."""
    out = _escape_inline(str(value)).replace("\n", "&#10;")
    return out.replace(special, "\\" + special)


# -- parsing ---------------------------------------------------------------------------------


def parse_markdown(text: str, pointer: str = "/markdown") -> list[NewBlock]:
    """Blocks from Markdown written by `render_markdown(..., with_ids=True)`, checked by the block model.

    Refuses (invalid argument, with the line number) anything that is not that dialect, rather than
    guessing: every text block must end with its `<!-- id -->` tag.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return normalize_blocks(_Parser(lines, pointer).document(), pointer)


def _unescape(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return match.group(1)
        code = int(match.group(2))
        return chr(code) if code <= 0x10FFFF else match.group(0)

    return _UNESCAPE.sub(one, text)


def _split_tag(content: str) -> tuple[str, str | None]:
    match = _TAG.search(content)
    if match is None:
        return content, None
    head = content[: match.start()]
    return (head[:-1] if head.endswith(" ") else head), match.group(1)


class _Parser:
    def __init__(self, lines: list[str], pointer: str) -> None:
        self.lines = lines
        self.pointer = pointer
        self.i = 0

    def error(self, reason: str) -> MnoteError:
        return invalid(self.pointer, reason, line=min(self.i, len(self.lines) - 1) + 1)

    def document(self) -> list[NewBlock]:
        blocks: list[NewBlock] = []
        while True:
            while self.i < len(self.lines) and self.lines[self.i] == "":
                self.i += 1
            if self.i >= len(self.lines):
                return blocks
            blocks.append(self.block(""))
            if self.i < len(self.lines) and self.lines[self.i] != "":
                raise self.error("a top-level block must be followed by a blank line")

    def starts_block(self, pad: str) -> bool:
        if self.i >= len(self.lines):
            return False
        line = self.lines[self.i]
        return line.startswith(pad) and line[len(pad) : len(pad) + 1] not in ("", " ")

    def block(self, pad: str) -> NewBlock:
        if not self.starts_block(pad):
            raise self.error("unexpected indentation")
        line = self.lines[self.i][len(pad) :]
        self.i += 1
        block: NewBlock
        width = 0
        if _FENCE.match(line):
            block = self.code(pad, line)
        elif line.startswith("> [!CALLOUT"):
            block = self.callout(pad, line)
        elif line.startswith(">"):
            content, bid = self.quote_content(line)
            texts = [content]
            if bid is None:
                more, bid = self.quote_lines(pad)
                texts.extend(more)
            block = {"id": bid, "type": "quote", "text": "\n".join(texts)}
        else:
            block, width = self.text_block(pad, line)
        if block.get("id") is None:
            raise self.error("a block without its <!-- id --> tag")
        if BLOCK_TYPES[block["type"]].has_children:
            children: list[NewBlock] = []
            while self.starts_block(pad + " " * width):
                children.append(self.block(pad + " " * width))
            if children:
                block["children"] = children
        return block

    def text_block(self, pad: str, line: str) -> tuple[NewBlock, int]:
        head, bid = _split_tag(line)
        props: Props = {}
        if head == "---":
            return {"id": bid, "type": "divider", "text": ""}, 0
        if (match := _HEADING.match(head)) is not None:
            kind, first, width = "heading", match.group(2), len(match.group(1)) + 1
            props["level"] = len(match.group(1))
        elif (match := _TODO.match(head)) is not None:
            kind, first, width = "todo", match.group(2), 2
            props["checked"] = match.group(1) == "x"
        elif (match := _BULLET.match(head)) is not None:
            kind, first, width = "bulleted_list", match.group(1), 2
        elif (match := _NUMBERED.match(head)) is not None:
            kind, first, width = "numbered_list", match.group(2), len(match.group(1)) + 2
        else:
            kind, first, width = "paragraph", ("" if head == _EMPTY_FIRST_LINE else head), 0
        texts = [first or ""]
        if bid is None:
            more, bid = self.continuation(pad + " " * width)
            texts.extend(more)
        block: NewBlock = {"id": bid, "type": kind, "text": "\n".join(_unescape(t) for t in texts)}
        if props:
            block["props"] = props
        return block, width

    def continuation(self, prefix: str) -> tuple[list[str], str]:
        texts: list[str] = []
        while self.i < len(self.lines):
            line = self.lines[self.i]
            self.i += 1
            if line == "":
                texts.append("")
                continue
            if not line.startswith(prefix):
                raise self.error("a continuation line must be indented to the block's content")
            content, bid = _split_tag(line[len(prefix) :])
            texts.append(content)
            if bid is not None:
                return texts, bid
        raise self.error("a block without its <!-- id --> tag")

    def quote_content(self, line: str) -> tuple[str, str | None]:
        rest = line[1:]
        content, bid = _split_tag(rest[1:] if rest.startswith(" ") else rest)
        return _unescape(content), bid

    def quote_lines(self, pad: str) -> tuple[list[str], str]:
        texts: list[str] = []
        while self.i < len(self.lines) and self.lines[self.i].startswith(pad + ">"):
            content, bid = self.quote_content(self.lines[self.i][len(pad) :])
            self.i += 1
            texts.append(content)
            if bid is not None:
                return texts, bid
        raise self.error("a quote or callout without its <!-- id --> tag")

    def callout(self, pad: str, line: str) -> NewBlock:
        head, bid = _split_tag(line)
        match = _CALLOUT.match(head)
        if match is None:
            raise self.error("a callout header is '> [!CALLOUT icon]'")
        block: NewBlock = {"id": bid, "type": "callout", "text": ""}
        if match.group(1):
            block["props"] = {"icon": _unescape(match.group(1))}
        if bid is None:
            texts, block["id"] = self.quote_lines(pad)
            block["text"] = "\n".join(texts)
        return block

    def code(self, pad: str, line: str) -> NewBlock:
        head, bid = _split_tag(line)
        fence = _FENCE.match(head)
        assert fence is not None
        block: NewBlock = {"id": bid, "type": "code", "text": ""}
        language = head[fence.end() :]
        if language:
            block["props"] = {"language": _unescape(language)}
        texts: list[str] = []
        while self.i < len(self.lines):
            text = self.lines[self.i]
            self.i += 1
            if text == pad + fence.group(0):
                block["text"] = "\n".join(texts)
                return block
            if text and not text.startswith(pad):
                raise self.error("a code line must be indented to its block")
            texts.append(text[len(pad) :])
        raise self.error("a code block without its closing fence")
