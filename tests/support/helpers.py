"""Shared test plumbing: servers on a seeded store, calls that check every envelope they get back."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any, cast

from jsonschema import Draft202012Validator
from mcp import Client, StdioServerParameters
from mcp.types import RequestParamsMeta

from mnote_mcp.app import App, build_registry
from mnote_mcp.calls.dispatch import Dispatcher
from mnote_mcp.calls.fairshare import FairShare
from mnote_mcp.config import ServerConfig
from mnote_mcp.kernel.databases.stores import open_kernel, open_store
from mnote_mcp.kernel.store.fixtures import load_fixture, read_fixture
from mnote_mcp.kernel.store.kernel import StoreKernel
from mnote_mcp.surface.delivery import CALLER_REFUSALS
from mnote_mcp.tools.toolsets import Toolset
from mnote_mcp.vocabulary.envelope import OUTPUT_SCHEMA
from tests.support.timing import patience, patience_ms

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
FIXTURE = FIXTURES / "workspace.json"
SECRETS = ("SECRET-TITLE-7f3a", "SECRET-BODY-91c2", "OTHER-SECRET-TITLE-c0de", "OTHER-SECRET-BODY-beef")
MODES = ("legacy", "auto")
_ENVELOPE = Draft202012Validator(OUTPUT_SCHEMA)

_CALLER_REFUSALS = frozenset(code.value for code in CALLER_REFUSALS)
IDS = {"sessionId": "sess_t", "runId": "run_t", "toolCallId": "call_t", "traceId": "trace_t"}
# The handshake a raw JSON-RPC client (no SDK) opens with.
RAW_INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


def seeded_store(path: Path) -> Path:
    """A new store at `path` holding the fixture workspace: a copy of one seeded once per test process
    (SQLite's backup, 0.2 ms where seeding took 7 ms, and a thousand tests ask); a store that exists
    already is seeded as it is."""
    if path.exists():
        return _seeded(path, read_fixture(FIXTURE))
    with closing(sqlite3.connect(_seeded_template())) as source, closing(sqlite3.connect(path)) as copy:
        source.backup(copy)
    return path


@cache
def _seeded_template() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="mnote-seeded-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return _seeded(folder / "seeded.db", read_fixture(FIXTURE))


def store_with_pages(path: Path, fixture: Path, *pages: dict[str, Any]) -> Path:
    """A store seeded from a fixture file, with more pages in the fixture's first workspace."""
    data = json.loads(fixture.read_text(encoding="utf-8"))
    data["workspaces"][0]["pages"] += list(pages)
    return _seeded(path, data)


def _seeded(path: Path, data: dict[str, Any]) -> Path:
    store = open_store(path)
    try:
        load_fixture(store, data)
    finally:
        store.close()
    return path


def list_page(document_id: str, lists: int) -> dict[str, Any]:
    """A fixture page of `lists` list blocks `l00000`, ... with a child paragraph `c00000`, ... each:
    `2 * lists` blocks on two levels (20,000 with 10,000: a page at the default limit)."""
    return {
        "id": document_id,
        "title": f"{2 * lists} blocks",
        "blocks": [
            {
                "id": f"l{index:05d}",
                "type": "bulleted_list",
                "text": f"item {index}",
                "children": [{"id": f"c{index:05d}", "type": "paragraph", "text": "under it"}],
            }
            for index in range(lists)
        ],
    }


def list_page_ids(lists: int) -> list[str]:
    """Every block id of `list_page(..., lists)`, in document order."""
    return [block_id for index in range(lists) for block_id in (f"l{index:05d}", f"c{index:05d}")]


def dump(path: Path | str, *, audit: bool = True) -> str:
    """Every row of the store (SQLite or PostgreSQL) as SQL; `audit=False` leaves out the audit log (a
    replay adds a record of the retry there, and nothing anywhere else)."""
    store = open_store(path)
    try:
        text = store.dump()
    finally:
        store.close()
    if audit:
        return text
    return "\n".join(line for line in text.splitlines() if not line.startswith('INSERT INTO "audit"'))


# The unit tests inspect both forms of every result and `isError` on every refusal: they run the
# server in the spec's fullest form. What each setting sends, the defaults included, is
# tests/unit/surface/test_delivery.py's; the end-to-end tests run the defaults.
SPEC_FORM: dict[str, Any] = {"refusals": "error", "result_form": "both"}
# In-process servers of the unit tests send calls as fast as a test can: no per-actor rates and no rest
# after expensive calls unless a test asks (tests/unit/calls/test_fairshare.py); the admission's places and
# turns stay as served.
UNLIMITED: dict[str, Any] = {"call_limits": False, "expensive_share": 1.0}
# A tool's own behaviour is tested apart from asking the person first: a client of these tests that
# declares no elicitation has its destructive writes made (and audited `consent: fallback`), as
# before issue 31. The tests of consent say what they run with (tests/unit/calls/test_confirmation.py).
UNASKED: dict[str, Any] = {"confirm_fallback": "write"}
# ... and with every tool, the three left out of the default selection too (`--toolsets all`); the
# default selection's own tests (tests/unit/tools/test_selection.py) ask for `toolsets=frozenset()`.
EVERY_TOOL: dict[str, Any] = {"toolsets": frozenset(Toolset)}


def make_app(db: Path | str, **config: Any) -> App:
    base = ServerConfig(
        db=db, locale="en", demo=False, actor="user_editor", **SPEC_FORM, **UNLIMITED, **UNASKED, **EVERY_TOOL
    )
    cfg = replace(base, **config)
    kernel = (
        open_kernel(db, demo=False, limits=cfg.page_limits)
        if isinstance(db, str)
        else StoreKernel(open_store(db, limits=cfg.page_limits))  # tests swap `StoreKernel` here
    )
    dispatcher = Dispatcher(
        build_registry(cfg),
        kernel,
        locale=cfg.locale,
        read_only=cfg.read_only,
        call_timeout=cfg.call_timeout,
        max_result_chars=cfg.max_result_chars,
        max_argument_depth=cfg.max_argument_depth,
        confirmation=cfg.confirmation,
        fair=FairShare(cfg.call_limit_of, requests=cfg.requests_limit, admission=cfg.admission_bounds),
    )
    return App(config=cfg, kernel=kernel, dispatcher=dispatcher, store_description=str(db))


@asynccontextmanager
async def connect(
    db: Path | str,
    mode: str = "legacy",
    *,
    message_handler: Any = None,
    elicitation_callback: Any = None,
    **config: Any,
) -> AsyncIterator[Client]:
    app = make_app(db, **config)
    try:
        async with Client(
            app.server(),
            mode=mode,
            message_handler=message_handler,
            elicitation_callback=elicitation_callback,
        ) as client:
            yield client
    finally:
        await app.kernel.aclose()


def envelope_of(result: Any) -> dict[str, Any]:
    """The envelope of a CallToolResult, in whichever result form it came, after checking the promises
    every result keeps: one text block of the envelope's JSON (unless `structured`), the same JSON as
    `structuredContent` where that is present, `isError` on failures (on every one with
    `--refusals error`, on real failures only by default)."""
    if result.content:
        assert len(result.content) == 1 and result.content[0].type == "text"
        envelope: dict[str, Any] = json.loads(result.content[0].text)
        if result.structured_content is not None:
            assert result.structured_content == envelope, "text content is the same JSON"
    else:
        assert result.structured_content is not None, "a result without text is structured"
        envelope = result.structured_content
    errors = [e.message for e in _ENVELOPE.iter_errors(envelope)]
    assert not errors, errors
    if envelope["ok"]:
        assert result.is_error is False
    elif envelope["error"]["code"] not in _CALLER_REFUSALS:
        assert result.is_error is True, "a real failure is an isError result in every setting"
    return envelope


def envelope_in(result: dict[str, Any]) -> dict[str, Any]:
    """The envelope in a raw JSON-RPC `tools/call` result (a dict), whichever form it came in."""
    if result.get("content"):
        envelope: dict[str, Any] = json.loads(result["content"][0]["text"])
        return envelope
    return dict(result["structuredContent"])


async def call(
    client: Client, tool: str, meta: dict[str, Any] | None = None, **arguments: Any
) -> dict[str, Any]:
    return envelope_of(await client.call_tool(tool, arguments, meta=cast(RequestParamsMeta | None, meta)))


def page_args(document_id: str = "doc_1", workspace_id: str = "ws_1", **extra: Any) -> dict[str, Any]:
    return {"workspaceId": workspace_id, "documentId": document_id, **IDS, **extra}


def write_args(key: str, dry_run: bool = False, document_id: str = "doc_1", **extra: Any) -> dict[str, Any]:
    return page_args(document_id, idempotencyKey=key, dryRun=dry_run, **extra)


# The servers tests start as processes select every tool too (as `EVERY_TOOL` in process); a test of the
# default selection sets `MNOTE_TOOLSETS` itself ("" is the default), and a flag wins over it.
EVERY_TOOL_ENV: dict[str, str] = {"MNOTE_TOOLSETS": "all"}


def every_tool_env(root: Path = ROOT) -> dict[str, str]:
    """`EVERY_TOOL_ENV` for a server of the checkout at `root` (a benchmark's baseline may be another)
    if that code knows the toolset `all`; nothing for one that does not (2f7f760 and older serve every
    tool and refuse `all`). Asked of the code itself: a baseline as new as this checkout selects like it."""
    if Path(root).resolve() == ROOT.resolve():
        return EVERY_TOOL_ENV
    toolsets = Path(root) / "mnote_mcp" / "tools" / "toolsets.py"
    knows_all = toolsets.is_file() and '== "all"' in toolsets.read_text(encoding="utf-8")
    return EVERY_TOOL_ENV if knows_all else {}


def stdio_params(db: Path | str, *args: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "mnote_mcp", "serve", "--db", str(db), "--locale", "en", *args],
        env={**os.environ, "PYTHONUNBUFFERED": "1", **EVERY_TOOL_ENV, **(env or {})},
        cwd=str(ROOT),
    )


async def basic_path(client: Client) -> list[dict[str, Any]]:
    """page get -> dry run -> save -> idempotent retry, with fixed correlation ids."""
    block = [{"type": "paragraph", "text": "over the wire"}]
    get = await call(client, "mnote.page.get", **page_args())
    revision = get["result"]["revision"]
    plan = await call(
        client, "mnote.page.save", **write_args("path", dry_run=True, content=block, mode="append")
    )
    save = await call(
        client, "mnote.page.save", **write_args("path", content=block, mode="append", baseRevision=revision)
    )
    retry = await call(
        client, "mnote.page.save", **write_args("path", content=block, mode="append", baseRevision=revision)
    )
    return [get, plan, save, retry]


def comparable(envelope: dict[str, Any]) -> dict[str, Any]:
    """An envelope with its one non-deterministic part (the commandId's nonce) blanked."""
    copy: dict[str, Any] = json.loads(json.dumps(envelope))
    command_id = (copy.get("audit") or {}).get("commandId")
    if command_id:
        copy["audit"]["commandId"] = command_id.rsplit("_", 1)[0]
    return copy


INSPECTOR = ROOT / ".ci" / "node" / "node_modules" / ".bin" / "mcp-inspector"
# Seconds the Inspector gives a server to start and answer its connection (its own default is 15 s,
# which mnote-mcp's start exceeded on a machine at load 16 to 22), before patience().
INSPECTOR_CONNECT = 30


def inspector(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """The MCP Inspector CLI (`bash .ci/run` installs it under .ci/node); HOME is a temp folder."""
    import pytest

    if not INSPECTOR.exists():
        if os.environ.get("MNOTE_REQUIRE_INSPECTOR") == "1":
            pytest.fail(f"the MCP Inspector CLI is not installed at {INSPECTOR}")
        pytest.skip("the MCP Inspector CLI is not installed (bash .ci/run installs it)")
    return subprocess.run(
        [str(INSPECTOR), "--cli", "--connect-timeout", patience_ms(INSPECTOR_CONNECT), *args],
        capture_output=True,
        text=True,
        timeout=patience(90),
        cwd=ROOT,
        env={**os.environ, "HOME": str(home)},
    )


def run_cli(
    *args: str, env: dict[str, str] | None = None, root: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    """`python -m mnote_mcp ARGS` as a user runs it: no `MNOTE_*` variable but those in `env`, no stdin;
    `root` is the checkout whose code runs (another release's tree, say)."""
    clean = {key: value for key, value in os.environ.items() if not key.startswith("MNOTE_")}
    return subprocess.run(
        [sys.executable, "-m", "mnote_mcp", *args],
        capture_output=True,
        text=True,
        timeout=patience(60),
        cwd=root,
        env={**clean, **(env or {})},
        stdin=subprocess.DEVNULL,
    )
