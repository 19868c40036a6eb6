"""A plan's impact and the question it becomes (`vocabulary/consent.py`)."""

from __future__ import annotations

from typing import Any

from mnote_mcp.vocabulary.consent import LINE_CHARS, Impact, impact_of, question_text, removed_lines

DIFF: list[dict[str, Any]] = [
    {"op": "delete", "blockId": "a"},
    {"op": "delete", "blockId": "b"},
    {"op": "update", "blockId": "c", "fields": ["text"]},
    {"op": "move", "blockId": "d", "after": None},
    {"op": "insert", "blockId": "b_generated_1", "after": None},
]
SAVE_PLAN: dict[str, Any] = {
    "dryRun": True,
    "diff": DIFF,
    "textDiff": "--- a/page\n+++ b/page\n@@ -1,4 +1 @@\n-# 第一章\n-\n-"
    + "x" * 200
    + "\n-three\n-four\n+new\n",
}


def test_a_plan_is_counted_with_its_first_removed_lines() -> None:
    impact = impact_of(SAVE_PLAN)
    assert (impact.deleted, impact.inserted, impact.updated, impact.moved) == (2, 1, 1, 1)
    assert impact.deleted_ids == ("a", "b")
    assert impact.removed_lines == ("# 第一章", "x" * (LINE_CHARS - 1) + "…", "three"), "blank lines skipped"
    assert impact_of({"diff": [{"op": "append", "blocks": 4}]}).inserted == 4
    renamed = impact_of({"diff": [{"op": "set", "field": "title", "from": "Old", "to": "New"}]})
    assert renamed.title == ("Old", "New")
    assert impact_of({"diff": [], "revertedRevisions": [3, 4]}).reverted == (3, 4)


def test_the_digest_is_what_the_person_sees_not_the_ids_a_plan_invents() -> None:
    other_ids = {
        **SAVE_PLAN,
        "diff": [*DIFF[:-1], {"op": "insert", "blockId": "b_other", "after": None}],
    }
    assert impact_of(SAVE_PLAN).digest() == impact_of(other_ids).digest()
    one_more = {**SAVE_PLAN, "diff": [*DIFF, {"op": "delete", "blockId": "e"}]}
    assert impact_of(SAVE_PLAN).digest() != impact_of(one_more).digest()
    assert Impact().digest() != Impact(deleted=1).digest()


def test_removed_lines_ignores_the_diff_header() -> None:
    assert removed_lines("--- a/page\n+++ b/page\n@@ -1 +1 @@\n-old\n+new\n") == ("old",)


def test_the_question_in_both_locales() -> None:
    impact = Impact(deleted=2, inserted=1, title=("旧", "新"), removed_lines=("第一行",))
    assert question_text(impact, tool="mnote.page.save", page="项目计划", locale="zh-CN", shared=True) == (
        "确认写入页面《项目计划》（mnote.page.save）？\n"
        "删除 2 个块，插入 1 个块，标题由《旧》改为《新》。\n"
        "其他人也在编辑这个页面。\n"
        "将删除的内容（开头几行）：\n"
        "  - 第一行\n"
        "不确认则不会写入任何内容；历史中可以撤销（mnote.page.revert）。"
    )
    assert question_text(impact, tool="mnote.page.save", page="Plan", locale="en") == (
        "Confirm this write to “Plan” (mnote.page.save)?\n"
        "Deletes 2 block(s), inserts 1, renames it from “旧” to “新”.\n"
        "Text it removes (first lines):\n"
        "  - 第一行\n"
        "Nothing is written unless you accept; it can be undone from the page history (mnote.page.revert)."
    )
