"""`python -m bench.attacks loop [--before DIR] [--quick]`: issue 30's two attacks on the event loop,
against a real `mnote-mcp serve --transport http`, and what another token waits meanwhile.

- **edit_text amplification**: an editor's one `mnote.page.edit_text` call of 20 doubling `replaceAll`
  edits (`a` -> `aa`) of a 1,000-character block (issue 30 measured 26.3 s, and another token's
  `/healthz` waiting 26.0 s): the call's time and answer, and the other token's longest `/healthz` and
  `mnote.page.get` while it ran.
- **completion storm** (the server as shipped: since issue 32 its rate limits and admission refuse
  most of the storm, each refusal answered and counted): a viewer keeping 20 `completion/complete` requests for the page template's
  workspace argument in flight (each lists every page it may read) over 10,000 readable pages for
  `WINDOW` seconds (issue 30: another token's `page.get` median 975 ms against 4.3 ms idle): the other
  token's `page.get` and `/healthz` latencies (median, 99th percentile, longest) against idle.

With `--before DIR` (a checkout of the code before the fix), each scenario runs against a server from
that checkout too, right after this one's, on copies of the same store: before and after in one run.
Figures for docs/security.md; the machine may be shared, so the times are noisy, their ratios less so.
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as types
from mcp import MCPError

from bench.targets import ROOT
from tests.support.helpers import FIXTURE, call, page_args, store_with_pages, write_args
from tests.support.http_helpers import http_server, mcp_http_client, write_tokens

TOKENS: dict[str, dict[str, Any]] = {
    "tok-editor": {"actorId": "user_editor"},
    "tok-viewer": {"actorId": "user_viewer"},
    "tok-other": {"actorId": "user_stranger"},
}
AMPLIFIED = "doc_amplified"
PAGES = 10_000
IN_FLIGHT = 20
WINDOW = 10.0
PACE = 0.1  # the other token's read and probe, ten a second
TEMPLATE = types.ResourceTemplateReference(
    type="ref/resource", uri="mnote://workspaces/{workspaceId}/pages/{documentId}"
)


def _store(path: Path, pages: int) -> Path:
    extra = [
        {
            "id": AMPLIFIED,
            "title": "Amplified",
            "blocks": [{"id": "a", "type": "paragraph", "text": "a" * 1_000}],
        }
    ]
    extra += [
        {"id": f"many_{n:05d}", "title": f"w{n:05d} page", "blocks": [{"type": "paragraph", "text": "w"}]}
        for n in range(pages)
    ]
    return store_with_pages(path, FIXTURE, *extra)


def _stats(took: list[float]) -> dict[str, float]:
    if not took:
        return {"n": 0}
    ordered = sorted(took)
    return {
        "n": len(took),
        "median_ms": statistics.median(ordered) * 1e3,
        "p99_ms": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1e3,
        "max_ms": ordered[-1] * 1e3,
    }


async def _victim(url: str, stop: anyio.Event, reads: list[float], health: list[float]) -> None:
    """The other token: a page read, then /healthz, ten a second (an agent reading briskly, within the
    per-actor rates of issue 32), until `stop` (the last ones waited for)."""
    async with (
        mcp_http_client(url, "tok-other", http_timeout=600) as client,
        httpx2.AsyncClient(timeout=600) as http,
    ):
        while not stop.is_set():
            started = time.perf_counter()
            envelope = await call(client, "mnote.page.get", **page_args("doc_other", "ws_other"))
            assert envelope["ok"], envelope["error"]
            reads.append(time.perf_counter() - started)
            begun = time.perf_counter()
            (await http.get(f"{url}/healthz")).raise_for_status()
            health.append(time.perf_counter() - begun)
            await anyio.sleep(max(0.0, PACE - (time.perf_counter() - started)))


async def _idle(url: str) -> dict[str, Any]:
    reads: list[float] = []
    health: list[float] = []
    stop = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(_victim, url, stop, reads, health)
        await anyio.sleep(3.0)
        stop.set()
    return {"page_get": _stats(reads[5:]), "healthz": _stats(health[5:])}


async def amplification(url: str) -> dict[str, Any]:
    reads: list[float] = []
    health: list[float] = []
    stop = anyio.Event()
    edits = [{"oldText": "a", "newText": "aa", "replaceAll": True}] * 20
    out: dict[str, Any] = {}
    async with anyio.create_task_group() as group:
        group.start_soon(_victim, url, stop, reads, health)
        await anyio.sleep(1.0)
        reads.clear()
        health.clear()
        async with mcp_http_client(url, "tok-editor", http_timeout=600) as attacker:
            started = time.perf_counter()
            envelope = await call(
                attacker,
                "mnote.page.edit_text",
                **write_args("amplify", document_id=AMPLIFIED, blockId="a", edits=edits),
            )
            out["call_s"] = time.perf_counter() - started
        stop.set()
    error = envelope.get("error") or {}
    out["answer"] = (
        "ok" if envelope["ok"] else f"{error.get('code')}: {error.get('details', {}).get('limit')}"
    )
    out["other_page_get"] = _stats(reads)
    out["other_healthz"] = _stats(health)
    return out


async def storm(url: str, window: float) -> dict[str, Any]:
    reads: list[float] = []
    health: list[float] = []
    answered: list[float] = []
    refused: list[str] = []
    stop = anyio.Event()

    async def lane(client: Any) -> None:
        while not stop.is_set():
            started = time.perf_counter()
            try:
                await client.complete(TEMPLATE, {"name": "workspaceId", "value": ""})
            except MCPError as error:  # a rate limit or the admission (issue 32): wait as told
                refused.append(error.error.message[:80])
                await anyio.sleep(0.05)
                continue
            answered.append(time.perf_counter() - started)

    async with (
        mcp_http_client(url, "tok-viewer", http_timeout=600) as attacker,
        anyio.create_task_group() as group,
    ):
        for _ in range(IN_FLIGHT):
            group.start_soon(lane, attacker)
        await anyio.sleep(1.0)
        async with anyio.create_task_group() as victim:
            victim.start_soon(_victim, url, stop, reads, health)
            await anyio.sleep(window)
            stop.set()
    return {
        "completions_answered": len(answered),
        "completions_refused": len(refused),
        "completion": _stats(answered),
        "other_page_get": _stats(reads),
        "other_healthz": _stats(health),
    }


async def one_server(root: Path, db: Path, tokens: Path, window: float) -> dict[str, Any]:
    with http_server(db, "--auth-file", str(tokens), root=root, timeout=120) as server:
        idle = await _idle(server.url)
        return {
            "idle": idle,
            "edit_text_amplification": await amplification(server.url),
            "completion_storm": await storm(server.url, window),
        }


async def loop_attacks(before: Path | None, quick: bool = False) -> dict[str, Any]:
    import os

    roots = {"after": ROOT, **({"before": before} if before is not None else {})}
    results: dict[str, Any] = {"load_average_start": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="mnote-loop-attacks-") as tmp:
        folder = Path(tmp)
        tokens = write_tokens(folder / "tokens.json", TOKENS)
        stage = _store(folder / "stage.db", 1_000 if quick else PAGES)
        for label, root in roots.items():
            db = folder / f"{label}.db"
            for path in stage.parent.glob(stage.name + "*"):
                shutil.copy(path, folder / path.name.replace(stage.name, db.name))
            results[label] = await one_server(root, db, tokens, 3.0 if quick else WINDOW)
    results["load_average_end"] = os.getloadavg()
    return results


if __name__ == "__main__":
    import sys

    before_dir = Path(sys.argv[2]) if sys.argv[1:2] == ["--before"] else None
    print(json.dumps(anyio.run(loop_attacks, before_dir, "--quick" in sys.argv), indent=2))
