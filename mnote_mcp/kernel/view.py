"""What `get_page` answers: the page as the query asks to see it, the same for every adapter.

A body can be long, so a reader may take a subset (`blockIds`), a format that costs fewer tokens
(Markdown with block ids) and pieces of at most `maxBlocks` blocks. A piece holds whole top-level
blocks (each with its children), so a block is never split across pieces, never lost, never repeated.
The cursor is opaque to the caller and pinned to the page revision it was issued at: the offsets of
a changed body mean nothing, so a stale cursor is a conflict and the reader starts again.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from mnote_mcp.kernel.blocks import MAX_BLOCKS, Block, block_not_found, count_blocks, walk
from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason, invalid
from mnote_mcp.kernel.markdown import render_markdown
from mnote_mcp.kernel.port import PageQuery, PageView

FORMATS = ("blocks", "markdown")


def check_query(query: PageQuery) -> None:
    """Refuse a query that could never be answered, before the page is read (no content involved).

    Nothing here is the size of the request: each of the `blockIds` is checked once the caller may
    read the page (`blocks.block_ids`), so a refused caller costs no more for naming many."""
    if query.format not in FORMATS:
        raise invalid("/format", "must be 'blocks' or 'markdown'")
    if query.block_ids is not None:
        if not query.block_ids:
            raise invalid("/blockIds", "name at least one block, or leave blockIds out")
        if len(query.block_ids) > MAX_BLOCKS:
            raise invalid(
                "/blockIds", f"more than {MAX_BLOCKS} block ids in one request", maxItems=MAX_BLOCKS
            )
    if query.max_blocks is not None and not 1 <= query.max_blocks <= MAX_BLOCKS:
        raise invalid("/maxBlocks", f"must be between 1 and {MAX_BLOCKS}")


def page_view(
    query: PageQuery,
    *,
    title: str,
    options: Mapping[str, bool],
    revision: int,
    roots: list[Block],
    summary: str | None,
) -> PageView:
    """The view of a page: `roots` are the top-level blocks the query selects (the whole body, or the
    `blockIds` subset, see `select`), `summary` its `bodySummary` (when `includeBody`)."""
    view: PageView = {
        "documentId": query.document_id,
        "workspaceId": query.workspace_id,
        "title": title,
        "revision": revision,
    }
    if query.include_body:
        view["bodySummary"] = summary if summary is not None else ""
    if query.include_options:
        view["pageOptions"] = dict(options)
    if not query.include_blocks:
        return view
    start = _decode_cursor(query, revision, len(roots)) if query.cursor is not None else 0
    end = _piece_end(roots, start, query.max_blocks)
    piece = roots[start:end]
    if query.format == "markdown":
        view["markdown"] = render_markdown(
            piece, with_ids=True, numbered_before=_numbered_before(roots, start)
        )
    else:
        view["blocks"] = piece
    if end < len(roots):
        view["nextCursor"] = _encode_cursor(query, revision, end)
    return view


def select(blocks: list[Block], wanted: tuple[str, ...] | None) -> list[Block]:
    """The requested blocks in document order, each once: one inside another comes with its ancestor."""
    if wanted is None:
        return blocks
    parents = {block["id"]: (block, parent) for block, parent, _ in walk(blocks)}
    for index, value in enumerate(wanted):
        if value not in parents:
            raise block_not_found(value, f"/blockIds/{index}")
    chosen = set(wanted)

    def covered(block_id: str) -> bool:
        parent = parents[block_id][1]
        while parent is not None:
            if parent in chosen:
                return True
            parent = parents[parent][1]
        return False

    return [block for block, _, _ in walk(blocks) if block["id"] in chosen and not covered(block["id"])]


def _numbered_before(roots: list[Block], start: int) -> int:
    """The numbered-list items just before `start`: a piece's list goes on counting from there."""
    count = 0
    while count < start and roots[start - count - 1]["type"] == "numbered_list":
        count += 1
    return count


def _piece_end(roots: list[Block], start: int, max_blocks: int | None) -> int:
    if max_blocks is None:
        return len(roots)
    end, used = start, 0
    while end < len(roots):
        size = count_blocks([roots[end]])
        if end > start and used + size > max_blocks:
            break
        used += size
        end += 1
    return end


def _query_tag(query: PageQuery) -> str:
    """Binds a cursor to the page and the selection it walks (not to the size of the pieces)."""
    material = json.dumps([query.workspace_id, query.document_id, query.block_ids], ensure_ascii=False)
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def _encode_cursor(query: PageQuery, revision: int, offset: int) -> str:
    raw = json.dumps({"r": revision, "o": offset, "q": _query_tag(query)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _issued_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63


def _decode_cursor(query: PageQuery, revision: int, total: int) -> int:
    assert query.cursor is not None
    try:
        padded = query.cursor + "=" * (-len(query.cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        cursor_revision, offset, tag = data["r"], data["o"], data["q"]
    except (ValueError, TypeError, KeyError, RecursionError, binascii.Error):
        raise invalid("/cursor", "not a cursor returned by mnote.page.get") from None
    # A crafted cursor is only ever refused: numbers we issued (exact ints in range), a string tag.
    if not (_issued_int(cursor_revision) and _issued_int(offset) and isinstance(tag, str)):
        raise invalid("/cursor", "not a cursor returned by mnote.page.get")
    if tag != _query_tag(query):
        raise invalid("/cursor", "belongs to another page or another blockIds selection")
    if cursor_revision != revision:
        raise MnoteError(
            ErrorCode.CONFLICT,
            Reason.CURSOR,
            {"currentRevision": revision, "cursorRevision": cursor_revision},
        )
    if not 0 < offset < total:
        raise invalid("/cursor", "not a cursor returned by mnote.page.get")
    return int(offset)
