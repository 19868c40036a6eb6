"""Pieces within one block: a top-level block larger than the result budget comes in pieces of its
text, then of its children, each saying where it is, joined by cursors this layer issues.

The kernel cuts a body into whole top-level blocks (`maxBlocks`, `cursor`), and one block (up to
100,000 characters of text, with its children) can still be larger than a result may be. Such a
block is cut here, from the one-block piece the kernel answers at the block's own cursor
(`maxBlocks` 1), so the kernel port, the runtime protocol and both relays stay as they are:

- as blocks, the block's nodes in document order: a node that fits whole comes with as many of its
  next siblings as fit (a *run*: `blockPiece` `{parentId}`, the page's top level when absent); a node
  that does not comes as pieces of its own text (`blockPiece` `{blockId, parentId, offset, length}`,
  the block without its children), and its children come in the pieces after its text;
- as Markdown, the kernel's Markdown of the block cut in pieces (`blockPiece` `{blockId, offset,
  length}`).

Offsets and lengths count characters (code points: a CJK character is one, an emoji one or more, a
cut never splits one). docs/contract.md says how a host joins the pieces back into the page.

A piece cursor (`PIECE_CURSOR_PREFIX`, at most `MAX_CURSOR_CHARS`) holds the kernel's cursor of the
block's piece (None: the body's first block), the revision, the node and the character offset, bound
to the page, the `blockIds` selection and the format. Every piece is read again from the kernel as
the caller (the kernel checks access each time and refuses its own stale cursor); the revision is
compared here too, so the pieces of a block are all of one revision, never two spliced. A cursor
that is not one this layer issued for the same read, or that points outside the block, is refused
like any cursor the kernel did not issue.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from mnote_mcp.kernel.blocks import Block, count_blocks, walk
from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason, invalid
from mnote_mcp.kernel.port import Kernel, PageQuery
from mnote_mcp.tools.budget import chars

PIECE_CURSOR_PREFIX = "piece."  # a kernel cursor is base64url: it never holds a "."
MAX_CURSOR_CHARS = 1_024  # a piece cursor; the kernel's cursor in it is ~70 characters (view.py)
MAX_KERNEL_CURSOR_CHARS = 512
LEAST_CHARS = 256  # of a block's text or Markdown in one piece, whatever the frame around it
_VERSION = 1
_MAX_INT = 2**63
_TAG = re.compile(r"<!-- ([A-Za-z0-9_][A-Za-z0-9_.:-]*) -->")  # kernel/markdown.py's block id comment
# A page view with its place in a block (`blockPiece`), which the kernel's `PageView` does not know.
Piece = dict[str, Any]
Measure = Callable[[Piece], int]


@dataclass(frozen=True, slots=True)
class Position:
    """Where a piece within a block starts: the kernel's cursor of the block's one-block piece (None:
    the first block of the body), the revision every piece is read at, the node (its index in the
    block's nodes in document order; 0 in Markdown) and the character offset in that node's text
    (in the block's Markdown)."""

    root_cursor: str | None
    revision: int
    node: int
    offset: int


def is_piece_cursor(cursor: str | None) -> bool:
    return cursor is not None and cursor.startswith(PIECE_CURSOR_PREFIX)


def _not_ours() -> MnoteError:
    return invalid("/cursor", "not a cursor returned by mnote.page.get")


def _tag(query: PageQuery) -> str:
    """Binds a piece cursor to the page, the selection it walks and the format of its offsets."""
    material = json.dumps(
        [query.workspace_id, query.document_id, query.block_ids, query.format], ensure_ascii=False
    )
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def encode_cursor(query: PageQuery, position: Position) -> str:
    """The cursor of `position`; refused when the kernel's cursor it would carry is longer than any
    the kernel issues (a caller's own, the kernel having read past what it does not know)."""
    if position.root_cursor is not None and len(position.root_cursor) > MAX_KERNEL_CURSOR_CHARS:
        raise _not_ours()
    raw = json.dumps(
        [_VERSION, position.root_cursor, position.revision, position.node, position.offset, _tag(query)],
        separators=(",", ":"),
    )
    return PIECE_CURSOR_PREFIX + base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _MAX_INT


def decode_cursor(query: PageQuery, cursor: str) -> Position:
    """The position a piece cursor names; refused unless it is one issued for this read."""
    if len(cursor) > MAX_CURSOR_CHARS or not is_piece_cursor(cursor):
        raise _not_ours()
    body = cursor[len(PIECE_CURSOR_PREFIX) :]
    try:
        data = json.loads(base64.urlsafe_b64decode((body + "=" * (-len(body) % 4)).encode()))
        version, root_cursor, revision, node, offset, tag = data
    except (ValueError, TypeError, RecursionError, binascii.Error):
        raise _not_ours() from None
    kernel_cursor = root_cursor is None or (
        isinstance(root_cursor, str)
        and 0 < len(root_cursor) <= MAX_KERNEL_CURSOR_CHARS
        and not is_piece_cursor(root_cursor)
    )
    if version != _VERSION or not kernel_cursor or not all(map(_count, (revision, node, offset))):
        raise _not_ours()
    if tag != _tag(query):
        raise invalid("/cursor", "belongs to another page, another blockIds selection or another format")
    return Position(root_cursor, revision, node, offset)


async def read_piece(kernel: Kernel, query: PageQuery, position: Position) -> Piece:
    """The piece at `position`, as long as it goes (a run to its last sibling, a text to its end):
    the caller's budget cuts it (`cut`). Read as the caller, at the position's revision."""
    piece = dict(await kernel.get_page(replace(query, cursor=position.root_cursor, max_blocks=1)))
    if piece["revision"] != position.revision:
        raise MnoteError(
            ErrorCode.CONFLICT,
            Reason.CURSOR,
            {"currentRevision": piece["revision"], "cursorRevision": position.revision},
        )
    return piece_at(piece, position, query)


def piece_at(piece: Piece, position: Position, query: PageQuery) -> Piece:
    """From the kernel's one-block piece, the piece within that block starting at `position`, whole."""
    body = "blocks" if "blocks" in piece else "markdown" if "markdown" in piece else None
    frame: dict[str, Any] = {key: value for key, value in piece.items() if key not in (body, "nextCursor")}
    after = piece.get("nextCursor")  # the kernel's cursor past the block: where the reader goes next
    if body == "markdown":
        markdown = piece["markdown"]
        if position.node != 0 or not position.offset < len(markdown):
            raise _not_ours()
        found = _TAG.search(markdown)
        where: dict[str, Any] = {"offset": position.offset, "length": len(markdown)}
        if found:
            where = {"blockId": found.group(1), **where}
        return _view(frame, {"markdown": markdown[position.offset :], "blockPiece": where}, after)
    if body is None or not piece["blocks"]:
        return piece
    nodes = list(walk([piece["blocks"][0]]))
    if not position.node < len(nodes):
        raise _not_ours()
    block, parent_id, _ = nodes[position.node]
    if position.offset:  # within the node's text: the rest of it, then what follows the node
        if not position.offset < len(block["text"]):
            raise _not_ours()
        text = block["text"][position.offset :]
        where = _text_piece(block, parent_id, position.offset)
        following = position.node + 1
        next_cursor = (
            after
            if following == len(nodes)
            else encode_cursor(query, replace(position, node=following, offset=0))
        )
        return _view(frame, {"blocks": [_alone(block, text)], "blockPiece": where}, next_cursor)
    siblings = _siblings(nodes, position.node)
    run = _within_max_blocks(siblings, query.max_blocks)
    end = position.node + count_blocks(run)
    next_cursor = after if end == len(nodes) else encode_cursor(query, replace(position, node=end, offset=0))
    return _view(frame, {"blocks": run, "blockPiece": _run_piece(parent_id)}, next_cursor)


def cut(
    piece: Piece, position: Position, query: PageQuery, *, limit: int, measure: Measure
) -> tuple[Piece, int]:
    """`piece` (from `piece_at`, at `position`) cut to the longest start whose `measure` is at most
    `limit`, with the cursor to the rest, and its size: a run to its first siblings, or to a piece of
    its first sibling's text when not even that one fits; a text or Markdown to its first characters.
    At least `LEAST_CHARS` characters of a text, whatever the limit."""
    strings = (
        "markdown" if "markdown" in piece else "text" if "blockId" in piece.get("blockPiece", {}) else None
    )
    whole = _string(piece, strings) if strings else None
    if whole is None or len(whole) <= limit:  # longer than the limit cannot fit: no need to measure
        size = measure(piece)
        if size <= limit:
            return piece, size
    if strings is None:
        return _cut_run(piece, position, query, limit, measure)
    return _cut_string(piece, strings, position, query, limit, measure)


def _string(piece: Piece, key: str) -> str:
    text: str = piece["markdown"] if key == "markdown" else piece["blocks"][0]["text"]
    return text


def _cut_run(
    piece: Piece, position: Position, query: PageQuery, limit: int, measure: Measure
) -> tuple[Piece, int]:
    """The run's first siblings that fit; when not even the first does, a piece of its text."""
    run = piece["blocks"]

    def build(count: int) -> Piece:
        end = position.node + count_blocks(run[:count])
        return {
            **piece,
            "blocks": run[:count],
            "nextCursor": encode_cursor(query, replace(position, node=end)),
        }

    base = measure(build(0))
    count, used = 0, base
    while count < len(run) - 1 and used + chars(run[count]) + 1 <= limit:  # a sibling and its comma
        used += chars(run[count]) + 1
        count += 1
    while count:
        size = measure(build(count))
        if size <= limit:
            return build(count), size
        count -= 1
    first = run[0]
    ends_run = len(run) == 1 and not first.get("children")
    following = (
        piece.get("nextCursor")
        if ends_run
        else encode_cursor(query, replace(position, node=position.node + 1))
    )
    parent_id = piece["blockPiece"].get("parentId")
    frame = {key: value for key, value in piece.items() if key not in ("blocks", "blockPiece", "nextCursor")}
    body = {"blocks": [_alone(first, first["text"])], "blockPiece": _text_piece(first, parent_id, 0)}
    return cut(_view(frame, body, following), position, query, limit=limit, measure=measure)


def _cut_string(
    piece: Piece, key: str, position: Position, query: PageQuery, limit: int, measure: Measure
) -> tuple[Piece, int]:
    """A piece of one block's text (`key` "text") or of one block's Markdown, cut to its first
    characters. Each character costs at least one character of JSON, so the room left over an empty
    piece bounds the count from above; from there it shrinks in proportion to what it is over. At
    least `LEAST_CHARS`: a frame that alone fills the budget (a title of control characters, six
    characters of JSON each) makes an oversized piece, not 100,000 pieces of one character."""
    whole = _string(piece, key)
    if len(whole) <= 1:  # nothing to cut: its frame alone is over the limit
        return piece, measure(piece)

    def build(count: int) -> Piece:
        cursor = encode_cursor(query, replace(position, offset=position.offset + count))
        if key == "text":
            return {**piece, "blocks": [{**piece["blocks"][0], "text": whole[:count]}], "nextCursor": cursor}
        return {**piece, "markdown": whole[:count], "nextCursor": cursor}

    least = min(len(whole) - 1, LEAST_CHARS)
    base = measure(build(0))
    count = max(least, min(len(whole) - 1, limit - base))
    while count > least:
        size = measure(build(count))
        if size <= limit:
            return build(count), size
        count = max(least, min(count - 1, count * max(limit - base, 0) // max(size - base, 1)))
    return build(count), measure(build(count))


def _siblings(nodes: list[tuple[Block, str | None, int]], index: int) -> list[Block]:
    """The node at `index` and the siblings after it, each with its children."""
    _, parent_id, depth = nodes[index]
    run: list[Block] = []
    for block, parent, level in nodes[index:]:
        if level < depth or (level == depth and parent != parent_id):
            break
        if level == depth:
            run.append(block)
    return run


def _within_max_blocks(run: list[Block], max_blocks: int | None) -> list[Block]:
    """The start of `run` that holds at most `max_blocks` blocks (the caller's `maxBlocks`), at least one."""
    if max_blocks is None:
        return run
    kept, used = 0, 0
    while kept < len(run) and (kept == 0 or used + count_blocks([run[kept]]) <= max_blocks):
        used += count_blocks([run[kept]])
        kept += 1
    return run[:kept]


def _alone(block: Block, text: str) -> Block:
    """A block without its children (they come in the pieces after its text), holding `text`."""
    alone: Block = {"id": block["id"], "type": block["type"], "text": text}
    if "props" in block:
        alone["props"] = block["props"]
    return alone


def _text_piece(block: Block, parent_id: str | None, offset: int) -> dict[str, Any]:
    where: dict[str, Any] = {"blockId": block["id"]}
    if parent_id is not None:
        where["parentId"] = parent_id
    return {**where, "offset": offset, "length": len(block["text"])}


def _run_piece(parent_id: str | None) -> dict[str, Any]:
    return {"parentId": parent_id} if parent_id is not None else {}


def _view(frame: dict[str, Any], body: dict[str, Any], next_cursor: str | None) -> Piece:
    view = {**frame, **body}
    if next_cursor:
        view["nextCursor"] = next_cursor
    return view
