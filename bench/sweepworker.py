"""One attack of the hostile-input sweep, in process, on the checkout this runs in (`bench.sweep`).

Run by path with the checkout as the working directory and on `PYTHONPATH` (its `mnote_mcp` and its
`tests.support.helpers.make_app`); nothing else of the checkout is needed, so the same attack (made by
the newer checkout's `tests/support/sweep.py`, as JSON) runs against an older one. Prints one JSON line:
the longest stretch of the event loop thread's own CPU while the attack ran, the longest wall time
between two wake-ups of a 5 ms pinger, how long the answer took, its size, whether it was refused.
The process's address space is capped (`MEMORY_CAP`): an attack that would take more fails here,
not on the machine.
"""

from __future__ import annotations

import asyncio
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MEMORY_CAP = 6 * 1024**3
BUDGET = 4_000


async def _send(client: Any, method: str, params: dict[str, Any]) -> tuple[int, bool]:
    import mcp.types as types

    try:
        if method == "tools/call":
            result = await client.call_tool(params["name"], params["arguments"])
            text = "".join(block.text for block in result.content if isinstance(block, types.TextContent))
            return len(text), not json.loads(text)["ok"]
        if method == "resources/read":
            answer = await client.read_resource(params["uri"])
        elif method == "resources/list":
            answer = await client.list_resources(cursor=params.get("cursor"))
        elif method == "prompts/get":
            answer = await client.get_prompt(params["name"], params["arguments"])
        elif method == "prompts/list":
            answer = await client.list_prompts()
        elif method == "completion/complete":
            ref = params["ref"]
            reference = (
                types.PromptReference(type="ref/prompt", name=ref["name"])
                if ref["type"] == "ref/prompt"
                else types.ResourceTemplateReference(type="ref/resource", uri=ref["uri"])
            )
            context = params.get("context", {}).get("arguments")
            answer = await client.complete(reference, params["argument"], context)
        elif method == "tools/list":
            answer = await client.list_tools(cursor=params.get("cursor"), cache_mode="bypass")
        elif method == "resources/templates/list":
            answer = await client.list_resource_templates()
        elif method == "resources/subscribe":
            answer = await client.subscribe_resource(params["uri"])
        elif method == "resources/unsubscribe":
            answer = await client.unsubscribe_resource(params["uri"])
        elif method == "subscriptions/listen":
            async with client.listen(resource_subscriptions=params["resourceSubscriptions"]):
                return 0, False
        elif method in ("ping", "server/discover"):
            answer = await client.send_ping()
        else:
            raise ValueError(method)
    except Exception:
        return 0, True
    return len(answer.model_dump_json(by_alias=True, exclude_none=True)), False


async def _run(stage: Path, attack: dict[str, Any]) -> dict[str, Any]:
    from mcp import Client

    from tests.support.helpers import make_app

    with tempfile.TemporaryDirectory(prefix="mnote-sweep-") as tmp:
        db = Path(tmp) / "store.db"
        shutil.copy(stage, db)
        app = make_app(db, max_result_chars=BUDGET, confirm="never", result_form="text", refusals="result")
        try:
            async with Client(app.server(), mode=attack["era"]) as client:
                for method, params in attack["prior"]:
                    await _send(client, method, params)
                if attack["method"] == "tools/call":
                    await client.call_tool(attack["params"]["name"], {})
                longest = {"cpu": 0.0, "wall": 0.0}
                last = [time.perf_counter(), time.thread_time()]

                def tick() -> None:
                    now_wall, now_cpu = time.perf_counter(), time.thread_time()
                    longest["cpu"] = max(longest["cpu"], now_cpu - last[1])
                    longest["wall"] = max(longest["wall"], now_wall - last[0])
                    last[:] = [now_wall, now_cpu]

                async def pinger() -> None:
                    while True:
                        await asyncio.sleep(0.005)
                        tick()

                watcher = asyncio.ensure_future(pinger())
                await asyncio.sleep(0.02)
                started = time.perf_counter()
                try:
                    size, refused = await _send(client, attack["method"], attack["params"])
                finally:
                    took = time.perf_counter() - started
                    tick()  # the stretch the attack ends in (one that held the loop throughout)
                    watcher.cancel()
        finally:
            await app.kernel.aclose()
    return {
        "loop_cpu_ms": longest["cpu"] * 1e3,
        "loop_wall_ms": longest["wall"] * 1e3,
        "took_s": took,
        "size": size,
        "refused": refused,
    }


def main() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    stage, attack = Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text(encoding="utf-8"))
    sys.path.insert(0, ".")
    try:
        out = asyncio.run(_run(stage, attack))
    except MemoryError:
        out = {"failed": "MemoryError (the address space cap)"}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
