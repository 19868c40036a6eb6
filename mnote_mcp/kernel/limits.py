"""How big a page and a block may grow: blocks and bytes per page, characters per block.

Every kernel owes these limits (the embedded one enforces them in one place every command passes
through, `kernel/store/bounds.py`; a runtime has its own flags for them).

A page's bytes are what its blocks hold: the UTF-8 length of each block's id, type, text and props
(as JSON), summed; the store keeps the total (and the block count) on the page's row, so a write
checks the limit from the change alone. The defaults fit real notes (a long document is a few
thousand blocks and well under a megabyte) while keeping one page small enough to read, render and
diff in well under a second. A block's text is at most `--max-block-chars` characters (100,000 by
default, and never more: every request schema's text field is held to that), whichever command makes
it: a block no tool could write back is never written.

A refusal names the limit (`details.limit`, in the protocol's words), its value and the flag that
sets it (`details.flag`), so an operator knows what to raise and a model what to write less of.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mnote_mcp.kernel.blocks import MAX_TEXT_LENGTH
from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason

DEFAULT_MAX_PAGE_BLOCKS = 20_000
DEFAULT_MAX_PAGE_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_BLOCK_CHARS = MAX_TEXT_LENGTH

# Each limit's name in a refusal, and the flag that sets it.
FLAGS = {
    "maxPageBlocks": "--max-page-blocks",
    "maxPageBytes": "--max-page-bytes",
    "maxBlockChars": "--max-block-chars",
}


@dataclass(frozen=True, slots=True)
class PageLimits:
    max_blocks: int = DEFAULT_MAX_PAGE_BLOCKS
    max_bytes: int = DEFAULT_MAX_PAGE_BYTES
    max_block_chars: int = DEFAULT_MAX_BLOCK_CHARS

    def __post_init__(self) -> None:
        if self.max_blocks < 1 or self.max_bytes < 1 or self.max_block_chars < 1:
            raise ValueError("page limits must be positive")
        if self.max_block_chars > MAX_TEXT_LENGTH:
            raise ValueError(f"max_block_chars may be at most {MAX_TEXT_LENGTH}")

    def check(self, blocks: int, size: int) -> None:
        """Refuse a page that would hold more than the limits allow (nothing has been written yet)."""
        if blocks > self.max_blocks:
            raise page_too_large("maxPageBlocks", self.max_blocks, pageBlocks=blocks)
        if size > self.max_bytes:
            raise page_too_large("maxPageBytes", self.max_bytes, pageBytes=size)

    def check_text(self, chars: int, block_id: str, pointer: str | None = None) -> None:
        """Refuse a block whose text would hold more than `max_block_chars` characters."""
        if chars > self.max_block_chars:
            where = {"pointer": pointer} if pointer else {}
            raise page_too_large(
                "maxBlockChars", self.max_block_chars, blockChars=chars, blockId=block_id, **where
            )


def page_too_large(limit: str, value: int, **actual: int | str) -> MnoteError:
    return MnoteError(
        ErrorCode.INVALID_ARGUMENT,
        Reason.PAGE_TOO_LARGE,
        {"limit": limit, limit: value, "maximum": value, "flag": FLAGS[limit], **actual},
    )


def block_bytes(block_id: str, kind: str, text: str, props: Mapping[str, Any] | None) -> int:
    size = len(block_id) + len(kind) + len(text.encode("utf-8"))
    if props:
        size += len(json.dumps(props, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    return size
