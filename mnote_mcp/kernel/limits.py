"""How big a page may grow: a number of blocks and a number of bytes, checked by every write.

Every kernel owes this limit (the embedded one enforces it; a runtime has its own flags for it).

A page's bytes are what its blocks hold: the UTF-8 length of each block's id, type, text and props
(as JSON), summed; the store keeps the total (and the block count) on the page's row, so a write
checks the limit from the change alone. The defaults fit real notes (a long document is a few
thousand blocks and well under a megabyte) while keeping one page small enough to read, render and
diff in well under a second.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason

DEFAULT_MAX_PAGE_BLOCKS = 20_000
DEFAULT_MAX_PAGE_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class PageLimits:
    max_blocks: int = DEFAULT_MAX_PAGE_BLOCKS
    max_bytes: int = DEFAULT_MAX_PAGE_BYTES

    def __post_init__(self) -> None:
        if self.max_blocks < 1 or self.max_bytes < 1:
            raise ValueError("page limits must be positive")

    def check(self, blocks: int, size: int) -> None:
        """Refuse a page that would hold more than the limits allow (nothing has been written yet)."""
        if blocks > self.max_blocks:
            raise page_too_large("maxPageBlocks", self.max_blocks, pageBlocks=blocks)
        if size > self.max_bytes:
            raise page_too_large("maxPageBytes", self.max_bytes, pageBytes=size)


def page_too_large(limit: str, value: int, **actual: int) -> MnoteError:
    return MnoteError(
        ErrorCode.INVALID_ARGUMENT,
        Reason.PAGE_TOO_LARGE,
        {"limit": limit, limit: value, "maximum": value, **actual},
    )


def block_bytes(block_id: str, kind: str, text: str, props: Mapping[str, Any] | None) -> int:
    size = len(block_id) + len(kind) + len(text.encode("utf-8"))
    if props:
        size += len(json.dumps(props, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    return size
