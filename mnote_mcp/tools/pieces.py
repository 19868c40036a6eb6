"""A page read that would not fit one result answers its first piece instead (the result budget).

The kernel already cuts a body into pieces of whole top-level blocks (`maxBlocks`, `cursor`), with
cursors it issues and pins to a revision. Over the budget, the read is asked again with the number of
blocks that fits, measured from the blocks of the first answer, so the piece, its `nextCursor` and
the revision all come from the kernel (any adapter, relays included) and nothing is guessed here.
One top-level block larger than the whole budget comes in pieces within the block
(`tools/blockpieces.py`), from the kernel's piece of that one block.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from mnote_mcp.kernel.blocks import Block, count_blocks
from mnote_mcp.kernel.markdown import render_markdown
from mnote_mcp.kernel.port import Kernel, PageQuery, PageView
from mnote_mcp.tools.blockpieces import Position, cut, decode_cursor, is_piece_cursor, piece_at, read_piece
from mnote_mcp.tools.budget import chars, text_chars
from mnote_mcp.tools.inputs import PageGetArgs, arguments_of
from mnote_mcp.vocabulary.envelope import ToolRequest, ToolResult
from mnote_mcp.vocabulary.messages import render_warning

_CURSOR_ROOM = 200  # a nextCursor and its key


def page_query(request: ToolRequest) -> PageQuery:
    args = arguments_of(request, PageGetArgs)
    block_ids = args.get("blockIds")
    return PageQuery(
        workspace_id=request.workspace_id,
        document_id=request.document_id,
        actor_id=request.actor_id,
        correlation=request.correlation,
        include_body=args.get("includeBody", True),
        include_options=args.get("includeOptions", True),
        include_blocks=args.get("includeBlocks", True),
        format=args.get("format", "blocks"),
        block_ids=tuple(block_ids) if block_ids is not None else None,
        max_blocks=args.get("maxBlocks"),
        cursor=args.get("cursor"),
    )


async def read_page(request: ToolRequest, kernel: Kernel) -> ToolResult:
    """`mnote.page.get`: the kernel's view, or, at a piece cursor, the piece within a block it names
    (whole: the budget cuts it, `fit_piece`)."""
    query = page_query(request)
    if not is_piece_cursor(query.cursor):
        return ToolResult(result=dict(await kernel.get_page(query)), effect="read")
    assert query.cursor is not None
    piece = await read_piece(kernel, query, decode_cursor(query, query.cursor))
    if "blockPiece" in piece:
        piece["warnings"] = [render_warning({"code": "result_block_piece"}, request.locale)]
    return ToolResult(result=piece, effect="read")


async def fit_piece(request: ToolRequest, kernel: Kernel, outcome: ToolResult, limit: int) -> ToolResult:
    """The longest prefix of the answer's top-level blocks that fits `limit`, at least one block; one
    top-level block larger than that comes in pieces within it, and a piece within a block is cut
    to the budget in turn (`tools/blockpieces.py`)."""
    view = outcome.result
    body = "blocks" if "blocks" in view else "markdown" if "markdown" in view else None
    if body is None:
        return outcome
    query = page_query(request)
    if "blockPiece" in view:
        assert query.cursor is not None  # a piece within a block is read only at a piece cursor
        position = decode_cursor(query, query.cursor)
        cut_piece, size = cut(dict(view), position, query, limit=limit, measure=chars)
        return _answered(cut_piece, size, limit, outcome, request)
    roots = await body_roots(kernel, query, view)
    if not roots:
        return outcome
    warning = render_warning({"code": "result_piece"}, request.locale)
    frame = {key: value for key, value in view.items() if key not in (body, "nextCursor")}
    room = limit - chars(frame) - chars(warning) - _CURSOR_ROOM

    def measure(answer: PageView) -> int:
        return chars({**answer, "warnings": [warning]})

    answer, size = await longest_piece(
        kernel,
        query,
        roots,
        room=room,
        limit=limit,
        root_size=lambda root: _root_chars(root, body),
        measure=measure,
    )
    piece: dict[str, Any] = {**answer, "warnings": [warning]}
    if size > limit:  # the piece is one top-level block (`longest_piece`), larger than the budget
        position = Position(query.cursor, answer["revision"], 0, 0)
        block_warning = render_warning({"code": "result_block_piece"}, request.locale)
        within = {**piece_at(dict(answer), position, query), "warnings": [block_warning]}
        piece, size = cut(within, position, query, limit=limit, measure=chars)
    return _answered(piece, size, limit, outcome, request)


def _answered(
    piece: dict[str, Any], size: int, limit: int, outcome: ToolResult, request: ToolRequest
) -> ToolResult:
    """The piece as the call's result; one still over the budget (its frame alone is: a title and
    options longer than the budget leaves) says so."""
    if size > limit:
        piece = {**piece, "warnings": [render_warning({"code": "result_oversized"}, request.locale)]}
    return ToolResult(result=piece, effect=outcome.effect, command_id=outcome.command_id)


async def body_roots(kernel: Kernel, query: PageQuery, view: Mapping[str, Any]) -> list[Block]:
    """The top-level blocks of an answer (read again as blocks when it is Markdown)."""
    if "blocks" in view:
        return list(view["blocks"])
    return list((await kernel.get_page(replace(query, format="blocks", include_options=False)))["blocks"])


async def longest_piece(
    kernel: Kernel,
    query: PageQuery,
    roots: list[Block],
    *,
    room: int,
    limit: int,
    root_size: Callable[[Block], int],
    measure: Callable[[PageView], int],
) -> tuple[PageView, int]:
    """The kernel's answer to `query` cut to the longest run of `roots` (the whole top-level blocks it
    would answer, from its cursor) whose answer `measure`s at most `limit`, and that size: first
    estimated from each root's size against `room`, then asked of the kernel until it fits (each
    time fewer, in proportion to how far over it was). At least one root, whatever its size."""
    count, used = 1, root_size(roots[0])  # sized one by one: only as many as the room may hold
    while count < len(roots) and used <= room:
        used += root_size(roots[count])
        if used > room:
            break
        count += 1
    while True:
        piece = await kernel.get_page(replace(query, max_blocks=count_blocks(roots[:count])))
        size = measure(piece)
        if size <= limit or count == 1:
            return piece, size
        count = max(1, min(count - 1, int(count * limit / size * 0.9)))


def _root_chars(root: Block, body: str) -> int:
    if body == "blocks":
        return chars(root) + 1
    return markdown_chars(root)


def markdown_chars(root: Block) -> int:
    """A top-level block's Markdown (with ids), as a piece renders it, and the blank line after it, in
    characters of JSON (a line break is two)."""
    return text_chars(render_markdown([root], with_ids=True)) + 2
