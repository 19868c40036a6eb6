"""Replacing exact text in a page or in one block (`page.text.replace`): the small fix in one call.

An agent that has found a misspelt word (a search snippet, a piece of the page) names the text and what
it becomes, as server-filesystem's `edit_file` and Notion's `replace_content_range` do, and never reads
or rewrites the block around it. Several edits go in one call, applied in order, each to the text the
earlier ones left; all or nothing. Text is matched within one block's text (never across blocks),
exactly: an edit whose `oldText` is not there (`text_missing`) or is there more than once without
`replaceAll` (`text_ambiguous`) refuses the whole call, naming where it does occur, or where similar
text does (`details.candidates`: a few blocks, each with a short context), so the retry can be precise.

Those contexts are page text in an error's details, which otherwise hold only ids and pointers: they
are planned after the permission checkpoints, so only a caller who may write (and read) the page sees
them, and they are bounded (`CANDIDATES` of them, `CONTEXT` characters either side of the match).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import NotRequired, TypedDict

from mnote_mcp.kernel.blocks import MAX_TEXT_LENGTH, block_id, block_not_found
from mnote_mcp.kernel.diff import UpdateOp
from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason, Words, invalid
from mnote_mcp.kernel.scopes import Scope
from mnote_mcp.kernel.store.bounds import Growth
from mnote_mcp.kernel.store.commands.spec import CommandSpec
from mnote_mcp.kernel.store.plan import Plan, Tx, body_plan
from mnote_mcp.kernel.store.rows import BlockChange, BlockRow

MAX_EDITS = 50  # edits in one call
CANDIDATES = 5  # places a refusal names
CONTEXT = 40  # characters shown either side of a match (a long match keeps its ends)
SIMILAR_WORDS = 20  # words of a missing oldText looked for in any case and spacing


class TextEdit(TypedDict):
    oldText: str
    newText: str
    replaceAll: bool


class ReplacePayload(TypedDict):
    edits: list[TextEdit]
    blockId: NotRequired[str]


def _text(value: object, pointer: str, *, empty: bool) -> str:
    if not isinstance(value, str):
        raise invalid(pointer, "must be a string")
    if not empty and not value:
        raise invalid(pointer, "must not be empty")
    if len(value) > MAX_TEXT_LENGTH:
        raise invalid(pointer, f"longer than {MAX_TEXT_LENGTH} characters")
    return value


def _validate(payload: Mapping[str, object]) -> ReplacePayload:
    raw = payload.get("edits")
    if not isinstance(raw, list) or not raw:
        raise invalid("/edits", "give at least one edit {oldText, newText}")
    if len(raw) > MAX_EDITS:
        raise invalid("/edits", f"more than {MAX_EDITS} edits in one call", maxItems=MAX_EDITS)
    edits: list[TextEdit] = []
    for index, item in enumerate(raw):
        at = f"/edits/{index}"
        if not isinstance(item, Mapping):
            raise invalid(at, "must be an object {oldText, newText, replaceAll?}")
        # Closed, as a block's fields and page options are: a misspelt `replace_all` is refused, not
        # ignored into a different edit than the caller meant (issue 30).
        unknown = sorted(set(item) - TextEdit.__annotations__.keys())
        if unknown:
            raise invalid(f"{at}/{unknown[0]}", "unknown edit field; allowed: oldText, newText, replaceAll")
        every = item.get("replaceAll")
        if every is not None and not isinstance(every, bool):
            raise invalid(f"{at}/replaceAll", "must be a boolean")
        edits.append(
            {
                "oldText": _text(item.get("oldText"), f"{at}/oldText", empty=False),
                "newText": _text(item.get("newText"), f"{at}/newText", empty=True),
                "replaceAll": bool(every),
            }
        )
    out: ReplacePayload = {"edits": edits}
    if payload.get("blockId") is not None:
        out["blockId"] = block_id(payload.get("blockId"), "/blockId")
    return out


def _rows(tx: Tx, p: ReplacePayload) -> list[BlockRow]:
    """The rows the edits look in, in document order: the one block named, or the whole page."""
    if "blockId" in p:
        row = tx.blocks.get(p["blockId"])
        if row is None:
            raise block_not_found(p["blockId"], "/blockId")
        return [row]
    return tx.blocks.in_page_order()


def _apply(
    rows: list[BlockRow], edits: list[TextEdit], growth: Growth
) -> tuple[dict[str, str], MnoteError | None]:
    """Each block's text after the edits, in order, or after those before the first one refused and
    that refusal. Planning and `depends` share it. What each edit would make is asked of `growth`
    before it is made: its blocks' new lengths (`count x (len(new) - len(old))` more each) and the
    page's new size, so a doubling `replaceAll` is refused at the limit, never built past it."""
    texts = {row.id: row.text for row in rows}
    total = sum(len(text) for text in texts.values())
    for index, edit in enumerate(edits):
        old, new = edit["oldText"], edit["newText"]
        growth.work(total)  # every text scanned for `old`
        found = {bid: text.count(old) for bid, text in texts.items() if old in text}
        matches = sum(found.values())
        if matches == 0 or (matches > 1 and not edit["replaceAll"]):
            return texts, _refusal(texts, index, old, matches)
        longer = len(new) - len(old)
        made = 0
        for bid, count in found.items():
            made += len(texts[bid]) + count * longer
            growth.text(len(texts[bid]) + count * longer, bid, f"/edits/{index}")
        growth.bytes(matches * (len(new.encode("utf-8")) - len(old.encode("utf-8"))))
        growth.work(made)
        for bid in found:
            texts[bid] = texts[bid].replace(old, new)
        total += matches * longer
    return texts, None


def _refusal(texts: dict[str, str], index: int, old: str, matches: int) -> MnoteError:
    """The edit at `index` matched `matches` times (0, or several without replaceAll): where it does
    occur, or where similar text does (the same words in any case and spacing, else its longest word)."""
    if matches:
        reason, places = Reason.TEXT_AMBIGUOUS, _places(texts, re.compile(re.escape(old)))
    else:
        reason, places = Reason.TEXT_MISSING, []
        for pattern in _similar(old):
            places = _places(texts, pattern)
            if places:
                break
    return MnoteError(
        ErrorCode.INVALID_ARGUMENT,
        reason,
        {"pointer": f"/edits/{index}/oldText", "matches": matches, "candidates": places},
    )


def _similar(old: str) -> list[re.Pattern[str]]:
    """The same words in any case and spacing (for up to `SIMILAR_WORDS` words: such a pattern can
    backtrack over each word at each place it starts), then the longest word alone (a literal)."""
    words = old.split()
    if not words:
        return []
    longest = re.compile(re.escape(max(words, key=len)), re.IGNORECASE)
    if len(words) > SIMILAR_WORDS:
        return [longest]
    spaced = re.compile(r"\s+".join(re.escape(word) for word in words), re.IGNORECASE)
    return [spaced] if len(words) == 1 else [spaced, longest]


def _places(texts: dict[str, str], pattern: re.Pattern[str]) -> list[dict[str, str]]:
    """The first `CANDIDATES` matches of `pattern`, in document order: `{blockId, text}` around each."""
    places: list[dict[str, str]] = []
    for bid, text in texts.items():
        for match in pattern.finditer(text):
            places.append({"blockId": bid, "text": _around(text, match.start(), match.end())})
            if len(places) == CANDIDATES:
                return places
    return places


def _around(text: str, start: int, end: int) -> str:
    """The match with up to `CONTEXT` characters either side; a long match keeps its ends."""
    if end - start > 2 * CONTEXT:
        middle = f"{text[start : start + CONTEXT]}…{text[end - CONTEXT : end]}"
    else:
        middle = text[start:end]
    before = text[max(0, start - CONTEXT) : start]
    after = text[end : end + CONTEXT]
    opening = "…" if start > CONTEXT else ""
    ending = "…" if end + CONTEXT < len(text) else ""
    return f"{opening}{before}{middle}{after}{ending}"


def _plan(tx: Tx, p: ReplacePayload) -> Plan:
    rows = _rows(tx, p)
    texts, refused = _apply(rows, p["edits"], tx.growth())
    if refused is not None:
        raise refused
    changes = [
        BlockChange(row.id, row, replace(row, text=texts[row.id], revision=tx.next_revision))
        for row in rows
        if texts[row.id] != row.text
    ]
    diff: list[UpdateOp] = [{"op": "update", "blockId": c.id, "fields": ["text"]} for c in changes]
    return body_plan(tx, changes, diff, {"blockIds": [c.id for c in changes]})


def _depends(tx: Tx, p: ReplacePayload) -> list[str]:
    """The blocks whose text the edits change (on the page as it is now), or the one block named: a
    stale baseRevision is fine if none of them changed since. A match elsewhere that appeared since is
    still refused as ambiguous, since the edits are matched on the current page."""
    if "blockId" in p:
        return [p["blockId"]]
    rows = _rows(tx, p)
    texts, _ = _apply(rows, p["edits"], tx.growth())
    return [row.id for row in rows if texts[row.id] != row.text]


REPLACE = CommandSpec(
    name="page.text.replace",
    scope=Scope.PAGE_WRITE,
    payload="{edits: [{oldText, newText, replaceAll?}], blockId?}",
    does=(
        f"replace exact text within blocks' text, edits in order (at most {MAX_EDITS}), all or nothing;"
        " text found nowhere or, without `replaceAll`, more than once is refused with where it (or similar"
        f" text) occurs (`details.candidates`, at most {CANDIDATES})"
    ),
    validate=_validate,
    plan=_plan,
    depends=_depends,
    relies_on="the blocks whose text it changes (with `blockId`, that block)",
    named=lambda p: [p["blockId"]] if "blockId" in p else [],
    refusals=(
        Words(
            ErrorCode.INVALID_ARGUMENT,
            Reason.TEXT_MISSING,
            message={
                "zh-CN": "{pointer} 的文本不在页面上（须逐字一致），未写入任何内容",
                "en": "the text at {pointer} is not on the page (it must match exactly); nothing was written",
            },
            hint={
                "zh-CN": "按页面原文逐字给出 oldText（details.candidates 列出相似文本所在的块）",
                "en": "give oldText exactly as the page has it (details.candidates shows blocks with similar text)",
            },
        ),
        Words(
            ErrorCode.INVALID_ARGUMENT,
            Reason.TEXT_AMBIGUOUS,
            message={
                "zh-CN": "{pointer} 的文本在页面上出现 {matches} 次，未写入任何内容",
                "en": "the text at {pointer} occurs {matches} times; nothing was written",
            },
            hint={
                "zh-CN": "在 oldText 中加入前后文使其唯一，或给出 blockId，或设 replaceAll=true（details.candidates 列出出现位置）",
                "en": "add surrounding words to oldText to make it unique, give blockId, or set replaceAll=true "
                "(details.candidates shows where it occurs)",
            },
        ),
    ),
)

COMMANDS = (REPLACE,)
