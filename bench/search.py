"""`mnote.page.search` at the issue's scale: 10,000 pages x 50 blocks, half Chinese, half English.

`python -m bench.search [--quick] [--baseline DIR]` (also part of `python -m bench`). Over stdio with
the raw client: search latency (p50/p99) for a word, a prefix (with `*`, and bare: forgiven since issue
22), a 2-character and a 4-character Chinese query (and, as information, a common word and the
listing), with `--baseline` also on a server running an earlier source tree (a copy of the store),
interleaved call batch by call batch; a one-block write's p50 on a store with the index against
the same store without it (its tables dropped, served by a server whose index follows no write:
`Fts5Index.apply` a no-op), interleaved; the index's size on disk against the text's.

The dataset is made fast: rows are inserted straight into a new store, then the index is built from
them (`kernel/sqlite/search.build`, the upgrade's code, each page down the page-change path), so the
store is exactly what its writes would have made. Text is drawn from a Zipf-distributed
vocabulary (real words at the top ranks, made-up ones below); the queries are chosen by rank so that
their match counts are typical (a few hundred to a few thousand blocks), and reported with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import inspect
import itertools
import json
import os
import random
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.fixtures import ACTOR
from bench.measure import checked, cpu_seconds, percentiles, sequential
from bench.rawclient import StdioPeer
from bench.report import search_lines
from bench.targets import mnote
from mnote_mcp.kernel.search import index_tokens
from mnote_mcp.kernel.sqlite.opening import open_store
from mnote_mcp.kernel.sqlite.search import SEARCH_DDL, Fts5Index, build
from mnote_mcp.kernel.store.changes import publish

WORKSPACES = 10
_EN_TOP = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "for",
    "on",
    "that",
    "with",
    "as",
    "this",
    "are",
    "be",
    "by",
    "from",
    "it",
    "at",
    "or",
    "we",
    "will",
    "project",
    "team",
    "plan",
    "meeting",
    "review",
    "budget",
    "release",
    "design",
    "customer",
    "report",
    "data",
    "update",
    "schedule",
    "risk",
    "quality",
    "test",
    "feature",
    "document",
    "process",
    "service",
    "system",
    "product",
    "market",
    "sales",
    "support",
    "issue",
    "task",
    "deadline",
    "decision",
    "goal",
    "strategy",
    "analysis",
    "performance",
    "security",
    "network",
    "server",
    "database",
    "migration",
    "deploy",
]
_ZH_TOP = [
    "我们",
    "的",
    "是",
    "在",
    "和",
    "了",
    "项目",
    "计划",
    "会议",
    "团队",
    "预算",
    "进度",
    "风险",
    "客户",
    "需求",
    "设计",
    "测试",
    "发布",
    "质量",
    "文档",
    "数据",
    "报告",
    "目标",
    "问题",
    "任务",
    "安排",
    "讨论",
    "确认",
    "负责",
    "完成",
    "更新",
    "评审",
    "市场",
    "销售",
    "产品",
    "服务",
    "系统",
    "性能",
    "安全",
    "网络",
    "服务器",
    "数据库",
    "迁移",
    "部署",
    "季度",
    "年度",
    "供应商",
    "合同",
    "交付",
    "延迟",
    "预期",
    "结果",
]
_SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ra",
    "te",
    "po",
    "su",
    "ne",
    "da",
    "vi",
    "ro",
    "ge",
    "fa",
    "li",
    "mo",
    "tu",
    "be",
    "si",
    "no",
    "pa",
    "ri",
    "ko",
    "ta",
    "me",
]
_COMMON_HAN = [chr(c) for c in range(0x4E00, 0x4E00 + 3000, 3)]


def _vocabulary(rng: random.Random, top: list[str], made_up: Any, size: int) -> list[str]:
    words = list(dict.fromkeys(top))
    seen = set(words)
    while len(words) < size:
        word = made_up(rng)
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def vocabularies(seed: int = 13) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    english = _vocabulary(rng, _EN_TOP, lambda r: "".join(r.choices(_SYLLABLES, k=r.randint(2, 4))), 4000)
    chinese = _vocabulary(
        rng, _ZH_TOP, lambda r: "".join(r.choices(_COMMON_HAN, k=r.choice((2, 2, 3, 4)))), 4000
    )
    return english, chinese


def _weights(n: int) -> list[float]:
    return list(itertools.accumulate(1 / (rank + 1) for rank in range(n)))


class Text:
    """Sentences of Zipf-distributed words: English separated by spaces, Chinese run together."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.english, self.chinese = vocabularies()
        self.en_weights = _weights(len(self.english))
        self.zh_weights = _weights(len(self.chinese))

    def english_text(self) -> str:
        words = self.rng.choices(self.english, cum_weights=self.en_weights, k=self.rng.randint(8, 24))
        return " ".join(words).capitalize() + "."

    def chinese_text(self) -> str:
        words = self.rng.choices(self.chinese, cum_weights=self.zh_weights, k=self.rng.randint(6, 18))
        return "，".join("".join(words[i : i + 4]) for i in range(0, len(words), 4)) + "。"


def queries() -> dict[str, str]:
    """The benchmark's queries, by rank in the vocabularies (typical frequencies, not the top words)."""
    english, chinese = vocabularies()
    four = next(word for word in chinese[300:] if len(word) == 4)
    return {
        "word": english[300],
        "prefix": english[120][:3] + "*",
        "bare prefix": english[120][:3],  # forgiven: a prefix since issue 22, exact matches first
        "2-char CJK": next(word for word in chinese[200:] if len(word) == 2),
        "4-char CJK": four,
        "common word (info)": english[40],
        "common 2-char CJK (info)": "项目",
        "listing (info)": "",
    }


def make_store(path: Path, pages: int, blocks_per_page: int = 50) -> dict[str, Any]:
    """A store of `pages` pages in `WORKSPACES` workspaces, half Chinese, half English; returns facts."""
    started = time.perf_counter()
    store = open_store(path)
    store.close()
    text = Text()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    for w in range(WORKSPACES):
        conn.execute("INSERT INTO workspaces (id, name) VALUES (?, ?)", (f"ws_{w}", f"Workspace {w}"))
        conn.execute("INSERT INTO members VALUES (?, ?, 'editor')", (f"ws_{w}", ACTOR))
    page_rows, block_rows = [], []
    text_bytes = 0
    for p in range(pages):
        chinese = p % 2 == 0
        make = text.chinese_text if chinese else text.english_text
        title = make()[:24]
        body = [make() for _ in range(blocks_per_page)]
        text_bytes += len(title.encode()) + sum(len(t.encode()) for t in body)
        workspace, page = f"ws_{p % WORKSPACES}", f"doc_{p}"
        page_rows.append(
            (workspace, page, title, f"2026-01-01T00:00:{p // 1000:02}.{p % 1000:03}Z", len(body))
        )
        keys = [f"a{n:04}" for n in range(len(body))]
        block_rows += [
            (workspace, page, "", key, f"b{n}", "paragraph", t)
            for n, (key, t) in enumerate(zip(keys, body, strict=False))
        ]
    conn.executemany(
        "INSERT INTO pages (workspace_id, id, title, options, revision, restricted, updated_at, block_count,"
        " byte_size, history_from) VALUES (?, ?, ?, '{}', 1, 0, ?, ?, 0, 1)",
        page_rows,
    )
    conn.executemany(
        "INSERT INTO blocks (workspace_id, page_id, parent_id, position, id, type, text, props, revision)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, NULL, 1)",
        block_rows,
    )
    generated = time.perf_counter() - started
    index = Fts5Index()
    build(conn, lambda change: publish(conn, change, (index.apply,)))
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    index_bytes = conn.execute(
        "SELECT sum(pgsize) FROM dbstat WHERE name LIKE 'search%' OR name LIKE 'sqlite_autoindex_search%'"
        " OR name IN ('pages_by_change', 'pages_restricted')"
    ).fetchone()[0]
    conn.close()
    return {
        "pages": pages,
        "blocks": pages * blocks_per_page,
        "text_bytes": text_bytes,
        "index_bytes": index_bytes,
        "generate_s": generated,
        "build_s": time.perf_counter() - started - generated,
    }


def matching_rows(path: Path) -> dict[str, int]:
    """The block rows each query matches, by this code's matching rule (not cached with the data)."""
    conn = sqlite3.connect(path)
    try:
        return {
            name: conn.execute(
                "SELECT count(*) FROM search_index WHERE search_index MATCH ?", (_match(q),)
            ).fetchone()[0]
            for name, q in queries().items()
            if q
        }
    finally:
        conn.close()


def _match(query: str) -> str:
    from mnote_mcp.kernel.search import match_expression, parse_query

    return match_expression(parse_query(query))


def without_index(source: Path, target: Path) -> None:
    """A copy of the store with the search index's tables dropped (the write baseline, served by
    `_peer(..., index=False)`)."""
    shutil.copyfile(source, target)
    conn = sqlite3.connect(target, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    for table in ("search_index", "search_blocks", "search_pages", "search_workspaces", "page_changes"):
        conn.execute(f"DROP TABLE {table}")
    conn.execute("COMMIT")
    conn.execute("VACUUM")
    conn.close()


# The server of the write baseline: mnote-mcp with its search index following no write.
_NO_INDEX = (
    "import sys; from mnote_mcp.kernel.sqlite.search import Fts5Index;"
    " Fts5Index.apply = lambda self, conn, change: None;"
    " from mnote_mcp.cli import main; sys.exit(main(sys.argv[1:]))"
)


async def _peer(db: Path, *, index: bool = True, baseline: Path | None = None) -> StdioPeer:
    target = mnote(db, baseline)
    argv = target.argv if index else [target.argv[0], "-c", _NO_INDEX, *target.argv[3:]]
    peer = await StdioPeer.spawn(argv, target.env, str(target.cwd))
    await peer.initialize()
    await peer.request("tools/list")
    return peer


async def measure(
    db: Path, plain: Path, pages: int, rounds: int, calls: int, baseline: tuple[Path, Path] | None = None
) -> dict[str, Any]:
    """The figures; with `baseline` (a copy of the store, a source tree of earlier code) every search
    is also timed on the earlier code's server, interleaved with this one's round by round."""
    searched, other = await _peer(db), await _peer(plain, index=False)
    servers = {"": searched}
    if baseline is not None:
        servers["baseline "] = await _peer(baseline[0], baseline=baseline[1])
    keys = itertools.count()
    asked = queries()

    def search_args(query: str) -> dict[str, Any]:
        return {"query": query} if query else {}

    def write_args(n: int) -> dict[str, Any]:
        page = (n * 7919) % pages
        text = f"更新后的内容 {n}" if n % 2 else f"updated text number {n}"
        return {
            "workspaceId": f"ws_{page % WORKSPACES}",
            "documentId": f"doc_{page}",
            "blockId": f"b{n % 50}",
            "text": text,
            "idempotencyKey": f"w{next(keys)}",
            "dryRun": False,
        }

    hits: dict[str, int] = {}

    def searching(name: str, label: str = "") -> Callable[[int], Awaitable[None]]:
        async def one(n: int) -> None:
            peer = servers[label]
            result = await checked(peer.call("mnote.page.search", search_args(asked[name])))
            hits[label + name] = len(result["structuredContent"]["result"]["hits"])

        return one

    def writing(peer: StdioPeer) -> Callable[[int], Awaitable[Any]]:
        return lambda n: checked(peer.call("mnote.block.update", write_args(n)))

    try:
        for label in servers:  # warm up: page cache, statements
            for name in asked:
                await sequential(searching(name, label), 5)
        for peer in (searched, other):
            await sequential(writing(peer), 10)
        timed = [label + name for name in asked for label in servers]
        samples: dict[str, list[float]] = {name: [] for name in timed}
        writes: dict[str, list[float]] = {"with index": [], "without index": []}
        cpu: dict[str, list[float]] = {name: [] for name in timed}
        write_cpu: dict[str, list[float]] = {"with index": [], "without index": []}
        for _ in range(rounds):
            for name in asked:
                for label, peer in servers.items():
                    before = cpu_seconds(peer.process.pid)
                    samples[label + name] += await sequential(searching(name, label), calls)
                    cpu[label + name].append((cpu_seconds(peer.process.pid) - before) / calls)
            for label, peer in (("with index", searched), ("without index", other)):
                before = cpu_seconds(peer.process.pid)
                writes[label] += await sequential(writing(peer), calls)
                write_cpu[label].append((cpu_seconds(peer.process.pid) - before) / calls)
    finally:
        for peer in (*servers.values(), other):
            await peer.close()
    return {
        "queries": asked,
        "search": {name: percentiles(values) for name, values in samples.items()},
        # server CPU per search (user + system, ms): what a call costs the server whatever the
        # machine's load, which on a shared machine stretches wall-clock latency by waiting for a core
        "cpu_ms": {name: 1e3 * sum(values) / len(values) for name, values in cpu.items()},
        "hits_returned": hits,
        "write": {label: percentiles(values) for label, values in writes.items()},
        "write_cpu_ms": {label: 1e3 * sum(values) / len(values) for label, values in write_cpu.items()},
    }


def cached_store(db: Path, pages: int) -> dict[str, Any]:
    """`make_store` into `db`, through a cache (`$XDG_CACHE_HOME/mnote-bench`, or `MNOTE_BENCH_CACHE`):
    the full dataset takes minutes to make on a shared machine. The cache key covers the schema, the
    index's DDL, the tokenizer and the generator's code, so a change to any of them makes a new dataset."""
    from mnote_mcp.kernel.sqlite.schema import SCHEMA_VERSION

    made_by = (make_store, Text, vocabularies, _vocabulary, build, index_tokens)
    source = "".join(inspect.getsource(part) for part in made_by) + SEARCH_DDL + str(SCHEMA_VERSION)
    key = hashlib.sha256(source.encode()).hexdigest()[:12]
    base = os.environ.get("MNOTE_BENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "mnote-bench"
    )
    cache = Path(base) / f"search-{pages}-{key}"
    if not (cache / "facts.json").exists():
        cache.mkdir(parents=True, exist_ok=True)
        facts = make_store(cache / "search.db", pages)
        (cache / "facts.json").write_text(json.dumps(facts), encoding="utf-8")
    shutil.copyfile(cache / "search.db", db)
    facts = json.loads((cache / "facts.json").read_text(encoding="utf-8"))
    return {**facts, "cached": str(cache)}


async def search_suite(quick: bool, baseline: Path | None = None) -> dict[str, Any]:
    pages = 200 if quick else 10_000
    with tempfile.TemporaryDirectory(prefix="mnote-bench-search-") as tmp:
        db, plain = Path(tmp) / "search.db", Path(tmp) / "plain.db"
        facts = make_store(db, pages) if quick else cached_store(db, pages)
        facts["matching_rows"] = matching_rows(db)
        without_index(db, plain)
        facts["plain_bytes"] = plain.stat().st_size
        facts["db_bytes"] = db.stat().st_size
        earlier = None
        if baseline is not None:
            earlier = (Path(tmp) / "baseline.db", baseline)
            shutil.copyfile(db, earlier[0])
        figures = await measure(
            db, plain, pages, rounds=1 if quick else 5, calls=10 if quick else 40, baseline=earlier
        )
    write = figures["write"]
    figures["write_ratio"] = write["with index"]["p50"] / write["without index"]["p50"]
    cpu = figures["write_cpu_ms"]
    # (CPU comes in clock ticks of 10 ms: a short run's writes may have used none that were counted)
    figures["write_cpu_ratio"] = (
        cpu["with index"] / cpu["without index"] if cpu["without index"] else float("nan")
    )
    figures["index_to_text"] = facts["index_bytes"] / facts["text_bytes"]
    return {**facts, **figures}


def targets(search: dict[str, Any]) -> list[tuple[str, float, str, float, bool]]:
    """(name, value, target text, bound, upper) rows for the benchmark's target table."""
    rows: list[tuple[str, float, str, float, bool]] = []
    scale = f"{search['pages']:,} pages x 50 blocks"
    for name in ("word", "prefix", "2-char CJK", "4-char CJK"):
        figures = search["search"][name]
        rows.append((f"search p50, {name}, {scale} (ms)", figures["p50"] / 1e3, "<= 20", 20.0, True))
        rows.append((f"search p99, {name}, {scale} (ms)", figures["p99"] / 1e3, "<= 60", 60.0, True))
    rows.append(("one-block write p50 with/without the index", search["write_ratio"], "<= 1.25", 1.25, True))
    rows.append(
        (
            "one-block write server CPU with/without the index",
            search["write_cpu_ratio"],
            "<= 1.25",
            1.25,
            True,
        )
    )
    rows.append(("search index size / text size", search["index_to_text"], "<= 2", 2.0, True))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.search", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="200 pages instead of 10,000")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a source tree of earlier code: every search is timed on its server too, side by side",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    result = asyncio.run(search_suite(args.quick, args.baseline))
    text = json.dumps(result, indent=2, ensure_ascii=False)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    print("\n".join(search_lines(result)))
    for name, value, target, bound, upper in targets(result):
        met = value <= bound if upper else value >= bound
        print(f"{'met' if met else 'NOT MET':8} {name}: {value:.2f} (target {target})")
    print(f"{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
