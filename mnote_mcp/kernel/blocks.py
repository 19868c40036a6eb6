"""The block model: what a page body is made of, and the one place that says what a valid block is.

Every adapter and every tool shares these rules so that a block the embedded kernel accepts is one the
runtime accepts too. Blocks are plain dicts in their canonical form:
`{"id", "type", "text", "props"?, "children"?}`; `props` and `children` are omitted when empty. The
types say so (`Block`); a caller's blocks are checked once, at the edge (`normalize_blocks`), and are
`NewBlock`s (ids may be missing) until `assign_ids` gives each its id.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import NotRequired, Protocol, TypeVar, cast

from typing_extensions import TypedDict  # pydantic reads these (kernel/port.py) and needs this one on 3.11

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason, invalid

PropValue = bool | int | str  # the kinds `BLOCK_TYPES` gives props
Props = dict[str, PropValue]


class Block(TypedDict):
    """A block in its canonical form, as a page holds it: `props` and `children` only when not empty."""

    id: str
    type: str
    text: str
    props: NotRequired[Props]
    children: NotRequired[list[Block]]


class NewBlock(TypedDict):
    """A block a caller sent, checked and canonical but for its id, which may still be missing."""

    id: str | None
    type: str
    text: str
    props: NotRequired[Props]
    children: NotRequired[list[NewBlock]]


# Either form, where a function reads blocks before and after their ids are given alike.
EitherBlock = TypeVar("EitherBlock", Block, NewBlock)

# The advertised schema's pattern (ECMA-262, matched by jsonschema-rs: `$` is the end of the text).
# Python's `re` lets `$` match before a final newline too, so the kernel uses it with `fullmatch`:
# "evil\n" is no id (it would break the Markdown id comment of its block).
BLOCK_ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$"
_BLOCK_ID_RE = re.compile(BLOCK_ID_PATTERN)
MAX_TEXT_LENGTH = 100_000
MAX_DEPTH = 8
MAX_BLOCKS = 20_000  # blocks one request may carry, or block ids it may name
# What `--max-block-ids` starts at: as many ids as a request may name, as many blocks as a page holds
# by default (deleting every top-level block of a full page, or reading any subset, is one call).
DEFAULT_MAX_BLOCK_IDS = MAX_BLOCKS


@dataclass(frozen=True, slots=True)
class PropSpec:
    kind: type[PropValue]
    default: PropValue | None = None
    minimum: int | None = None
    maximum: int | None = None


@dataclass(frozen=True, slots=True)
class BlockType:
    props: Mapping[str, PropSpec]
    has_children: bool = False
    has_text: bool = True


BLOCK_TYPES: Mapping[str, BlockType] = {
    "paragraph": BlockType({}),
    "heading": BlockType({"level": PropSpec(int, default=1, minimum=1, maximum=6)}),
    "bulleted_list": BlockType({}, has_children=True),
    "numbered_list": BlockType({}, has_children=True),
    "todo": BlockType({"checked": PropSpec(bool, default=False)}, has_children=True),
    "quote": BlockType({}),
    "code": BlockType({"language": PropSpec(str)}),
    "callout": BlockType({"icon": PropSpec(str)}),
    "divider": BlockType({}, has_text=False),
}
SUPPORTED_TYPES: tuple[str, ...] = tuple(BLOCK_TYPES)


def normalize_blocks(raw: object, pointer: str = "/content") -> list[NewBlock]:
    """Validate blocks sent by a caller and return canonical copies (ids may still be missing).

    Refuses, with the JSON pointer of the first offending value, anything the page could not store
    faithfully: an unknown type, a prop of the wrong type, children where the type has none, a
    duplicate id. Nothing is dropped silently.
    """
    if not isinstance(raw, list):
        raise invalid(pointer, "must be an array of blocks")
    seen: set[str] = set()
    counter = [0]
    return [_normalize(item, f"{pointer}/{i}", 1, seen, counter) for i, item in enumerate(raw)]


def normalize_block(raw: object, pointer: str = "", depth: int = 1) -> NewBlock:
    """One block (with its children) checked by the same rules, at `depth` in its page.

    With the default pointer an error names the block's own fields (`/type`, `/props/level`), which
    is what a tool that takes one block's fields as its arguments reports.
    """
    return _normalize(raw, pointer, depth, set(), [0])


def block_not_found(block: str, pointer: str) -> MnoteError:
    """A block the call names (`pointer` says where) that is not on the page."""
    return MnoteError(ErrorCode.NOT_FOUND, Reason.BLOCK, {"blockId": block, "pointer": pointer})


def block_id(value: object, pointer: str) -> str:
    """A block id a caller names as a target or an anchor, held to the same pattern as ids in blocks."""
    checked = _block_id(value, pointer, set())
    if checked is None:
        raise invalid(pointer, "must be a block id")
    return checked


def block_ids(raw: object, pointer: str, *, unique: bool) -> list[str]:
    """Block ids a caller names (the blocks to delete, the subset to read): an array of at most
    `MAX_BLOCKS`, as many as one request may carry blocks, each id held to the pattern; `unique`: none
    listed twice. Checked in one pass (a set, not a list, remembers the ids seen): a client may send
    tens of thousands, and comparing each with every earlier one froze the server (issue 26)."""
    if not isinstance(raw, list | tuple):
        raise invalid(pointer, "must be an array of block ids")
    if len(raw) > MAX_BLOCKS:
        raise invalid(pointer, f"more than {MAX_BLOCKS} block ids in one request", maxItems=MAX_BLOCKS)
    seen: set[str] = set()
    for index, value in enumerate(raw):
        checked = block_id(value, f"{pointer}/{index}")
        if unique and checked in seen:
            raise invalid(f"{pointer}/{index}", "listed twice", blockId=checked)
        seen.add(checked)
    return list(raw)


def _normalize(raw: object, pointer: str, depth: int, seen: set[str], counter: list[int]) -> NewBlock:
    counter[0] += 1
    if counter[0] > MAX_BLOCKS:
        raise invalid(pointer, f"more than {MAX_BLOCKS} blocks in one request")
    if not isinstance(raw, dict):
        raise invalid(pointer, "a block must be an object")
    unknown = sorted(set(raw) - {"id", "type", "text", "props", "children"})
    if unknown:
        raise invalid(
            f"{pointer}/{unknown[0]}", "unknown block field; allowed: id, type, text, props, children"
        )
    kind = raw.get("type")
    if not isinstance(kind, str) or kind not in BLOCK_TYPES:
        raise MnoteError(
            ErrorCode.INVALID_ARGUMENT,
            Reason.BLOCK_TYPE,
            {
                "pointer": f"{pointer}/type",
                "reason": "unsupported block type",
                "supportedTypes": list(SUPPORTED_TYPES),
            },
        )
    spec = BLOCK_TYPES[kind]
    given_id = _block_id(raw.get("id") or None, f"{pointer}/id", seen)
    text = raw.get("text")
    if text is None:  # null is "not given", as for every optional field (a strict host sends them all)
        text = ""
    if not isinstance(text, str):
        raise invalid(f"{pointer}/text", "must be a string")
    if len(text) > MAX_TEXT_LENGTH:
        raise invalid(f"{pointer}/text", f"longer than {MAX_TEXT_LENGTH} characters")
    if text and not spec.has_text:
        raise invalid(f"{pointer}/text", f"a {kind} block has no text")
    block: NewBlock = {"id": given_id, "type": kind, "text": text}
    props = _props(kind, spec, raw.get("props"), f"{pointer}/props")
    if props:
        block["props"] = props
    children = raw.get("children")
    if children is not None and children != []:
        if not spec.has_children:
            raise invalid(
                f"{pointer}/children",
                "this block type has no children",
                typesWithChildren=[name for name, t in BLOCK_TYPES.items() if t.has_children],
            )
        if depth >= MAX_DEPTH:
            raise invalid(f"{pointer}/children", f"nested deeper than {MAX_DEPTH} levels")
        if not isinstance(children, list):
            raise invalid(f"{pointer}/children", "must be an array of blocks")
        block["children"] = [
            _normalize(child, f"{pointer}/children/{i}", depth + 1, seen, counter)
            for i, child in enumerate(children)
        ]
    return block


def _block_id(value: object, pointer: str, seen: set[str]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _BLOCK_ID_RE.fullmatch(value):
        raise invalid(pointer, "a block id is 1-128 characters of letters, digits, _ . : -")
    if value in seen:
        raise invalid(pointer, "duplicate block id", blockId=value)
    seen.add(value)
    return value


def _props(kind: str, spec: BlockType, raw: object, pointer: str) -> Props:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise invalid(pointer, "must be an object")
    # A null (or empty) prop is no prop: a strict host sends every key of `props` for every type.
    unknown = sorted(
        name for name, value in raw.items() if name not in spec.props and value not in (None, "")
    )
    if unknown:
        allowed = ", ".join(spec.props) or "none"
        raise invalid(f"{pointer}/{unknown[0]}", f"unknown prop for a {kind} block; allowed: {allowed}")
    props: Props = {}
    for name, prop in spec.props.items():
        value = raw.get(name, prop.default)
        if value is None or value == "":
            continue  # an empty language or icon is no language or icon: one canonical form
        # bool is an int in Python; a level of `true` is still wrong.
        if not isinstance(value, prop.kind) or (prop.kind is int and isinstance(value, bool)):
            raise invalid(f"{pointer}/{name}", f"must be of type {prop.kind.__name__}")
        if isinstance(value, int) and prop.minimum is not None and value < prop.minimum:
            raise invalid(f"{pointer}/{name}", f"must be at least {prop.minimum}")
        if isinstance(value, int) and prop.maximum is not None and value > prop.maximum:
            raise invalid(f"{pointer}/{name}", f"must be at most {prop.maximum}")
        props[name] = value
    return props


class IdSet(Protocol):
    """The ids a new id must not collide with: a set, or a page's rows asked one id at a time."""

    def __contains__(self, block_id: object, /) -> bool: ...

    def add(self, block_id: str, /) -> None: ...


def assign_ids(blocks: list[NewBlock], seed: str, taken: IdSet) -> list[Block]:
    """Give every block without an id a deterministic one, unique among `taken` (which it extends):
    the same list, its blocks now `Block`s.

    The id depends only on the seed (page, base revision, command) and the block's position, so a dry
    run names exactly the ids the real call will create.
    """

    def fill(items: list[NewBlock], path: str) -> None:
        for index, block in enumerate(items):
            here = f"{path}.{index}" if path else str(index)
            given = block["id"]
            if given is None:
                digest = hashlib.sha256(f"{seed}\x00{here}".encode()).hexdigest()
                given, salt = f"b_{digest[:10]}", 0
                while given in taken:
                    salt += 1
                    given = f"b_{digest[:10]}_{salt}"
                block["id"] = given
            taken.add(given)
            if "children" in block:
                fill(block["children"], here)

    fill(blocks, "")
    return cast(list[Block], blocks)  # every id filled in place above


def ids_in(blocks: list[NewBlock]) -> set[str]:
    return {block["id"] for block, _, _ in walk(blocks) if block["id"] is not None}


def walk(
    blocks: list[EitherBlock], parent_id: str | None = None, depth: int = 1
) -> Iterator[tuple[EitherBlock, str | None, int]]:
    """Every block in document order with its parent id and depth."""
    for block in blocks:
        yield block, parent_id, depth
        children = block.get("children")
        if children:
            yield from walk(children, block["id"], depth + 1)


def walk_pointers(blocks: list[EitherBlock], pointer: str) -> Iterator[tuple[EitherBlock, str]]:
    """Every block in document order with its JSON pointer under `pointer`."""
    for index, block in enumerate(blocks):
        here = f"{pointer}/{index}"
        yield block, here
        children = block.get("children")
        if children:
            yield from walk_pointers(children, f"{here}/children")


def height(block: EitherBlock) -> int:
    """Levels of nesting a block occupies: 1 for a leaf."""
    return 1 + max((height(child) for child in block.get("children", [])), default=0)


def count_blocks(blocks: list[EitherBlock]) -> int:
    return sum(1 for _ in walk(blocks))


def body_summary(blocks: list[Block], limit: int = 200) -> str:
    """The opening of the body as one line of plain text, cut at `limit` characters with an ellipsis."""
    return summary_of((block["text"] for block, _, _ in walk(blocks)), limit)


def summary_of(texts: Iterable[str], limit: int = 200) -> str:
    """`body_summary` of the blocks' texts in document order; reads no more of them than it needs."""
    parts: list[str] = []
    size = 0
    for text in texts:  # stop once the summary is full: a long page costs no more
        words = " ".join(text.split())
        if words:
            parts.append(words)
            size += len(words) + 1
            if size > limit:
                break
    text = " ".join(parts)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
