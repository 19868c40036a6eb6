"""Page search, the part every adapter shares: the query, tokens, the match expression, snippets, cursors.

Text is folded (NFKC, which folds full-width and half-width forms, then Unicode case folding) and cut
into tokens: a run of CJK characters (Han, kana, Hangul) becomes its overlapping bigrams followed by
its last character alone ("项目计划" → 项目 目计 计划 划), anything else that is a word (letters,
digits) becomes one token. So a CJK query of two or more characters is the phrase of its bigrams (a
substring match, wherever it sits in a sentence), a single CJK character is a prefix of a token (every
occurrence of a character starts a bigram or is a run's last character), and a Latin word matches
whole, or as a prefix when written with a trailing `*`. A bare word of `MIN_PREFIX_CHARS` or more
characters (with a letter in it) forgives: it also matches the words it begins (`plan` finds
"planning"), and pages where it matches whole rank first (`strict`: the query as it was written).
The embedded kernel indexes these tokens with SQLite FTS5 (`kernel/sqlite/search.py`); another store
can index the same tokens (docs/search.md).

`SearchQuery` (`kernel/port.py`) is the kernel port's question (`Kernel.search_pages`); the answer is
`{"hits": [...], "nextCursor"?}` (docs/search.md states both).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from mnote_mcp.kernel.errors import invalid
from mnote_mcp.kernel.port import DEFAULT_SEARCH_LIMIT, SearchQuery, Snippet

DEFAULT_LIMIT = DEFAULT_SEARCH_LIMIT
MAX_LIMIT = 50
MAX_QUERY_CHARS = 200
MAX_TERMS = 16  # segments (words, CJK runs) in one query
SNIPPETS_PER_HIT = 2
SNIPPET_CHARS = 240  # the longest snippet, markers and ellipses aside: enough to edit from
# A bare word this long (or longer) also matches the words it begins; a shorter one matches whole only
# (a one- or two-letter prefix would match most of the index: broad and slow, docs/search.md).
MIN_PREFIX_CHARS = 3
MARK = "**"  # around each match in a snippet
# Pages changed since a cursor's first page that the next page ranks as they were then (each is read
# back through its history); past this the cursor is refused and the search must start again.
MAX_CHANGED_PAGES = 256

# Scripts written without spaces between words: indexed as bigrams. Han (with its extensions and
# compatibility forms, the iteration marks 々〆〇), hiragana, katakana (and its phonetic extensions,
# ー), Hangul syllables.
CJK_RANGES = (
    "\u3005-\u3007\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f"
)


@cache
def _token() -> re.Pattern[str]:
    """A CJK run or a word: compiled on first use, not at import. The two Unicode classes took 8 ms
    of every process's start (each server's, and each `runtime cli` call's), most of which never search."""
    return re.compile(rf"([{CJK_RANGES}]+)|([^\W_{CJK_RANGES}]+)")


@cache
def _word_char() -> re.Pattern[str]:
    return re.compile(rf"[^\W_{CJK_RANGES}]")


def fold(text: str) -> str:
    """Case and width folded: what is indexed and what is searched for."""
    return unicodedata.normalize("NFKC", text).casefold()


def index_tokens(text: str) -> str:
    """The tokens of a text, space-separated: what the search index holds for a title or a block.

    Deterministic (the embedded index deletes a row by recomputing its tokens): changing it needs a
    migration that rebuilds the index.
    """
    out: list[str] = []
    for match in _token().finditer(fold(text)):
        cjk, word = match.groups()
        if word is not None:
            out.append(word)
        else:
            assert cjk is not None
            out.extend(cjk[i : i + 2] for i in range(len(cjk) - 1))
            out.append(cjk[-1])
    return " ".join(out)


@dataclass(frozen=True, slots=True)
class Segment:
    """One piece of a query: a Latin word (`prefix` with a trailing `*`, or `loose`: a bare word long
    enough to match as a prefix too, ranked below its whole-word matches) or a run of CJK characters."""

    text: str  # folded
    cjk: bool
    prefix: bool = False  # matches the words it begins (a `loose` one too)
    loose: bool = False  # a bare word that matches as a prefix: `strict` is its whole-word form

    def fts(self) -> str:
        """This segment as an FTS5 expression over `index_tokens`."""
        if not self.cjk:
            return f'"{self.text}"' + ("*" if self.prefix else "")
        if len(self.text) == 1:
            return f'"{self.text}"*'
        return '"' + " ".join(self.text[i : i + 2] for i in range(len(self.text) - 1)) + '"'


def parse_query(query: str) -> list[Segment]:
    """The segments of a query; every one must match in the same block (or the title).

    Words are separated by anything that is not a letter, digit or CJK character; a `*` right after a
    word makes it a prefix, and so does a bare word of `MIN_PREFIX_CHARS` or more with a letter in it
    (`loose`: its whole-word matches rank first). Repeated segments count once.
    """
    if len(query) > MAX_QUERY_CHARS:
        raise invalid("/query", f"longer than {MAX_QUERY_CHARS} characters")
    folded = fold(query)
    segments: list[Segment] = []
    for match in _token().finditer(folded):
        cjk, word = match.groups()
        if word is not None:
            star = folded[match.end() : match.end() + 1] == "*"
            loose = not star and len(word) >= MIN_PREFIX_CHARS and any(c.isalpha() for c in word)
            segment = Segment(word, cjk=False, prefix=star or loose, loose=loose)
        else:
            assert cjk is not None
            segment = Segment(cjk, cjk=True)
        if segment not in segments:
            segments.append(segment)
    if not segments:
        raise invalid("/query", "has nothing to search for: no letter, digit or CJK character")
    if len(segments) > MAX_TERMS:
        raise invalid("/query", f"more than {MAX_TERMS} words or CJK runs")
    return segments


def strict(segments: Sequence[Segment]) -> list[Segment] | None:
    """The query as written, every bare word whole: a page matching it ranks above pages matching
    only by a forgiven prefix. None when no word is `loose` (every hit matches as written)."""
    if not any(segment.loose for segment in segments):
        return None
    return [Segment(s.text, s.cjk) if s.loose else s for s in segments]


def match_expression(segments: Sequence[Segment]) -> str:
    """The FTS5 query: every segment, in either column (title or body)."""
    return " AND ".join(segment.fts() for segment in segments)


def snippet(text: str, segments: Sequence[Segment]) -> str | None:
    """An excerpt of `text` (at most `SNIPPET_CHARS`) centred on its first match, every match in it
    marked `**…**`; None if none of the segments occurs (a block matched by another segment of the
    same query)."""
    folded, origin = _folded_with_origin(text)
    spans: list[tuple[int, int]] = []
    for segment in segments:
        spans += find(folded, segment)
    if not spans:
        return None
    # back to the original text's positions, merged where they overlap
    marks: list[tuple[int, int]] = []
    for start, end in sorted((origin[s], origin[e - 1] + 1) for s, e in spans):
        if marks and start <= marks[-1][1]:
            marks[-1] = (marks[-1][0], max(marks[-1][1], end))
        else:
            marks.append((start, end))
    first, first_end = marks[0]
    begin = max(0, first - max(0, SNIPPET_CHARS - (first_end - first)) // 2)
    finish = min(len(text), begin + SNIPPET_CHARS)
    begin = max(0, min(begin, finish - SNIPPET_CHARS))
    out: list[str] = ["…" if begin > 0 else ""]
    at = begin
    for start, end in marks:
        if start >= finish:
            break
        start, end = max(start, at), min(end, finish)
        if start >= end:
            continue
        out += [text[at:start], MARK, text[start:end], MARK]
        at = end
    out += [text[at:finish], "…" if finish < len(text) else ""]
    return " ".join("".join(out).split())  # one line: newlines and runs of spaces as one space


def snippets(blocks: Iterable[tuple[str, str]], segments: Sequence[Segment]) -> list[Snippet]:
    """A hit's snippets: of its first and last matching blocks, given as (block id, text) in the order
    they were written; both dialects' indexes answer with these."""
    out: list[Snippet] = []
    for block_id, text in blocks:
        marked = snippet(text, segments)
        if marked is not None:
            out.append({"blockId": block_id, "text": marked})
    return out[:SNIPPETS_PER_HIT]


def _folded_with_origin(text: str) -> tuple[str, list[int]]:
    """The folded text and, for each of its characters, the index of the character it came from.
    Folding rarely changes the length (ﬁ → fi, ß → ss, ｶﾞ → ガ do); when it does not, the characters
    correspond one to one, and folding the whole text at once is many times faster."""
    folded = fold(text)
    if len(folded) == len(text):
        return folded, list(range(len(text)))
    parts: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        folded = fold(char)
        parts.append(folded)
        origin += [index] * len(folded)
    return "".join(parts), origin


def find(folded: str, segment: Segment) -> list[tuple[int, int]]:
    """Where `segment` matches in a folded text (start, end): a CJK run anywhere, a word whole (or as a
    prefix) between two characters that are not word characters."""
    spans: list[tuple[int, int]] = []
    needle = segment.text
    at = folded.find(needle)
    while at >= 0:
        end = at + len(needle)
        if segment.cjk or _word_edges(folded, at, end, segment.prefix):
            if segment.prefix:
                word_char = _word_char()
                while end < len(folded) and word_char.match(folded[end]):
                    end += 1
            spans.append((at, end))
        at = folded.find(needle, end if end > at else at + 1)
    return spans


def _word_edges(folded: str, start: int, end: int, prefix: bool) -> bool:
    word_char = _word_char()
    before = start == 0 or not word_char.match(folded[start - 1])
    after = prefix or end == len(folded) or not word_char.match(folded[end])
    return before and after


def segments_of(query: SearchQuery) -> list[Segment] | None:
    """The query's segments (None: a listing), or the refusal of a bad limit or query."""
    if not 1 <= query.limit <= MAX_LIMIT:
        raise invalid("/limit", f"must be between 1 and {MAX_LIMIT}")
    if query.query is None:
        return None
    return parse_query(query.query)


def matches(text: str, segments: Sequence[Segment]) -> bool:
    """Whether a title or block text holds every segment: the index's matching rule, on a text the
    index no longer holds (a page as it was at a cursor's moment)."""
    return holds(fold(text), segments)


def holds(folded: str, segments: Sequence[Segment]) -> bool:
    """Whether a folded text holds every segment (`matches` on a text folded already)."""
    return all(find(folded, segment) for segment in segments)


def query_tag(query: SearchQuery) -> str:
    """What a cursor is bound to: the query, the workspaces searched and the actor."""
    raw = json.dumps([query.actor_id, query.query, query.workspace_id, query.workspaces], ensure_ascii=False)
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


# A watermark is the store's own: SQLite's is the number of the last page change (an int), PostgreSQL's
# a snapshot (`xmin:xmax:xip,...`). A cursor carries the one its first page was answered at.
Watermark = int | str
MAX_WATERMARK_CHARS = 1000
_INT64 = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class Cursor:
    """A decoded cursor: the sort key of the last hit given, and the moment the first page was taken at."""

    after: list[Any]
    watermark: Watermark


def encode_cursor(query: SearchQuery, after: Sequence[Any], watermark: Watermark) -> str:
    """An opaque cursor: the sort key of the last hit given and the first page's watermark, bound to
    the query (`query_tag`)."""
    raw = json.dumps(
        {"a": list(after), "w": watermark, "q": query_tag(query)}, separators=(",", ":"), ensure_ascii=False
    )
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _issued(value: Any) -> bool:
    """A value a cursor could hold: an int in SQLite's range, or a bounded string."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return -_INT64 <= value <= _INT64
    return isinstance(value, str) and len(value) <= MAX_WATERMARK_CHARS


def decode_cursor(query: SearchQuery, kinds: Sequence[type]) -> Cursor | None:
    """The sort key (a value of each of `kinds`, int or str, in turn) and watermark a cursor carries,
    or None without one. Anything the server did not make is refused: the cursor is the client's to alter, so its
    values are checked for type and range here, and the watermark by the store (`watermark_of`)."""
    if query.cursor is None:
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode((query.cursor + "=" * (-len(query.cursor) % 4)).encode()))
        after, watermark, tag = data["a"], data["w"], data["q"]
    except (ValueError, TypeError, KeyError, RecursionError, binascii.Error):
        raise invalid("/cursor", "not a cursor returned by mnote.page.search") from None
    if (
        not isinstance(after, list)
        or len(after) != len(kinds)
        or not all(_issued(value) and type(value) is kind for value, kind in zip(after, kinds, strict=False))
        or not _issued(watermark)
        or not isinstance(tag, str)
    ):
        raise invalid("/cursor", "not a cursor returned by mnote.page.search")
    if tag != query_tag(query):
        raise invalid("/cursor", "belongs to another query, workspace or actor")
    return Cursor(after, watermark)


def not_a_cursor() -> Exception:
    return invalid("/cursor", "not a cursor returned by mnote.page.search")


def too_many_changes(limit: int) -> Exception:
    return invalid(
        "/cursor",
        f"more than {limit} readable pages changed since the first page of these results: search again"
        " without cursor",
    )
