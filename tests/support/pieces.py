"""How a host joins the pieces of a page back into the page, as docs/contract.md says ("Long pages
and long blocks"): the tests hold every piece sequence to joining into exactly the page."""

from __future__ import annotations

import json
from typing import Any

Block = dict[str, Any]
_MORE = "\n<!-- the page goes on; read the next piece: "


def join_blocks(results: list[dict[str, Any]]) -> list[Block]:
    """The page's top-level blocks from the `result`s of `mnote.page.get` (format blocks) read in
    pieces, in order: whole blocks join the top level, or, in a piece within a block (`blockPiece`),
    the children of `parentId`; a piece of one block's text starts the block (`offset` 0) or goes on
    with its text."""
    page: list[Block] = []
    by_id: dict[str, Block] = {}

    def index(blocks: list[Block]) -> None:
        for block in blocks:
            by_id[block["id"]] = block
            index(block.get("children", []))

    def under(parent_id: str | None) -> list[Block]:
        if parent_id is None:
            return page
        children: list[Block] = by_id[parent_id].setdefault("children", [])
        return children

    for result in results:
        where = result.get("blockPiece")
        blocks = [dict(block) for block in result["blocks"]]
        if where is None or "blockId" not in where:  # whole blocks, at the top or under a parent
            under(where.get("parentId") if where else None).extend(blocks)
            index(blocks)
            continue
        (block,) = blocks
        if where["offset"] == 0:
            under(where.get("parentId")).append(block)
            by_id[block["id"]] = block
        else:
            known = by_id[where["blockId"]]
            assert len(known["text"]) == where["offset"], "a piece of a block comes in order"
            known["text"] += block["text"]
    return page


def join_markdown(pieces: list[tuple[str, dict[str, Any] | None]]) -> str:
    """The page's Markdown from each piece's `markdown` and `blockPiece`, in order: a piece that goes
    on within a block (`offset` over 0) follows the one before it directly; any other piece starts a
    new top-level block, a line break after the one before it."""
    joined = ""
    for number, (markdown, where) in enumerate(pieces):
        if number and not (where is not None and where["offset"] > 0):
            joined += "\n"
        joined += markdown
    return joined


def resource_piece(text: str) -> tuple[str, dict[str, Any] | None, str | None]:
    """A `resources/read` piece's Markdown body, its place in a block (the front matter's `piece`) and
    the URI of the next piece, if any."""
    front, body = text.split("\n---\n\n", 1)
    where = None
    for line in front.splitlines():
        if line.startswith("piece: "):
            where = json.loads(line.removeprefix("piece: "))
    head, _, tail = body.rpartition(_MORE)
    if head and tail.endswith(" -->\n") and "\n" not in tail[:-1]:  # the piece's last line names the next
        return head, where, tail.removesuffix(" -->\n")
    return body, where, None
