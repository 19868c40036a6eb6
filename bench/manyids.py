"""`python -m bench.attacks many-ids [BASE_DIR]`: issue 26's many-id `mnote.block.delete`, against a
real `mnote-mcp serve --transport http`, and what another tenant's small reads cost meanwhile.

A store with the test fixture plus a page of 20,000 blocks (10,000 list blocks with a child each);
tokens for a viewer and an editor of that workspace and for `user_stranger`, the owner of another
workspace. First the stranger reads its own page (`mnote.page.get`) back to back for a while: the idle
latency. Then, for each attack, an attacker in a process of its own sends the same call back to back
while the stranger reads for `WINDOW` seconds (the read in flight when the window closes is waited for,
and so is the attack call in flight):

- a viewer deleting 60,000 ids (660 KB, the issue's figure), for real and as a dry run;
- an editor deleting 60,000 ids (over the 20,000 bound);
- an editor deleting all 20,000 blocks of the page as a dry run, and for real (the first call deletes,
  the ones after are refused `not_found`: the ids are gone).

Each attack reports the stranger's reads (count, median, 95th percentile, longest) and their median
against idle, and the attack calls (count, median seconds, the answer's code). With BASE_DIR (a
checkout of another commit: `git archive <commit> | tar -x -C DIR`), the same runs against a server
started from that code too (its `mnote_mcp` first on the path), so before and after come from one
run on one machine. Figures for docs/security.md.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream
from anyio.streams.text import TextReceiveStream

from bench.targets import ROOT
from tests.support.helpers import (
    FIXTURE,
    call,
    list_page,
    list_page_ids,
    page_args,
    store_with_pages,
    write_args,
)
from tests.support.http_helpers import http_server, mcp_http_client, write_tokens

TOKENS: dict[str, dict[str, Any]] = {
    "tok-viewer": {"actorId": "user_viewer"},  # every scope: the role refuses the write
    "tok-editor": {"actorId": "user_editor"},
    "tok-other": {"actorId": "user_stranger"},
}
BIG = "doc_big"
LISTS = 10_000
ALL_IDS = list_page_ids(LISTS)
BOGUS = [f"x_{index:06d}" for index in range(60_000)]
WINDOW = 10.0  # seconds the stranger reads under each attack
IDLE_READS = 300
CALL_TIMEOUT = 600.0  # before the fix, one call held the server for tens of seconds

# name -> (attacker's token, dry run, ids)
ATTACKS: dict[str, tuple[str, bool, list[str]]] = {
    "viewer, 60,000 ids": ("tok-viewer", False, BOGUS),
    "viewer, 60,000 ids, dry run": ("tok-viewer", True, BOGUS),
    "editor, 60,000 ids": ("tok-editor", False, BOGUS),
    "editor, all 20,000 ids, dry run": ("tok-editor", True, ALL_IDS),
    "editor, all 20,000 ids": ("tok-editor", False, ALL_IDS),
}


def big_store(path: Path) -> Path:
    return store_with_pages(path, FIXTURE, list_page(BIG, LISTS))


def copy_store(source: Path, target: Path) -> Path:
    for path in source.parent.glob(source.name + "*"):  # the file and its WAL, if any
        shutil.copy(path, target.parent / path.name.replace(source.name, target.name))
    return target


def _stats(took: list[float]) -> dict[str, float]:
    ordered = sorted(took)
    return {
        "reads": len(took),
        "median_ms": statistics.median(took) * 1000,
        "p95_ms": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1000,
        "max_ms": ordered[-1] * 1000,
    }


async def _read(client: Any) -> float:
    started = time.perf_counter()
    envelope = await call(client, "mnote.page.get", **page_args("doc_other", "ws_other"))
    assert envelope["ok"], envelope["error"]
    return time.perf_counter() - started


async def attacker(url: str, name: str) -> None:
    """The attacker's process: `name`'s call back to back until a line comes on stdin; then prints
    each call's seconds and answer as JSON."""
    token, dry_run, ids = ATTACKS[name]
    calls: list[tuple[float, str]] = []
    stop = anyio.Event()

    async def until_told() -> None:
        await anyio.to_thread.run_sync(sys.stdin.readline)
        stop.set()

    async with (
        mcp_http_client(url, token, http_timeout=CALL_TIMEOUT) as client,
        anyio.create_task_group() as group,
    ):
        group.start_soon(until_told)
        print("ready", flush=True)
        while not stop.is_set():
            started = time.perf_counter()
            envelope = await call(
                client, "mnote.block.delete", **write_args(f"k{len(calls)}", dry_run, BIG, blockIds=ids)
            )
            code = "ok" if envelope["ok"] else envelope["error"]["code"].removeprefix("mnote_tool_")
            calls.append((time.perf_counter() - started, code))
    print(json.dumps(calls), flush=True)


async def _lines(stream: ByteReceiveStream) -> AsyncIterator[str]:
    buffer = ""
    async for chunk in TextReceiveStream(stream):
        buffer += chunk
        while "\n" in buffer:
            line, buffer = buffer.split("\n", 1)
            yield line


async def under_attack(url: str, name: str) -> dict[str, Any]:
    argv = [sys.executable, "-m", "bench.manyids", "attacker", url, name]
    async with await anyio.open_process(argv, cwd=ROOT) as process:
        assert process.stdin is not None and process.stdout is not None
        lines = _lines(process.stdout)
        assert await anext(lines) == "ready"
        took: list[float] = []
        # the attacker sends its first call meanwhile
        async with mcp_http_client(url, "tok-other", http_timeout=CALL_TIMEOUT) as client:
            started = time.perf_counter()
            while time.perf_counter() - started < WINDOW:
                took.append(await _read(client))
        await process.stdin.send(b"stop\n")
        calls = json.loads(await anext(lines))
    return {
        **_stats(took),
        "attack_calls": len(calls),
        "attack_call_median_s": statistics.median(took for took, _ in calls) if calls else None,
        "attack_answers": sorted({code for _, code in calls}),
    }


async def run_against(db: Path, tokens: Path, source: Path | None) -> dict[str, Any]:
    """Every attack on a fresh copy of the store, against a server from `source` (None: this tree)."""
    env = {"PYTHONSAFEPATH": "1", "PYTHONPATH": str(source)} if source is not None else None
    results: dict[str, Any] = {}
    with http_server(db, "--auth-file", str(tokens), env=env, timeout=60) as server:
        async with mcp_http_client(server.url, "tok-other", http_timeout=CALL_TIMEOUT) as client:
            for _ in range(20):  # warm up
                await _read(client)
            idle = [await _read(client) for _ in range(IDLE_READS)]
        results["idle"] = _stats(idle)
        for name in ATTACKS:
            figures = await under_attack(server.url, name)
            figures["median_vs_idle"] = figures["median_ms"] / results["idle"]["median_ms"]
            results[name] = figures
    return results


async def many_ids(base: Path | None = None) -> dict[str, Any]:
    results: dict[str, Any] = {"load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="mnote-many-ids-") as tmp:
        root = Path(tmp)
        tokens = write_tokens(root / "tokens.json", TOKENS)
        pristine = big_store(root / "pristine.db")
        for label, source in (("before", base), ("after", None)) if base is not None else (("after", None),):
            db = copy_store(pristine, root / f"{label}.db")
            results[label] = await run_against(db, tokens, source)
    results["load_after"] = os.getloadavg()
    return results


if __name__ == "__main__":
    if sys.argv[1:2] == ["attacker"]:
        anyio.run(attacker, sys.argv[2], sys.argv[3])
    else:
        print(json.dumps(anyio.run(many_ids, Path(sys.argv[1]) if sys.argv[1:] else None), indent=2))
