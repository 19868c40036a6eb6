"""What "the runtime answered what the embedded kernel answers" means, for two different stores.

The kit sends each request to the runtime and to the embedded kernel on its mirror store and compares
the two answers, leaving out only what is meant to differ between two stores:

- times and sequence numbers (`createdAt`, `updatedAt`, `seq`);
- commandIds, cursors and artifact ids, which are opaque: each is compared by where it appears within one answer
  (the first distinct id is `<commandId 1>` on both sides, the second `<commandId 2>`), so a replay
  record naming its write is still checked, but not the runtime's spelling of an id;
- the ids of blocks the runtime generated: docs/kernel.md promises they are deterministic, not which
  hash makes them. The kit learns each one the first time both answers name a new block in the same
  place (`BlockIds`), translates the runtime's to the mirror's (in Markdown and diffs too) before
  comparing, and translates them back in the requests that name them.

Ids of blocks the seed or a request named are compared as they are.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import JsonValue

IGNORED = frozenset({"createdAt", "updatedAt", "seq"})
OPAQUE = {
    "commandId": "commandId",
    "replayOf": "commandId",
    "nextCursor": "cursor",
    "artifactId": "artifactId",
    "edgeId": "edgeId",
}
BLOCK_ID = frozenset({"id", "blockId", "parentId", "afterBlockId"})
BLOCK_ID_LIST = frozenset({"blockIds"})
MIN_SUBSTITUTED = 4  # shorter generated ids are not replaced inside text (too likely to hit words)


def plain(value: object) -> JsonValue:
    """`value` as JSON would carry it (tuples as lists, keys as text)."""
    carried: JsonValue = json.loads(json.dumps(value, ensure_ascii=False))
    return carried


class BlockIds:
    """The runtime's generated block ids and the mirror's, learned pairwise."""

    def __init__(self, known: Iterable[str]) -> None:
        self.known = set(known)
        self.to_mirror: dict[str, str] = {}
        self.to_runtime: dict[str, str] = {}

    def note_sent(self, wire: JsonValue) -> None:
        """Ids a request names are the kit's own: compared as they are."""
        for _, value in _block_ids(wire):
            if value not in self.to_runtime and value not in self.to_mirror:
                self.known.add(value)

    def learn(self, runtime: JsonValue, mirror: JsonValue) -> None:
        """Pair the new ids both answers name at the same place (a walk of both, in step)."""
        if isinstance(runtime, dict) and isinstance(mirror, dict):
            for key in runtime.keys() & mirror.keys():
                left, right = runtime[key], mirror[key]
                if key in BLOCK_ID and isinstance(left, str) and isinstance(right, str):
                    self._pair(left, right)
                elif key in BLOCK_ID_LIST and isinstance(left, list) and isinstance(right, list):
                    for one, other in zip(left, right, strict=False):
                        if isinstance(one, str) and isinstance(other, str):
                            self._pair(one, other)
                else:
                    self.learn(left, right)
        elif isinstance(runtime, list) and isinstance(mirror, list):
            for one, other in zip(runtime, mirror, strict=False):
                self.learn(one, other)

    def _pair(self, runtime: str, mirror: str) -> None:
        if runtime in self.known or mirror in self.known:
            return
        if runtime not in self.to_mirror and mirror not in self.to_runtime:
            self.to_mirror[runtime] = mirror
            self.to_runtime[mirror] = runtime

    def runtime_as_mirror(self, value: JsonValue) -> JsonValue:
        """A runtime answer with its generated ids spelt as the mirror's."""
        return _translate(value, self.to_mirror)

    def request_for_mirror(self, wire: JsonValue) -> JsonValue:
        """A request naming runtime ids, as the mirror must be asked."""
        return _translate(value=wire, mapping=self.to_mirror)


def _block_ids(value: JsonValue) -> Iterable[tuple[str, str]]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key in BLOCK_ID and isinstance(item, str):
                yield key, item
            elif key in BLOCK_ID_LIST and isinstance(item, list):
                yield from ((key, one) for one in item if isinstance(one, str))
            else:
                yield from _block_ids(item)
    elif isinstance(value, list):
        for item in value:
            yield from _block_ids(item)


def _translate(value: JsonValue, mapping: dict[str, str]) -> JsonValue:
    if not mapping:
        return value
    if isinstance(value, dict):
        return {key: _translate(item, mapping) for key, item in value.items()}
    if isinstance(value, list):
        return [_translate(item, mapping) for item in value]
    if isinstance(value, str):
        if value in mapping:
            return mapping[value]
        for old, new in mapping.items():
            if len(old) >= MIN_SUBSTITUTED and old in value:
                value = value.replace(old, new)
        return value
    return value


def normal(value: JsonValue) -> JsonValue:
    """`value` with what differs between two stores left out (times) or named by position (opaque ids)."""
    aliases: dict[tuple[str, str], str] = {}
    counts: dict[str, int] = {}

    def alias(kind: str, value: str) -> str:
        found = aliases.get((kind, value))
        if found is None:
            counts[kind] = counts.get(kind, 0) + 1
            found = aliases[(kind, value)] = f"<{kind} {counts[kind]}>"
        return found

    def walk(node: JsonValue) -> JsonValue:
        if isinstance(node, dict):
            out: dict[str, JsonValue] = {}
            for key in sorted(node):
                if key in IGNORED:
                    continue
                item = node[key]
                kind = OPAQUE.get(key)
                if kind is not None and isinstance(item, str):
                    out[key] = alias(kind, item)
                else:
                    out[key] = walk(item)
            return out
        if isinstance(node, list):
            return [walk(item) for item in node]
        return node

    return walk(value)


def first_difference(
    expected: JsonValue, actual: JsonValue, pointer: str = ""
) -> tuple[str, JsonValue, JsonValue] | None:
    """(JSON pointer, expected there, actual there) of the first place two values differ, or None."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(expected.keys() | actual.keys()):
            where = f"{pointer}/{key}"
            if key not in actual:
                return where, expected[key], "(missing)"
            if key not in expected:
                return where, "(missing)", actual[key]
            found = first_difference(expected[key], actual[key], where)
            if found is not None:
                return found
        return None
    if isinstance(expected, list) and isinstance(actual, list):
        for index, (one, other) in enumerate(zip(expected, actual, strict=False)):
            found = first_difference(one, other, f"{pointer}/{index}")
            if found is not None:
                return found
        if len(expected) != len(actual):
            return f"{pointer or '/'} (length)", len(expected), len(actual)
        return None
    if expected != actual or type(expected) is not type(actual):
        return pointer or "/", expected, actual
    return None
