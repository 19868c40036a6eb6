"""What a planned write would change, in the words a person is asked to confirm it with.

A write that needs the person's consent (`--confirm`, `mnote_mcp.calls.confirmation`) is first run as a dry
run; its plan (the `result` of the dry run: `diff`, `textDiff`, `revertedRevisions`) becomes an
`Impact`: counts of what it deletes, inserts, updates and moves, a title change, and the first lines
of text it removes. The question shown to the person is rendered from that, in the session's locale;
the answer is bound to the impact's digest, so an accepted write is the one the person was shown.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from mnote_mcp.vocabulary.messages import Locale

MAX_LINES = 3  # removed lines shown in a question
LINE_CHARS = 80  # each cut to this many characters
TITLE_CHARS = 120


@dataclass(frozen=True, slots=True)
class Impact:
    """What one planned write changes (from its dry run), enough to ask about it."""

    deleted: int = 0
    inserted: int = 0
    updated: int = 0
    moved: int = 0
    title: tuple[str, str] | None = None  # (from, to) when the title changes
    reverted: tuple[int, ...] = ()  # the revisions a revert undoes
    deleted_ids: tuple[str, ...] = ()
    removed_lines: tuple[str, ...] = ()  # the first lines of text the write removes

    def digest(self) -> str:
        """What an answer is bound to: the plan's operations the person is shown (not the ids the plan
        invents for new blocks, which differ between two dry runs of one call; not the removed text,
        read only once the person is asked: the deleted blocks' ids stand for it)."""
        material = [
            self.deleted,
            self.inserted,
            self.updated,
            self.moved,
            self.title,
            self.reverted,
            sorted(self.deleted_ids),
        ]
        return hashlib.sha256(orjson.dumps(material)).hexdigest()[:32]


def impact_of(plan: Mapping[str, Any]) -> Impact:
    """The impact of a dry run's `result` (any write tool's: the shape `tools/results.write_result`
    gives)."""
    counts = {"delete": 0, "insert": 0, "update": 0, "move": 0}
    deleted_ids: list[str] = []
    title: tuple[str, str] | None = None
    for op in plan.get("diff") or []:
        kind = op.get("op")
        if kind == "append":
            counts["insert"] += int(op.get("blocks") or 0)
        elif kind in counts and "blockId" in op:
            counts[kind] += 1
            if kind == "delete":
                deleted_ids.append(str(op["blockId"]))
        elif kind == "set" and op.get("field") == "title" and "to" in op:
            title = (_cut(str(op.get("from") or ""), TITLE_CHARS), _cut(str(op["to"]), TITLE_CHARS))
    return Impact(
        deleted=counts["delete"],
        inserted=counts["insert"],
        updated=counts["update"],
        moved=counts["move"],
        title=title,
        reverted=tuple(int(r) for r in plan.get("revertedRevisions") or ()),
        deleted_ids=tuple(deleted_ids),
        removed_lines=removed_lines(str(plan.get("textDiff") or "")),
    )


def removed_lines(text_diff: str, limit: int = MAX_LINES) -> tuple[str, ...]:
    """The first `limit` non-blank lines a unified diff removes, each cut to `LINE_CHARS`."""
    lines: list[str] = []
    for line in text_diff.splitlines():
        if line.startswith("-") and not line.startswith("---"):
            text = line[1:].strip()
            if text:
                lines.append(_cut(text, LINE_CHARS))
                if len(lines) == limit:
                    break
    return tuple(lines)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


_WORDS: dict[str, dict[Locale, str]] = {
    "head": {"zh-CN": "确认写入页面《{page}》（{tool}）？", "en": "Confirm this write to “{page}” ({tool})?"},
    "deleted": {"zh-CN": "删除 {n} 个块", "en": "deletes {n} block(s)"},
    "inserted": {"zh-CN": "插入 {n} 个块", "en": "inserts {n}"},
    "updated": {"zh-CN": "修改 {n} 个块", "en": "updates {n}"},
    "moved": {"zh-CN": "移动 {n} 个块", "en": "moves {n}"},
    "title": {"zh-CN": "标题由《{old}》改为《{new}》", "en": "renames it from “{old}” to “{new}”"},
    "renamed": {"zh-CN": "修改标题", "en": "renames it"},
    "reverted": {
        "zh-CN": "撤销第 {revisions} 版的写入",
        "en": "undoes the writes of revision(s) {revisions}",
    },
    "nothing": {"zh-CN": "修改页面", "en": "changes the page"},
    "lines": {"zh-CN": "将删除的内容（开头几行）：", "en": "Text it removes (first lines):"},
    "others": {"zh-CN": "其他人也在编辑这个页面。", "en": "Other people edit this page too."},
    "foot": {
        "zh-CN": "不确认则不会写入任何内容；历史中可以撤销（mnote.page.revert）。",
        "en": "Nothing is written unless you accept; it can be undone from the page history (mnote.page.revert).",
    },
    "sep": {"zh-CN": "，", "en": ", "},
    "end": {"zh-CN": "。", "en": "."},
}


def change_text(impact: Impact, locale: Locale, page_text: bool = True) -> str:
    """What a planned write changes, in one sentence: "Deletes 3 block(s), inserts 1." Without
    `page_text` (a connection not granted `page.read`: `vocabulary.disclosure`) a rename names no
    title."""
    words = {key: texts[locale] for key, texts in _WORDS.items()}
    parts = [
        words[key].format(n=count)
        for key, count in (
            ("deleted", impact.deleted),
            ("inserted", impact.inserted),
            ("updated", impact.updated),
            ("moved", impact.moved),
        )
        if count
    ]
    if impact.title is not None and page_text:
        parts.append(words["title"].format(old=impact.title[0], new=impact.title[1]))
    elif impact.title is not None:
        parts.append(words["renamed"])
    if impact.reverted:
        parts.append(words["reverted"].format(revisions=", ".join(map(str, impact.reverted))))
    change = words["sep"].join(parts) or words["nothing"]
    if locale == "en":
        change = change[0].upper() + change[1:]
    return change + words["end"]


def page_name(title: str) -> str:
    """A page's title as a question names it (cut to `TITLE_CHARS`)."""
    return _cut(title, TITLE_CHARS)


def question_text(
    impact: Impact, *, tool: str, page: str, locale: Locale, shared: bool = False, page_text: bool = True
) -> str:
    """The question a person is asked before a write: what it changes on which page, the first lines
    it removes, and that nothing happens without their yes. Counts and titles only come from the
    plan of the caller's own call, on a page the caller may write. Without `page_text` (a connection
    not granted `page.read`: `vocabulary.disclosure`) it quotes no text of the page: no titles, no
    removed lines, only counts."""
    words = {key: texts[locale] for key, texts in _WORDS.items()}
    lines = [words["head"].format(page=page_name(page), tool=tool), change_text(impact, locale, page_text)]
    if shared:
        lines.append(words["others"])
    if impact.removed_lines and page_text:
        lines.append(words["lines"])
        lines.extend(f"  - {line}" for line in impact.removed_lines)
    lines.append(words["foot"])
    return "\n".join(lines)
