"""What the kit leaves out when it compares a runtime's answer with the embedded kernel's: times and
sequence numbers; commandIds, cursors and artifact ids by where they appear; the ids of blocks the
runtime generated, learned and translated. What it keeps: everything else, and seeded ids as they are."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mnote_mcp.conformance.compare import BlockIds, first_difference, normal

if TYPE_CHECKING:
    from pydantic import JsonValue

    from mnote_mcp.kernel.port import JSONObject


def test_opaque_ids_are_compared_by_where_they_appear_within_one_answer() -> None:
    write: JSONObject = {"commandId": "cmd-a", "effect": "write", "seq": 7, "createdAt": "t1"}
    replay: JSONObject = {
        "commandId": "cmd-b",
        "effect": "replay",
        "replayOf": "cmd-a",
        "seq": 8,
        "createdAt": "t2",
    }
    runtime: JsonValue = [write, replay]
    mirror: JsonValue = [
        {"commandId": "page_x_1", "effect": "write", "seq": 1, "createdAt": "t9"},
        {"commandId": "page_x_2", "effect": "replay", "replayOf": "page_x_1", "seq": 2, "createdAt": "t9"},
    ]
    assert normal(runtime) == normal(mirror)
    wrong: JsonValue = [write, {**replay, "replayOf": "cmd-b"}]
    assert normal(wrong) != normal(mirror), "a replay naming itself, not the write"
    assert normal({"nextCursor": "abc", "data": {"artifactId": "n1"}}) == normal(
        {"nextCursor": "zzz", "data": {"artifactId": "note_9"}}
    )


def test_generated_block_ids_are_learned_and_translated_and_seeded_ones_kept() -> None:
    ids = BlockIds({"p_1", "p_2"})
    runtime: JsonValue = {"data": {"blockIds": ["rt-1"]}, "diff": [{"op": "insert", "blockId": "rt-1"}]}
    mirror: JsonValue = {"data": {"blockIds": ["b_9f"]}, "diff": [{"op": "insert", "blockId": "b_9f"}]}
    ids.learn(runtime, mirror)
    assert ids.runtime_as_mirror(runtime) == mirror
    markdown: JsonValue = {"markdown": "new <!-- rt-1 -->\nFirst <!-- p_1 -->"}
    assert ids.runtime_as_mirror(markdown) == {"markdown": "new <!-- b_9f -->\nFirst <!-- p_1 -->"}
    assert ids.request_for_mirror({"payload": {"blockId": "rt-1"}}) == {"payload": {"blockId": "b_9f"}}
    seeded = BlockIds({"p_1", "p_2"})
    seeded.learn({"conflicts": [{"blockId": "p_1"}]}, {"conflicts": [{"blockId": "p_2"}]})
    assert seeded.to_mirror == {}, "a runtime naming the wrong seeded block is not excused"
    sent = BlockIds(set())
    sent.note_sent({"content": [{"id": "mine"}]})
    sent.learn({"blocks": [{"id": "mine"}]}, {"blocks": [{"id": "other"}]})
    assert sent.to_mirror == {}, "an id the kit sent is the kit's own"


def test_the_first_difference_names_where_and_what() -> None:
    assert first_difference({"a": [1, 2]}, {"a": [1, 2]}) is None
    assert first_difference({"a": [1, 2]}, {"a": [1, 3]}) == ("/a/1", 2, 3)
    assert first_difference({"a": 1}, {}) == ("/a", 1, "(missing)")
    assert first_difference([1], [1, 2]) == ("/ (length)", 1, 2)
    assert first_difference({"x": 1}, {"x": True}) == ("/x", 1, True), "a boolean is not a number"
