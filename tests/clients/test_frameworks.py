"""Other agent frameworks reuse the server (issue 16), each in its own environment with its own `mcp`
SDK (`.ci/frameworks/<name>`, installed by `bash .ci/run`).

The strict-conversion invariant: every advertised input schema, in both schema forms and both name
styles, goes through the frameworks' own strict converters (openai-agents' `MCPUtil.to_function_tool(...,
convert_schemas_to_strict=True)`, pydantic-ai's OpenAI transformers, forced) with no fallback and no
refusal; the strict form is taken as it is (the converters change nothing, and pydantic-ai finds it
strict by itself).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from jsonschema import Draft202012Validator

from mnote_mcp.tools.budget import DEFAULT_MAX_RESULT_CHARS
from mnote_mcp.tools.catalog import ALL_TOOLS
from mnote_mcp.vocabulary.envelope import OUTPUT_SCHEMA
from tests.clients.frameworks.harness import (
    NODE,
    NODE_MODULES,
    framework_python,
    require_ts_sdk,
    run_in,
    run_ts,
)
from tests.clients.frameworks.stub_model import (
    FINAL,
    REFUSED,
    conversations,
    refusing_model,
    strict_model,
    tool_results,
)
from tests.clients.hermes.fake_model import Transcript, scripted_model
from tests.clients.hermes.harness import BIG_PAGE, big_page
from tests.support.grouping import sharing
from tests.support.helpers import FIXTURE, ROOT, connect, seeded_store, store_with_pages
from tests.support.http_helpers import RunningServer, http_server, write_tokens
from tests.support.timing import patience
from tests.support.tool_calls import calls, target

pytestmark = [pytest.mark.frameworks]

SETTINGS = {
    f"{form}/{style}": {"schema_form": form, "tool_names": style}
    for form in ("contract", "strict")
    for style in ("dotted", "underscore")
}


async def _listed(db: Path, **config: Any) -> list[dict[str, Any]]:
    async with connect(db, **config) as client:
        listing = await client.list_tools()
    return [tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in listing.tools]


@pytest.fixture(scope="module")
def listings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    db = seeded_store(tmp_path_factory.mktemp("listings") / "mnote.db")

    async def every_setting() -> dict[str, list[dict[str, Any]]]:
        return {label: await _listed(db, **config) for label, config in SETTINGS.items()}

    return anyio.run(every_setting)


def test_openai_agents_converts_every_schema_to_strict(listings: dict[str, list[dict[str, Any]]]) -> None:
    answers = run_in("openai-agents", "convert.py", "openai-agents", stdin=listings)
    for label, tools in listings.items():
        assert set(answers[label]) == {tool["name"] for tool in tools}
        for tool in tools:
            answer = answers[label][tool["name"]]["openai-agents"]
            said_once = label.startswith("contract/") and tool["name"] in (
                "mnote.page.save",
                "mnote_page_save",
            )
            if said_once:  # its blocks are said in insert's definition: an open item, no strict form
                # (docs/decisions.md, issue 35); the SDK then sends it as it is, and --schema-form strict,
                # what docs/clients.md has OpenAI-style hosts use, spells it out
                assert not answer["strict"] and "strict" in answer["error"], (label, answer)
                continue
            assert answer["strict"], (label, tool["name"], answer["error"])
            if label.startswith("strict/"):
                assert answer["schema"] == tool["inputSchema"], (
                    f"{label} {tool['name']}: converter changed it"
                )


def test_pydantic_ai_converts_every_schema_to_strict(listings: dict[str, list[dict[str, Any]]]) -> None:
    answers = run_in("pydantic-ai", "convert.py", "pydantic-ai", stdin=listings)
    for label, tools in listings.items():
        for tool in tools:
            for converter, answer in answers[label][tool["name"]].items():
                if converter.endswith("/forced") or label.startswith("strict/"):
                    assert answer["strict"], (label, tool["name"], converter, answer["error"])
                if label.startswith("strict/") and converter.endswith("/auto"):
                    assert answer["schema"] == tool["inputSchema"], (label, tool["name"], converter)


# -- end to end: each framework's own client layer, its model stubbed, over stdio, /mcp and /sse ------

EDITOR_TOKEN = "frameworks-editor-token-0123456789"
# What docs/clients.md tells each OpenAI-style framework to run the server with.
SERVE_FLAGS = ("--tool-names", "underscore", "--schema-form", "strict")
OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
TRANSPORTS = ("stdio", "http", "sse")


# What docs/clients.md tells a client that reads `structuredContent` (fastmcp's `data`, the TypeScript
# SDK's validation against `outputSchema`) to add: both forms, and `isError` on every refusal.
STRUCTURED_FLAGS = ("--result-form", "both", "--refusals", "error")


@dataclass
class Setting:
    db: Path
    server: RunningServer
    flags: tuple[str, ...] = ()

    def connections(self, framework: str, transports: tuple[str, ...] = TRANSPORTS) -> dict[str, Any]:
        """One connection per transport, as the framework's snippet configures it; each names its run
        (over HTTP with `X-Mnote-Run-Id`: without a session, nothing else joins a run's calls)."""
        found: dict[str, Any] = {}
        for transport in transports:
            label = f"{framework}-{transport}"
            if transport == "stdio":
                found[label] = {
                    "transport": "stdio",
                    "command": sys.executable,
                    "args": [
                        *("-m", "mnote_mcp", "--db", str(self.db), "--actor", "user_editor"),
                        *SERVE_FLAGS,
                        *self.flags,
                    ],
                    "env": {
                        "PATH": os.environ.get("PATH", ""),
                        "MNOTE_LOCALE": "en",
                        "MNOTE_TOOLSETS": "all",
                    },
                }
            else:
                endpoint = "/mcp" if transport == "http" else "/sse"
                found[label] = {
                    "transport": transport,
                    "url": self.server.url + endpoint,
                    "headers": {"Authorization": f"Bearer {EDITOR_TOKEN}", "X-Mnote-Run-Id": f"run-{label}"},
                }
        return found


@contextmanager
def setting(tmp_path: Path, *flags: str) -> Iterator[Setting]:
    """The test workspace, plus a 2,000-block page (issue 16 item 6: 218 KiB of text read whole)."""
    db = store_with_pages(tmp_path / "mnote.db", FIXTURE, big_page(2000))
    tokens = write_tokens(tmp_path / "tokens.json", {EDITOR_TOKEN: {"actorId": "user_editor"}})
    with http_server(db, "--auth-file", str(tokens), *SERVE_FLAGS, *flags) as server:
        yield Setting(db, server, flags)


@pytest.fixture(scope="module")
def agent_setting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setting]:
    """The setting the agent frameworks run in, made once for the module: each run is labelled by its
    framework and transport, and what is checked of it is found by its label or its own command."""
    with setting(tmp_path_factory.mktemp("agents")) as where:
        yield where


@pytest.fixture(scope="module")
def client_setting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setting]:
    """The setting the client libraries run in (docs/clients.md's flags for them), made once."""
    with setting(tmp_path_factory.mktemp("clients"), *STRUCTURED_FLAGS) as where:
        yield where


def audit_trail(db: Path) -> list[dict[str, Any]]:
    listed = subprocess.run(
        [sys.executable, "-m", "mnote_mcp", "audit", "--db", str(db), "--limit", "1000"],
        capture_output=True,
        text=True,
        timeout=patience(60),
        cwd=ROOT,
        check=True,
    )
    return [json.loads(line) for line in listed.stdout.splitlines() if line.strip()]


def strict_form_of(name: str) -> dict[str, Any]:
    spec = next(spec for spec in ALL_TOOLS if spec.advertised_name("underscore") == name)
    return spec.advertised_schema(strict=False, form="strict", style="underscore")


def output_schema_of(name: str) -> dict[str, Any]:
    """The tool's `outputSchema`: the envelope with its typed result (tools/outputs.py)."""
    return next(spec for spec in ALL_TOOLS if spec.advertised_name("underscore") == name).output_schema


def check_agent_runs(
    transcript: Transcript, db: Path, labels: list[str], *, strict: bool, every_tool: bool = True
) -> None:
    """What each run sent the model (tools, tool results) and what it left in the store's audit; the
    examples as written run the default selection (`every_tool=False`), the other runs every tool."""
    tools = [spec for spec in ALL_TOOLS if every_tool or spec.by_default]
    runs = conversations(transcript)
    assert sorted(runs) == sorted(labels), sorted(runs)
    records = audit_trail(db)
    for label in labels:
        requests = runs[label]
        offered = [tool["function"] for tool in requests[0]["tools"]]
        assert len(offered) == len(tools), (label, [tool["name"] for tool in offered])
        for function in offered:
            assert OPENAI_NAME.match(function["name"]), function["name"]
            assert "mnote." not in function.get("description", ""), function["name"]
            if strict:
                assert function.get("strict") is True, (label, function["name"])
                assert function["parameters"] == strict_form_of(function["name"]), (label, function["name"])
        read, dry_run, refusal, write, replay = tool_results(requests[-1])
        assert read and read["ok"] and read["toolName"] == "mnote_page_get", (label, read)
        assert dry_run and dry_run["result"]["dryRun"] is True, (label, dry_run)
        assert refusal and refusal["error"]["code"] == "mnote_tool_conflict", (label, refusal)
        assert write and write["audit"]["effect"] == "write", (label, write)
        assert replay and replay["result"]["idempotentReplay"] is True, (label, replay)
        mine = [r for r in records if write["audit"]["commandId"] in (r["commandId"], r.get("replayOf"))]
        assert len(mine) == 2, (label, mine)
        assert len({record["runId"] for record in mine}) == 1, (label, mine)
        assert len({record["toolCallId"] for record in mine}) == 2, (label, mine)
        if "-stdio" not in label:
            assert mine[0]["runId"] == f"run-{label}", mine


# The agent frameworks run over the transports their example (below) does not: every transport is
# covered once per framework, and each framework's interpreter starts twice, not three times.
_BESIDE_THE_EXAMPLE = {
    "openai-agents": ("stdio", "sse"),
    "pydantic-ai": ("http", "sse"),
    "langchain": ("http", "sse"),
}


def test_openai_agents_runs_an_agent_over_every_transport(agent_setting: Setting) -> None:
    where = agent_setting
    with scripted_model(strict_model) as (model_url, transcript):
        connections = where.connections("openai-agents", _BESIDE_THE_EXAMPLE["openai-agents"])
        answers = run_in(
            "openai-agents",
            "run_openai_agents.py",
            stdin={"model_url": model_url, "connections": connections},
            timeout=patience(400),
        )
    assert {label: answer["final"] for label, answer in answers.items()} == dict.fromkeys(connections, FINAL)
    check_agent_runs(transcript, where.db, list(connections), strict=True)


def test_pydantic_ai_runs_an_agent_over_every_transport(agent_setting: Setting) -> None:
    where = agent_setting
    with scripted_model(strict_model) as (model_url, transcript):
        connections = where.connections("pydantic-ai", _BESIDE_THE_EXAMPLE["pydantic-ai"])
        answers = run_in(
            "pydantic-ai",
            "run_pydantic_ai.py",
            stdin={"model_url": model_url, "connections": connections},
            timeout=patience(400),
        )
    assert {label: answer["final"] for label, answer in answers.items()} == dict.fromkeys(connections, FINAL)
    check_agent_runs(transcript, where.db, list(connections), strict=True)


def test_langchain_runs_an_agent_over_every_transport(agent_setting: Setting) -> None:
    """(stdio with one session is the example's.) Plus one run through `get_tools()` without a session,
    which starts a server per call over stdio:
    named by `MNOTE_RUN_ID` in its environment, its calls still join one run, and no two generated
    `toolCallId`s are the same (they used to be `call_<JSON-RPC id>`, `call_1` every time)."""
    where = agent_setting
    with scripted_model(strict_model) as (model_url, transcript):
        connections = where.connections("langchain", _BESIDE_THE_EXAMPLE["langchain"])
        per_call = dict(where.connections("langchain", ("stdio",))["langchain-stdio"], per_call=True)
        per_call["env"] = {**per_call["env"], "MNOTE_RUN_ID": "run-langchain-per-call"}
        connections["langchain-per-call"] = per_call
        answers = run_in(
            "langchain",
            "run_langchain.py",
            stdin={"model_url": model_url, "connections": connections},
            timeout=patience(400),
        )
    assert {label: answer["final"] for label, answer in answers.items()} == dict.fromkeys(connections, FINAL)
    check_agent_runs(transcript, where.db, list(connections), strict=True)


# -- client-level frameworks: fastmcp's Client and the TypeScript SDK's ------------------------------

_ENVELOPE = Draft202012Validator(OUTPUT_SCHEMA)


def client_calls(label: str) -> list[tuple[dict[str, Any], str]]:
    """Every registered tool once, its first example (tests/support/tool_calls.py) with writes as dry runs
    (a prior write for real), then refusals of three kinds, a long page's first piece, a write and its
    replay; with what each must answer: "read", "dry_run", "write", "replay", "piece" or an error code."""
    page = {"workspaceId": "ws_1", "documentId": "doc_1"}

    def write(dotted: str, key: str, dry_run: bool = True, **arguments: Any) -> dict[str, Any]:
        name = dotted.replace(".", "_")
        return {
            "name": name,
            "arguments": {**page, "idempotencyKey": f"{label}-{key}", "dryRun": dry_run, **arguments},
        }

    every_tool: list[tuple[dict[str, Any], str]] = []
    for spec in ALL_TOOLS:
        *before, (name, made) = calls(spec, target("doc_1"), label, dry_run=True, style="underscore")
        every_tool += [({"name": prior, "arguments": arguments}, "write") for prior, arguments in before]
        every_tool.append(({"name": name, "arguments": made}, "dry_run" if spec.writes else "read"))
    save: dict[str, Any] = {
        "content": [{"type": "paragraph", "text": f"written by {label}"}],
        "mode": "append",
    }
    return [
        *every_tool,
        ({"name": "mnote_page_get", "arguments": {**page, "documentId": BIG_PAGE}}, "piece"),
        ({"name": "mnote_page_get", "arguments": {"workspaceId": "ws_1"}}, "mnote_tool_invalid_argument"),
        (
            {"name": "mnote_page_get", "arguments": {**page, "documentId": "doc_secret"}},
            "mnote_tool_permission_denied",
        ),
        (
            write("mnote.page.update_title", "stale", dry_run=False, title="x", baseRevision=0),
            "mnote_tool_conflict",
        ),
        (write("mnote.page.save", "save", dry_run=False, **save), "write"),
        (write("mnote.page.save", "save", dry_run=False, **save), "replay"),
    ]


def check_client_runs(answers: dict[str, Any], db: Path, labels: list[str]) -> None:
    records = audit_trail(db)
    for label in labels:
        answer = answers[label]
        listed = {tool["name"]: tool for tool in answer["tools"]}
        assert sorted(listed) == sorted(spec.advertised_name("underscore") for spec in ALL_TOOLS), label
        for name, tool in listed.items():
            assert tool["inputSchema"] == strict_form_of(name), (label, name)
            assert tool["outputSchema"] == output_schema_of(name), (label, name)
        expected = [expectation for _, expectation in client_calls(label)]
        assert len(answer["results"]) == len(expected), label
        for result, expectation in zip(answer["results"], expected, strict=True):
            assert "thrown" not in result, (label, result)
            envelope = result["structuredContent"]
            assert not list(_ENVELOPE.iter_errors(envelope)), (label, envelope)
            assert envelope["toolName"] == result["name"], (label, envelope)
            assert result["isError"] is (not envelope["ok"]), (label, result)
            if expectation.startswith("mnote_tool_"):
                assert envelope["error"]["code"] == expectation, (label, envelope)
                assert "mnote." not in json.dumps(envelope["error"]), (label, envelope)
            elif expectation == "piece":  # within the default result budget, the rest by cursor
                assert envelope["ok"] and envelope["result"]["nextCursor"], (label, envelope["error"])
                assert (
                    len(json.dumps(envelope, ensure_ascii=False, separators=(",", ":")))
                    <= DEFAULT_MAX_RESULT_CHARS
                )
                assert max(len(text) for text in result["text"]) <= DEFAULT_MAX_RESULT_CHARS
            elif expectation == "replay":
                assert envelope["result"]["idempotentReplay"] is True, (label, envelope)
            else:
                assert envelope["ok"] and envelope["audit"]["effect"] == expectation, (label, envelope)
        write = answer["results"][-2]["structuredContent"]
        mine = [r for r in records if write["audit"]["commandId"] in (r["commandId"], r.get("replayOf"))]
        assert len(mine) == 2 and len({record["runId"] for record in mine}) == 1, (label, mine)
        if "-stdio" not in label:
            assert mine[0]["runId"] == f"run-{label}", (label, mine)


def test_fastmcp_client_over_every_transport(client_setting: Setting) -> None:
    where = client_setting
    connections = where.connections("fastmcp")
    for label, connection in connections.items():
        connection["calls"] = [call for call, _ in client_calls(label)]
    answers = run_in("fastmcp", "run_fastmcp.py", stdin={"connections": connections}, timeout=patience(300))
    check_client_runs(answers, where.db, list(connections))
    assert all(
        result["data"] for answer in answers.values() for result in answer["results"] if not result["isError"]
    )


def test_typescript_sdk_validates_every_result_against_the_output_schema(client_setting: Setting) -> None:
    where = client_setting
    connections = where.connections("ts")
    for label, connection in connections.items():
        connection["calls"] = [call for call, _ in client_calls(label)]
    answers = run_ts("ts_client.mjs", stdin={"connections": connections}, timeout=patience(300))
    check_client_runs(answers, where.db, list(connections))


# -- the examples, as written (docs/clients.md shows them verbatim) --------------------------------

EXAMPLES = ROOT / "examples"
DEMO_TOKEN = "frameworks-demo-token-0123456789"
# framework environment -> (example, the transport it is run over here)
AGENT_EXAMPLES = {
    "openai-agents": ("agents_openai.py", "http"),
    "pydantic-ai": ("agents_pydantic_ai.py", "stdio"),
    "langchain": ("agents_langchain.py", "stdio"),
}


def example_env(label: str, transport: str, db: Path, server: RunningServer, **extra: str) -> dict[str, str]:
    """What a user sets: the model endpoint, and where mnote is; nothing else of ours leaks in."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MNOTE_", "OPENAI_", "PYTHON"))}
    where = (
        {"MNOTE_URL": f"{server.url}/mcp", "MNOTE_TOKEN": DEMO_TOKEN}
        if transport == "http"
        else {"MNOTE_COMMAND": str(Path(sys.executable).parent / "mnote-mcp"), "MNOTE_DB": str(db)}
    )
    return {**clean, **where, "MNOTE_RUN_ID": f"run-{label}", **extra}


@contextmanager
def demo_setting(tmp_path: Path, *flags: str) -> Iterator[Setting]:
    db = store_with_pages(tmp_path / "demo.db", EXAMPLES / "workspace.json")
    tokens = write_tokens(tmp_path / "tokens.json", {DEMO_TOKEN: {"actorId": "user_1"}})
    # as a user starts it: the default selection (the test servers otherwise list every tool)
    with http_server(
        db, "--auth-file", str(tokens), *SERVE_FLAGS, *flags, env={"MNOTE_TOOLSETS": ""}
    ) as server:
        yield Setting(db, server, flags)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setting]:
    """The examples' setting as a user starts it, made once for the module's runs of the examples
    (each labelled by its own `MNOTE_RUN_ID`)."""
    with demo_setting(tmp_path_factory.mktemp("demo")) as where:
        yield where


def test_the_agent_examples_work_as_written(tmp_path: Path, demo: Setting) -> None:
    labels = []
    where = demo
    with scripted_model(strict_model) as (model_url, transcript):
        for framework, (example, transport) in AGENT_EXAMPLES.items():
            label = f"example-{framework}-{transport}"
            labels.append(label)
            model = {"OPENAI_BASE_URL": model_url, "OPENAI_API_KEY": "stub", "MNOTE_MODEL": "scripted-model"}
            ran = subprocess.run(
                [str(framework_python(framework)), str(EXAMPLES / example), f"run {label}"],
                env=example_env(label, transport, where.db, where.server, **model),
                capture_output=True,
                text=True,
                timeout=patience(300),
                cwd=tmp_path,
            )
            assert ran.returncode == 0, (example, ran.stderr[-3000:])
            assert ran.stdout.strip().endswith(FINAL), (example, ran.stdout[-500:])
    check_agent_runs(transcript, where.db, labels, strict=True, every_tool=False)


@pytest.mark.parametrize("refusals", [pytest.param("default", marks=sharing(__file__, "demo")), "error"])
def test_the_pydantic_ai_example_goes_on_after_ordinary_refusals(
    tmp_path: Path, refusals: str, request: pytest.FixtureRequest
) -> None:
    """Issue 22: pydantic-ai spends a retry on every `isError` result (one by default), so with
    refusals as errors its example ended after the second ordinary refusal in a row
    (`UnexpectedModelBehavior`). By default a refusal is an ok:false result: the model reads its code
    and hint, tries something else, and the run goes on."""
    with ExitStack() as stack:
        if refusals == "error":
            where = stack.enter_context(demo_setting(tmp_path, "--refusals", "error"))
        else:
            where = request.getfixturevalue("demo")  # the examples' shared setting: refusals as results
        model_url, transcript = stack.enter_context(scripted_model(refusing_model))
        label = f"refusals-{refusals}"
        model = {"OPENAI_BASE_URL": model_url, "OPENAI_API_KEY": "stub", "MNOTE_MODEL": "scripted-model"}
        ran = subprocess.run(
            [str(framework_python("pydantic-ai")), str(EXAMPLES / "agents_pydantic_ai.py"), f"run {label}"],
            env=example_env(label, "http", where.db, where.server, **model),
            capture_output=True,
            text=True,
            timeout=patience(300),
            cwd=tmp_path,
        )
    if refusals == "error":
        assert ran.returncode != 0 and "UnexpectedModelBehavior" in ran.stderr, ran.stderr[-2000:]
        return
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.strip().endswith(REFUSED), ran.stdout[-500:]
    (requests,) = conversations(transcript).values()
    seen = tool_results(requests[-1])
    codes = [(envelope or {}).get("error", {}) for envelope in seen]
    assert [code.get("code") if code else None for code in codes] == [
        "mnote_tool_not_found",
        "mnote_tool_permission_denied",
        "mnote_tool_conflict",
        None,
    ]
    assert codes[2]["hint"] and codes[2]["retryable"] is False


def test_the_client_examples_work_as_written(tmp_path: Path, demo: Setting) -> None:
    require_ts_sdk()
    ts_dir = tmp_path / "ts"
    ts_dir.mkdir()
    (ts_dir / "node_modules").symlink_to(NODE_MODULES)
    shutil.copy(EXAMPLES / "client_typescript.mjs", ts_dir)
    where = demo
    runs = {
        "fastmcp-http": [str(framework_python("fastmcp")), str(EXAMPLES / "client_fastmcp.py")],
        "ts-stdio": [str(NODE), str(ts_dir / "client_typescript.mjs")],
    }
    for label, argv in runs.items():
        transport = label.split("-")[1]
        ran = subprocess.run(
            [*argv, "ws_1", "doc_1"],
            env=example_env(label, transport, where.db, where.server),
            capture_output=True,
            text=True,
            timeout=patience(300),
            cwd=tmp_path,
        )
        assert ran.returncode == 0, (label, ran.stderr[-3000:])
        read, dry_run = (json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{"))
        assert read["ok"] and read["result"]["title"] == "Project plan", (label, read)
        assert dry_run["ok"] and dry_run["result"]["dryRun"] is True, (label, dry_run)


def test_the_docs_show_the_examples_verbatim() -> None:
    """docs/clients.md includes every example file as it is, so the tested code is the shown code."""
    doc = (ROOT / "docs" / "clients.md").read_text(encoding="utf-8")
    shown = re.findall(
        r"<!-- example: examples/(\S+) -->\n```\w+\n(.*?)```\n<!-- end of example -->", doc, re.S
    )
    assert {name for name, _ in shown} == {
        *(example for example, _ in AGENT_EXAMPLES.values()),
        "client_fastmcp.py",
        "client_typescript.mjs",
    }
    for name, text in shown:
        assert text == (EXAMPLES / name).read_text(encoding="utf-8"), f"docs/clients.md: {name} differs"
