"""Searches in a process short of file descriptors (run by tests/unit/kernel/sqlite/test_pool.py as
`python -m tests.support.fd_limit DB ROUNDS` under a low `RLIMIT_NOFILE`).

Prints one JSON line per phase, `[phase, [answer, ...]]`, an answer being `ok` or `code:retryable|final`:
`churn` (ROUNDS event loops, each with worker threads of its own that end with it, four searches
each), `exhausted` (every free descriptor taken and every idle pooled connection held, so a search must
open a connection), `recovered` (descriptors and connections given back).
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from mnote_mcp.app import App, build_registry
from mnote_mcp.calls.dispatch import Dispatcher
from mnote_mcp.config import ServerConfig
from mnote_mcp.kernel.sqlite.opening import open_store
from mnote_mcp.kernel.store.kernel import StoreKernel
from tests.support.helpers import IDS, envelope_of

SEARCHES = 4


def answer(envelope: dict[str, Any]) -> str:
    if envelope["ok"]:
        return "ok"
    error = envelope["error"]
    return f"{error['code']}:{'retryable' if error['retryable'] else 'final'}"


def take_every_descriptor() -> list[int]:
    taken: list[int] = []
    while True:
        try:
            taken.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            return taken


def main(db: Path, rounds: int) -> None:
    config = ServerConfig(db=db, locale="en", demo=False, actor="user_editor")
    registry = build_registry(config)
    store = open_store(db)

    def app() -> App:
        kernel = StoreKernel(store)  # per event loop: its thread limiter belongs to one loop
        return App(config, kernel, Dispatcher(registry, kernel, locale="en"), str(db))

    async def searches(client: Client, concurrently: bool) -> list[str]:
        found: list[str] = []

        async def one() -> None:
            result = await client.call_tool("mnote.page.search", {"query": "plan", **IDS})
            found.append(answer(envelope_of(result)))

        if not concurrently:
            for _ in range(SEARCHES):
                await one()
            return found
        async with anyio.create_task_group() as group:
            for _ in range(SEARCHES):
                group.start_soon(one)
        return found

    async def churn_round() -> list[str]:
        async with Client(app().server()) as client:
            return await searches(client, concurrently=True)

    churn: list[str] = []
    for _ in range(rounds):
        churn += anyio.run(churn_round)
    print(json.dumps(["churn", churn]), flush=True)

    async def exhausted_then_recovered() -> tuple[list[str], list[str]]:
        pool = store.dialect.database.pool  # type: ignore[attr-defined]
        async with Client(app().server()) as client:
            with ExitStack() as held:
                for _ in range(pool.idle):
                    held.callback(pool.give_back, pool.lend())
                for fd in take_every_descriptor():
                    held.callback(os.close, fd)
                exhausted = await searches(client, concurrently=False)
            return exhausted, await searches(client, concurrently=True)

    exhausted, recovered = anyio.run(exhausted_then_recovered)
    print(json.dumps(["exhausted", exhausted]), flush=True)
    print(json.dumps(["recovered", recovered]), flush=True)
    store.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
