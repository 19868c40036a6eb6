"""Ready for hosts that defer tools behind a search (Hermes >= 0.20 sends a model `tool_search` and the
definitions it looks up, not every definition with every request): each tool's name and the first
sentence of its description say what it does in the words a person uses, in English and in Chinese,
so that a plain BM25 over those words ranks the right tool first for everyday requests in either
language. And `tools/list` is the same, in order and in bytes, every time it is asked: a host that
caches definitions (or a prompt cache keyed on them) is not defeated by an unstable listing.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

import orjson
import pytest

from mnote_mcp.tools.catalog import ALL_TOOLS
from tests.support.helpers import MODES, connect

pytestmark = pytest.mark.anyio

# Everyday requests, each in English and in Chinese, and the tool a person means by it: each tool's
# own (`ToolSpec.asked`).
REQUESTS: tuple[tuple[str, str, str], ...] = tuple(
    (spec.name, english, chinese) for spec in ALL_TOOLS for english, chinese in spec.asked
)

_WORD = re.compile(r"[A-Za-z0-9]+")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "to",
        "of",
        "in",
        "on",
        "for",
        "my",
        "me",
        "this",
        "that",
        "with",
        "and",
        "or",
        "is",
        "it",
        "at",
        "by",
        "as",
        "from",
        "be",
        "what",
        "you",
        "your",
        "just",
        "its",
        "our",
        "i",
    ]
)


def _stem(word: str) -> str:
    """A light English stemmer: the forms a request and a description differ by."""
    for suffix, keep, shortest in (
        ("ies", "y", 3),
        ("ing", "", 3),
        ("ed", "", 3),
        ("es", "", 3),
        ("s", "", 2),
    ):
        if word.endswith(suffix) and len(word) - len(suffix) >= shortest and not word.endswith("ss"):
            return word[: -len(suffix)] + keep
    return word


def tokens(text: str) -> list[str]:
    """English words (camelCase and snake_case split, lower case, stemmed, stop words out) and Chinese
    as overlapping character bigrams (a lone character as itself), as a search engine would cut them."""
    found: list[str] = []
    for word in _WORD.findall(_CAMEL.sub(" ", text)):
        lowered = word.lower()
        if lowered not in _STOP and len(lowered) > 1:
            found.append(_stem(lowered))
    for run in _CJK.findall(text):
        found.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
    return found


def first_sentence(description: str) -> str:
    return re.split(r"(?<=[.。])\s", description, maxsplit=1)[0]


class Bm25:
    """Okapi BM25 (k1 1.2, b 0.75) over one document per tool."""

    def __init__(self, documents: dict[str, list[str]], k1: float = 1.2, b: float = 0.75) -> None:
        self.documents = {name: Counter(words) for name, words in documents.items()}
        self.lengths = {name: len(words) for name, words in documents.items()}
        self.average = sum(self.lengths.values()) / len(documents)
        held = Counter(word for counts in self.documents.values() for word in counts)
        n = len(documents)
        self.idf = {word: math.log(1 + (n - df + 0.5) / (df + 0.5)) for word, df in held.items()}
        self.k1, self.b = k1, b

    def scores(self, query: list[str]) -> dict[str, float]:
        ranked: dict[str, float] = {}
        for name, counts in self.documents.items():
            norm = self.k1 * (1 - self.b + self.b * self.lengths[name] / self.average)
            ranked[name] = sum(
                self.idf[word] * counts[word] * (self.k1 + 1) / (counts[word] + norm)
                for word in query
                if word in counts
            )
        return ranked


def definitions_index() -> Bm25:
    """What a tool search sees first of each tool: its name and the first sentence of its description."""
    return Bm25({spec.name: tokens(f"{spec.name} {first_sentence(spec.description)}") for spec in ALL_TOOLS})


def test_every_tool_is_asked_for() -> None:
    assert {tool for tool, _, _ in REQUESTS} == {spec.name for spec in ALL_TOOLS}, "declare asked="
    assert len(REQUESTS) >= 20


@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize(("tool", "english", "chinese"), REQUESTS, ids=[r[1] for r in REQUESTS])
def test_an_everyday_request_finds_its_tool_first(
    tool: str, english: str, chinese: str, language: str
) -> None:
    query = english if language == "en" else chinese
    scores = definitions_index().scores(tokens(query))
    ranked = sorted(scores, key=lambda name: -scores[name])
    assert ranked[0] == tool and scores[ranked[0]] > scores[ranked[1]], (
        query,
        [(name, round(scores[name], 2)) for name in ranked[:3]],
    )


def test_each_first_sentence_is_in_english_and_chinese() -> None:
    for spec in ALL_TOOLS:
        sentence = first_sentence(spec.description)
        assert _CJK.search(sentence) and re.search(r"[A-Za-z]{3}", sentence), spec.name


@pytest.mark.parametrize("mode", MODES)
async def test_tools_list_is_the_same_in_order_and_bytes_every_time(db: Path, mode: str) -> None:
    listings = []
    for _ in range(2):
        async with connect(db, mode) as client:
            for _ in range(2):
                listed = await client.list_tools()
                listings.append(
                    orjson.dumps(
                        [
                            tool.model_dump(by_alias=True, exclude_none=True, mode="json")
                            for tool in listed.tools
                        ]
                    )
                )
    assert len(set(listings)) == 1
    names = [tool["name"] for tool in orjson.loads(listings[0])]
    assert names == [spec.name for spec in ALL_TOOLS if spec.name in names], "in declaration order"
