"""Order keys: where a block sits among its siblings, as a string that sorts bytewise.

Fractional indexing (`fractional-indexing`, base 62): a key can always be made between two others, so
inserting or moving a block writes that one row, never a renumbering of its siblings. Keys made again
and again in one gap grow by about a character per six inserts; past `MAX_KEY_LENGTH` the siblings are
given fresh, evenly spaced keys (a rare write of one sibling list, recorded like any other change).
"""

from __future__ import annotations

from typing import cast

from fractional_indexing import generate_key_between, generate_n_keys_between

MAX_KEY_LENGTH = 48


def key_between(low: str | None, high: str | None) -> str:
    """A key strictly between `low` and `high` (None: the start or the end)."""
    return cast(str, generate_key_between(low, high))


def keys_between(low: str | None, high: str | None, count: int) -> list[str]:
    """`count` increasing keys strictly between `low` and `high`, as short as the gap allows."""
    return cast(list[str], generate_n_keys_between(low, high, count))


def too_long(keys: list[str]) -> bool:
    return any(len(key) > MAX_KEY_LENGTH for key in keys)
