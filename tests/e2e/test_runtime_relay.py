"""The MCP path end to end through a relay: `mnote-mcp --kernel http://...` (and `cli:...`) over stdio
gives the envelopes the embedded kernel gives, and the runtime receives the envelope's trace and key.

The demo tour (page get → dryRun → save → retry → conflict → options → summary → ai note → refusal)
runs once on a local store and once per relay, each on a new store seeded with the demo workspace;
the envelopes must match exactly, but for the random part of each commandId.
"""

from __future__ import annotations

import ast
import difflib
import json
import os
import pprint
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from mnote_mcp.base.tracecontext import trace_id_of, w3c_trace_id
from mnote_mcp.demo import tour
from mnote_mcp.kernel.protocol import decode_key
from mnote_mcp.kernel.sqlite.opening import open_store
from mnote_mcp.tools.catalog import ALL_TOOLS
from tests.support.helpers import EVERY_TOOL_ENV, RAW_INITIALIZE, ROOT, envelope_in
from tests.support.runtimes import free_port, mnote_command, reference_runtime
from tests.support.timing import patience

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
TIMEOUT = patience(60)
_COMMAND_ID = re.compile(r"((?:page|artifact)_[a-z_]+_trace_demo)_[0-9a-f]{8}")


def params(*args: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "mnote_mcp", "serve", "--locale", "en", "--log-level", "warning", *args],
        env={**os.environ, "PYTHONUNBUFFERED": "1", **EVERY_TOOL_ENV, **(env or {})},
        cwd=str(ROOT),
    )


_TIMES = re.compile(r"'(updatedAt|createdAt)': '[^']+'")


def without_nonces(envelopes: list[dict[str, Any]]) -> str:
    """The envelopes without what differs from one run to the next: command ids' nonces, and the
    times a search hit and a history entry name (the tour searches and reads history since issue 35)."""
    return _TIMES.sub(r"'\1': '…'", _COMMAND_ID.sub(r"\1", repr(envelopes)))


def assert_same_envelopes(relayed: list[dict[str, Any]], local: list[dict[str, Any]]) -> None:
    """Equal but for nonces and times; where not, the lines that differ (a flake under load once
    showed only the first 8,700 equal characters of one long line)."""
    left, right = without_nonces(relayed), without_nonces(local)
    if left != right:
        expected, got = (
            pprint.pformat(ast.literal_eval(text), width=110).splitlines() for text in (right, left)
        )
        diff = difflib.unified_diff(expected, got, "local", "relayed", lineterm="", n=3)
        pytest.fail("the relay's envelopes differ from the local kernel's:\n" + "\n".join(diff))


async def run_tour(server: StdioServerParameters, db: Path) -> list[dict[str, Any]]:
    async with Client(server, read_timeout_seconds=TIMEOUT) as client:
        return await tour(client, db)


@pytest.fixture(scope="module")
def local_envelopes(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The tour on the local kernel (a fresh demo store), made once: each relay is compared with it."""
    db = tmp_path_factory.mktemp("local") / "local.db"
    return anyio.run(run_tour, params("--db", str(db), "--demo"), db)


async def test_http_relay_gives_the_local_envelopes(
    tmp_path: Path, local_envelopes: list[dict[str, Any]]
) -> None:
    db = tmp_path / "runtime.db"
    with reference_runtime(db, tmp_path, demo=True, token="tok-e2e") as runtime:
        server = params("--kernel", runtime.url, env={"MNOTE_RUNTIME_TOKEN": "tok-e2e\n"})
        relayed = await run_tour(server, db)
        records = runtime.records()
    assert len(relayed) == len(local_envelopes) >= 9
    assert_same_envelopes(relayed, local_envelopes)
    assert relayed[2]["audit"]["commandId"] != local_envelopes[2]["audit"]["commandId"], "two stores"

    # What the runtime received: the envelope's trace as W3C trace context, the envelope's key.
    commands = [r for r in records if r["path"] == "/v1/commands"]
    writing = {spec.name for spec in ALL_TOOLS if spec.writes}
    writes = [e for e in relayed if e["toolName"] in writing]
    assert len(commands) == len(writes)
    keys = [decode_key(r["idempotencyKey"]) for r in commands]
    assert keys[:4] == ["demo_save", "demo_save", "demo_save", "demo_title"]
    assert all(key.startswith("demo_") for key in keys)
    assert all(r["authorization"] for r in records if r["path"] != "/v1/health")
    # every call of the tour reached the runtime, traced: its reads, writes, search and history
    asked = ("/v1/commands", "/v1/pages/query", "/v1/pages/search", "/v1/pages/history")
    traced = [r for r in records if r["path"] in asked]
    assert len(traced) == len(relayed), [r["path"] for r in traced]
    # and the text edit that named its page by title found it by a listing of that name (issue 35)
    named = [r for r in records if r["path"] == "/v1/pages" and r["query"].get("named")]
    assert [r["query"]["named"] for r in named] == ["Project plan"], [r["query"] for r in records]
    assert {trace_id_of(r["traceparent"]) for r in traced} == {w3c_trace_id("trace_demo")}
    store = open_store(db)
    try:
        trail = store.audit_trail(trace_id="trace_demo")
    finally:
        store.close()
    committed = [
        e["audit"]["commandId"]
        for e in relayed
        if e["ok"] and e["audit"]["effect"] == "write" and not e["result"].get("idempotentReplay")
    ]
    assert [r["commandId"] for r in trail if r["effect"] == "write"] == committed, (
        "every commandId the tools returned is a runtime audit record"
    )


async def test_cli_relay_gives_the_local_envelopes(
    tmp_path: Path, local_envelopes: list[dict[str, Any]]
) -> None:
    db = tmp_path / "cli.db"  # new: the reference adapter seeds the demo workspace on first use
    kernel = "cli:" + shlex.join(mnote_command("runtime", "cli", "--db", str(db), "--demo"))
    relayed = await run_tour(params("--kernel", kernel), db)
    assert_same_envelopes(relayed, local_envelopes)


def test_a_relay_server_starts_without_its_runtime_and_keeps_stdout_clean(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    requests = [
        RAW_INITIALIZE,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "mnote.page.get", "arguments": {"workspaceId": "ws_1", "documentId": "doc_1"}},
        },
    ]
    proc = subprocess.run(
        mnote_command(
            "serve", "--kernel", dead, "--db", str(tmp_path / "unused.db"), "--runtime-retries", "0"
        ),
        input="".join(json.dumps(r) + "\n" for r in requests),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=ROOT,
        env={**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")},  # no runtime-token of this machine's
    )
    messages = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert [m["id"] for m in messages] == [1, 2], proc.stderr
    envelope = envelope_in(messages[1]["result"])
    assert envelope["error"]["code"] == "mnote_tool_runtime_unavailable" and envelope["error"]["retryable"]
    assert f"kernel=http store={dead} (no token)" in proc.stderr
    assert "workspaces=unknown (kernel: mnote_tool_runtime_unavailable connect)" in proc.stderr
    assert not (tmp_path / "unused.db").exists(), "a relay opens no local store"


def test_the_stdio_server_on_the_local_kernel_loads_no_relay_code() -> None:
    code = (
        "import sys, mnote_mcp.serve, mnote_mcp.cli;"
        "print(sorted(m for m in sys.modules if m.startswith(('mnote_mcp.kernel.relays.http', 'mnote_mcp.kernel.relays.cli',"
        " 'mnote_mcp.kernel.protocol', 'mnote_mcp.runtime'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_cli_adapter_starts_without_the_mcp_sdk() -> None:
    """`runtime cli` runs once per call: it must not pay for importing the MCP SDK, nor pydantic (the
    wire forms are read and their schemas kept without it: kernel/port.py, kernel/schemas.py). Its
    command line parsed too: issue 33's merge had every parse load the tool declarations for one
    default's words in --help (`runtime cli` 0.15 → 1.2 CPU seconds a call)."""
    code = (
        "import sys, mnote_mcp.cli, mnote_mcp.runtime.cli_adapter, mnote_mcp.kernel.relays.http, mnote_mcp.kernel.relays.cli;"
        "mnote_mcp.cli.parse(['runtime', 'cli'], {});"
        "print([name for name in ('mcp', 'pydantic') if name in sys.modules])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# What `runtime cli` may load to answer a request: the kernel and the runtime, the base under them.
# The call path, the MCP surface, the transports and the conformance kit are the MCP server's.
NOT_FOR_ONE_REQUEST = (
    "mnote_mcp.calls",
    "mnote_mcp.tools",
    "mnote_mcp.surface",
    "mnote_mcp.transports",
    "mnote_mcp.conformance",
    "mnote_mcp.vocabulary",
    "mcp",
    "pydantic",
)


def _imported_answering(db: Path, *flags: str) -> set[str]:
    """Every module `runtime cli` imported to answer a `list_pages` request on `db`: it answers under
    `-X importtime`, whose lines on stderr name every module the process imported."""
    result = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            *mnote_command("runtime", "cli", "--db", str(db), *flags)[1:],
        ],
        input=json.dumps({"version": 1, "op": "list_pages", "actorId": "user_1"}).encode(),
        capture_output=True,
        timeout=TIMEOUT,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["value"][0]["documentId"] == "doc_1"
    return {
        line.rsplit("|", 1)[1].strip()
        for line in result.stderr.decode().splitlines()
        if line.startswith("import time:")
    }


def _within(imported: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(
        module
        for module in imported
        for package in packages
        if module == package or module.startswith(package + ".")
    )


def test_runtime_cli_answers_a_request_loading_only_the_kernel(tmp_path: Path) -> None:
    """Issue 33: `--kernel cli:` starts `runtime cli` once per call, and the tests hundreds of times;
    every package it imports is CPU paid on each call. It answers a real request here (the command line
    parsed, the store opened and seeded, the reply written)."""
    imported = _imported_answering(tmp_path / "one.db", "--demo")
    assert "mnote_mcp.kernel.store.kernel" in imported, "the kernel answered"
    assert _within(imported, NOT_FOR_ONE_REQUEST) == []


# What a read needs no more than the MCP server's packages: `runtime cli` answers one call at once on
# its own thread (`one_call`), so no event loop; a read plans no write (no command declarations, nor
# the group commit that writes them together, nor the planning and history a write records), searches
# nothing (no search index) and makes no id (no `secrets`).
NOT_FOR_ONE_READ = (
    "asyncio",
    "anyio",
    "mnote_mcp.kernel.store.group",
    "mnote_mcp.kernel.store.commands",
    "mnote_mcp.kernel.store.plan",
    "mnote_mcp.kernel.store.history",
    "mnote_mcp.kernel.store.search",
    "mnote_mcp.kernel.sqlite.search",
    "secrets",
    "mnote_mcp.base.secretfiles",
)


def test_runtime_cli_answers_a_read_without_an_event_loop_nor_the_write_and_search_code(
    tmp_path: Path,
) -> None:
    """Issue 33: a read by `runtime cli` on a store already seeded (the common call of a `cli:`
    relay) loads neither asyncio nor anyio, nor what only writes and searches use: 0.265 → 0.175 CPU
    seconds a call when measured (docs/testing.md). Seeding (the first call) writes: a call of its own."""
    db = tmp_path / "one.db"
    _imported_answering(db, "--demo")
    imported = _imported_answering(db, "--no-demo")
    assert "mnote_mcp.kernel.store.store" in imported, "the store answered"
    assert _within(imported, NOT_FOR_ONE_REQUEST + NOT_FOR_ONE_READ) == []
