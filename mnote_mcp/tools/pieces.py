"""A page read that would not fit one result answers its first piece instead (the result budget).

The kernel already cuts a body into pieces of whole top-level blocks (`maxBlocks`, `cursor`), with
cursors it issues and pins to a revision. Over the budget, the read is asked again with the number of
blocks that fits, measured from the blocks of the first answer, so the piece, its `nextCursor` and
the revision all come from the kernel (any adapter, relays included) and nothing is guessed here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from mnote_mcp.kernel.blocks import Block, count_blocks
from mnote_mcp.kernel.markdown import render_markdown
from mnote_mcp.kernel.port import Kernel, PageQuery, PageView
from mnote_mcp.tools.budget import chars
from mnote_mcp.vocabulary.envelope import ToolRequest, ToolResult
from mnote_mcp.vocabulary.messages import render_warning

_CURSOR_ROOM = 200  # a nextCursor and its key
_ATTEMPTS = 3


def page_query(request: ToolRequest) -> PageQuery:
    args = request.args
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


async def fit_piece(request: ToolRequest, kernel: Kernel, outcome: ToolResult, limit: int) -> ToolResult:
    """The longest prefix of the answer's top-level blocks that fits `limit`, at least one block.

    One top-level block larger than the whole budget still comes whole (a piece never splits a block
    from its children): that is the one result the budget cannot shrink, and it says so.
    """
    view = outcome.result
    body = "blocks" if "blocks" in view else "markdown" if "markdown" in view else None
    if body is None:
        return outcome
    query = page_query(request)
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
    if size > limit:
        piece["warnings"] = [render_warning({"code": "result_oversized"}, request.locale)]
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
    estimated from each root's size against `room`, then asked of the kernel, a few times at most.
    At least one root, whatever its size."""
    sizes = [root_size(root) for root in roots]
    count, used = 0, 0
    while count < len(roots) and (count == 0 or used + sizes[count] <= room):
        used += sizes[count]
        count += 1
    piece: PageView | None = None
    size = 0
    for _ in range(_ATTEMPTS):
        piece = await kernel.get_page(replace(query, max_blocks=count_blocks(roots[:count])))
        size = measure(piece)
        if size <= limit or count == 1:
            break
        count = max(1, min(count - 1, int(count * limit / size * 0.9)))
    assert piece is not None  # _ATTEMPTS > 0
    return piece, size


def _root_chars(root: Block, body: str) -> int:
    if body == "blocks":
        return chars(root) + 1
    return markdown_chars(root)


def markdown_chars(root: Block) -> int:
    """A top-level block's Markdown (with ids), as a piece renders it, and the blank line after it."""
    return len(render_markdown([root], with_ids=True)) + 1
