"""How `limits.page_bytes` lays a page out at exactly --max-page-bytes (docs/kernel.md's measure: each
block's id, type and text), so that one character more takes it one byte past, at any limit."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mnote_mcp.conformance.guards import _chunks, _text_blocks
from mnote_mcp.kernel.blocks import MAX_BLOCKS, MAX_TEXT_LENGTH
from mnote_mcp.kernel.limits import block_bytes


@settings(max_examples=60)
@given(
    st.integers(min_value=11, max_value=400_000)
    | st.sampled_from([8 * 1024 * 1024, 100_010, 100_011, 100_012])
)
def test_the_blocks_add_up_to_exactly_the_limit_and_each_can_grow(total: int) -> None:
    blocks = _text_blocks(total)
    assert blocks is not None
    assert sum(block_bytes(b["id"], b["type"], b["text"], None) for b in blocks) == total
    assert all(len(b["text"]) < MAX_TEXT_LENGTH for b in blocks), "one character more is still a valid text"
    assert len({b["id"] for b in blocks}) == len(blocks)


def test_a_limit_smaller_than_one_block_cannot_be_laid_out() -> None:
    assert _text_blocks(10) is None


def test_a_large_page_is_written_in_bounded_pieces() -> None:
    blocks = [{"id": f"d{i}", "type": "divider"} for i in range(MAX_BLOCKS + 5)]
    assert [len(chunk) for chunk in _chunks(blocks)] == [MAX_BLOCKS, 5]
    texts = [{"id": f"t{i}", "type": "paragraph", "text": "x" * 99_999} for i in range(90)]
    pieces = list(_chunks(texts))
    assert sum(map(len, pieces)) == 90 and all(
        sum(len(b["text"]) for b in p) <= 4 * 1024 * 1024 for p in pieces
    )
