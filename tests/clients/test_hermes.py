"""The real Hermes (hermes-agent 0.19.0) on the shipped example configurations, over stdio, `/mcp` and
`/sse`: what its model is given, one call of every tool, refusals that do not cut the server off, an
idempotent retry, pieces of a long page within Hermes's result limit, and its whole agent loop
(`hermes chat -q`) against a scripted model, checked in the store and the audit trail.

`bash .ci/run` installs Hermes into `.ci/hermes` and sets MNOTE_REQUIRE_HERMES=1; elsewhere these
tests are skipped when that environment is absent.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mnote_mcp.tools.catalog import ALL_TOOLS
from mnote_mcp.tools.examples import Target
from mnote_mcp.tools.registry import ToolSpec
from mnote_mcp.tools.schemas import SCHEMA_FORMS, SchemaForm
from mnote_mcp.tools.sizes import (
    HERMES_UTILITY_TOOLS,
    definition_bytes,
    function_definition,
    utility_tool_bytes,
)
from tests.clients.consent_scenario import (
    ASKED,
    DELETED_THEN_UNDONE,
    HELD,
    KEPT,
    PLANTED,
    TARGET,
    TARGET_PAGE,
    consent_model,
    outcome,
)
from tests.clients.consent_scenario import audit_trail as consent_trail
from tests.clients.hermes.fake_model import ToolCall, Transcript, Turn, _text, scripted_model
from tests.clients.hermes.harness import (
    ADDRESS_PLACEHOLDER,
    BIG_PAGE,
    BIG_PAGE_BLOCKS,
    COMMAND_PLACEHOLDER,
    DB_PLACEHOLDER,
    HERMES_PYTHON,
    HERMES_RESULT_LIMIT,
    MNOTE_COMMAND,
    HermesDriver,
    big_page,
    compact,
    demo_store,
    environment_probe_off,
    example_config,
    example_serve_command,
    failure_seen,
    hermes_driver,
    hermes_result_limit,
    model_name,
    model_section,
    payload,
    require_hermes,
    run_agent_loop,
    unwrap,
    write_home,
)
from tests.support.grouping import sharing
from tests.support.helpers import ROOT
from tests.support.http_helpers import RunningServer, http_server, write_tokens
from tests.support.runtimes import free_port
from tests.support.timing import patience
from tests.support.tool_calls import calls

pytestmark = [pytest.mark.hermes, pytest.mark.e2e]

EDITOR_TOKEN = "hermes-editor-token-0123456789"
VIEWER_TOKEN = "hermes-viewer-token-0123456789"
STDIO, HTTP, SSE = "mnote", "mnote-http", "mnote-sse"
SERVER_KEYS = (STDIO, HTTP, SSE)
# One copy of the envelope: what the model reads may exceed the envelope's compact JSON only by
# Hermes's own wrapping (`{"result": ...}`, `json.dumps` spacing, the untrusted-result banner) and,
# in the default text form, the escaping of that JSON as a string once more.
ONE_COPY = 1.1


def one_copy(envelope: dict[str, Any]) -> int:
    """The most a single copy of `envelope` may take as Hermes shows it: its JSON as one escaped
    string inside `{"result": ...}`, and a little wrapping."""
    return len(json.dumps({"result": compact(envelope)}, ensure_ascii=False)) + 64


@dataclass
class Connected:
    """Hermes connected to mnote through one example configuration."""

    driver: HermesDriver
    definitions: dict[str, list[dict[str, Any]]]
    db: Path
    server: RunningServer | None = None

    def call(self, key: str, tool: str, **arguments: Any) -> str:
        return self.driver.call(model_name(key, tool), **arguments)

    def answered(self, key: str, tool: str, approve: str, **arguments: Any) -> tuple[str, str]:
        """The call, with `approve` typed at Hermes's approval prompt if mnote asks: what the model
        is handed, and what Hermes printed."""
        return self.driver.answered(model_name(key, tool), approve, **arguments)


# The shipped examples run the default selection; the tests that call every tool add the rest.
EVERY_TOOL_ARGS = ["--toolsets", "all"]


def with_every_tool(config: str) -> str:
    """A stdio example's config, its server started with every tool (`--toolsets all`)."""
    args = '"--actor", "user_1"]'
    assert args in config
    return config.replace(args, '"--actor", "user_1", ' + ", ".join(f'"{a}"' for a in EVERY_TOOL_ARGS) + "]")


@pytest.fixture(scope="module")
def stdio_hermes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Connected]:
    require_hermes()
    base = tmp_path_factory.mktemp("hermes-stdio")
    db = demo_store(base / "mnote.db", every_tool_page(STDIO), consent_page(STDIO))
    config = with_every_tool(
        example_config(
            "hermes-stdio.yaml", {COMMAND_PLACEHOLDER: str(MNOTE_COMMAND), DB_PLACEHOLDER: str(db)}
        )
    )
    home = write_home(base / "home", config)
    with hermes_driver(home, base / "hermes.log") as driver:
        yield Connected(driver, {STDIO: driver.discover(STDIO)}, db)


@pytest.fixture(scope="module")
def http_example_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[RunningServer, Path]]:
    """The server the HTTP example tells the user to start, on a free port and a throw-away store."""
    require_hermes()
    base = tmp_path_factory.mktemp("hermes-http-server")
    db = demo_store(
        base / "mnote.db", every_tool_page(HTTP), every_tool_page(SSE), consent_page(HTTP), consent_page(SSE)
    )
    with example_http_server(base, db) as server:
        yield server, db


@contextmanager
def example_http_server(base: Path, db: Path, *flags: str) -> Iterator[RunningServer]:
    tokens = write_tokens(
        base / "tokens.json",
        {
            EDITOR_TOKEN: {"actorId": "user_1", "scopes": ["page.read", "page.write", "artifact.write"]},
            VIEWER_TOKEN: {"actorId": "user_2", "scopes": ["page.read", "page.write", "artifact.write"]},
        },
    )
    args = example_serve_command("hermes-http.yaml")
    args = [str(tokens) if arg.endswith("tokens.json") else arg for arg in args]
    args = ["0" if arg == "8765" else arg for arg in args]
    with http_server(db, *args, *EVERY_TOOL_ARGS, *flags) as server:
        yield server


@contextmanager
def url_hermes(base: Path, example: str, key: str, served: tuple[RunningServer, Path]) -> Iterator[Connected]:
    """Hermes on a URL example (hermes-http.yaml or hermes-sse.yaml), against the example's server."""
    server, db = served
    address = server.url.removeprefix("http://")
    home = write_home(base / "home", example_config(example, {ADDRESS_PLACEHOLDER: address}))
    with hermes_driver(home, base / "hermes.log", MNOTE_TOKEN=EDITOR_TOKEN) as driver:
        yield Connected(driver, {key: driver.discover(key)}, db, server)


@pytest.fixture(scope="module")
def http_hermes(
    tmp_path_factory: pytest.TempPathFactory, http_example_server: tuple[RunningServer, Path]
) -> Iterator[Connected]:
    with url_hermes(
        tmp_path_factory.mktemp("hermes-http"), "hermes-http.yaml", HTTP, http_example_server
    ) as it:
        yield it


@pytest.fixture(scope="module")
def sse_hermes(
    tmp_path_factory: pytest.TempPathFactory, http_example_server: tuple[RunningServer, Path]
) -> Iterator[Connected]:
    with url_hermes(tmp_path_factory.mktemp("hermes-sse"), "hermes-sse.yaml", SSE, http_example_server) as it:
        yield it


_FIXTURE_OF = {STDIO: "stdio_hermes", HTTP: "http_hermes", SSE: "sse_hermes"}
# the module fixture each key's tests share, through `getfixturevalue` (tests/support/grouping.py)
_SHARED = {STDIO: "stdio_hermes", HTTP: "http_example_server", SSE: "http_example_server"}


@pytest.fixture(params=[pytest.param(key, marks=sharing(__file__, _SHARED[key])) for key in SERVER_KEYS])
def hermes(request: pytest.FixtureRequest) -> tuple[Connected, str]:
    key: str = request.param
    connected: Connected = request.getfixturevalue(_FIXTURE_OF[key])
    return connected, key


def advertised() -> list[ToolSpec]:
    return list(ALL_TOOLS)


# -- what the model is given -------------------------------------------------------------------


def test_the_model_is_given_every_tool_with_its_schema(hermes: tuple[Connected, str]) -> None:
    connected, key = hermes
    given = {d["function"]["name"]: d["function"] for d in connected.definitions[key]}
    expected = {model_name(key, spec.name): spec for spec in advertised()}
    assert set(expected) <= set(given), f"missing: {sorted(set(expected) - set(given))}"
    # Hermes's own tools for a server's resources and (issue 25) prompts
    hermes_own = ("list_resources", "read_resource", "list_prompts", "get_prompt")
    assert set(given) - set(expected) == {model_name(key, name) for name in hermes_own}
    for name, spec in expected.items():
        schema = spec.input_schema(strict=False)
        parameters = given[name]["parameters"]
        assert given[name]["description"] == spec.description
        assert sorted(parameters.get("required", [])) == sorted(schema["required"]), name  # Hermes drops []
        assert set(parameters["properties"]) == set(schema["properties"]), name
        # Issue 10 item 5: Hermes closes an object that declares no properties (`"properties": {}`),
        # after which a strict provider accepts only `{}`; every object declares its own, props included.
        # Issue 35: but for page.save's blocks, said once in block.insert's definition (`said_in`): an
        # object left open, whose words name where its shape is (a block without `type` is refused).
        said = spec.said_in[1] if spec.said_in is not None else {}
        open_items = [parameters["properties"][prop]["items"] for prop in said]
        for node in _objects(parameters):
            assert node.get("properties") or any(node is item for item in open_items), (
                f"{name}: an object the model could only send empty: {node}"
            )
    for tool in ("mnote.block.insert", "mnote.block.update"):
        text = json.dumps(given[model_name(key, tool)]["parameters"])
        assert all(f'"{prop}"' in text for prop in ("level", "checked", "language", "icon")), tool
    save = given[model_name(key, "mnote.page.save")]["parameters"]["properties"]["content"]
    assert "mnote.block.insert" in save["description"], "page.save's blocks point to insert's"


EXAMPLE_NAMES = ("hermes-stdio.yaml", "hermes-http.yaml", "hermes-sse.yaml", "hermes-oauth.yaml")


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_each_example_registers_mnote_once(example: str) -> None:
    """Every `mcp_servers` entry's tools go into every model request: hermes-http.yaml used to register
    the same server twice (`/mcp` and `/sse`), 30 definitions where 15 do. Read with Hermes's own YAML
    loader, in its interpreter."""
    require_hermes()
    read = subprocess.run(
        [str(HERMES_PYTHON), "-c", "import sys, yaml; print(len(yaml.safe_load(sys.stdin)['mcp_servers']))"],
        input=(ROOT / "examples" / example).read_text(encoding="utf-8"),
        capture_output=True,
        text=True,
        timeout=patience(60),
        check=True,
    )
    assert read.stdout.strip() == "1"


def test_the_homes_the_tests_write_turn_hermes_s_environment_probe_off(tmp_path: Path) -> None:
    """The test-only part of every Hermes home (harness.py, `write_home`): `agent.environment_probe:
    false`, a key Hermes 0.19.0 still reads, added to each example as it is; the shipped examples
    leave the probe as Hermes ships it (on), for users copy them."""
    require_hermes()
    for example in EXAMPLE_NAMES:
        shipped = (ROOT / "examples" / example).read_text(encoding="utf-8")
        assert "environment_probe" not in shipped, example
        home = write_home(tmp_path / example, shipped)
        assert environment_probe_off(home), example
        assert (home / "config.yaml").read_text(encoding="utf-8").startswith(shipped.rstrip("\n")), example


@pytest.mark.parametrize("form", SCHEMA_FORMS)
def test_the_definitions_weigh_what_the_size_table_says(tmp_path: Path, form: SchemaForm) -> None:
    """The measure every size budget and the README's table use (`tools/sizes.py`) is Hermes's own:
    each tool's function definition as Hermes 0.19.0 builds it, equal to ours, byte for byte, in
    both schema forms, and its resource and prompt tools as `utility_tool_bytes` counts them."""
    require_hermes()
    db = demo_store(tmp_path / "mnote.db")
    args = json.dumps(["--db", str(db), "--actor", "user_1", "--schema-form", form, *EVERY_TOOL_ARGS])
    home = write_home(
        tmp_path / "home", f"mcp_servers:\n  {STDIO}:\n    command: {MNOTE_COMMAND}\n    args: {args}\n"
    )
    with hermes_driver(home, tmp_path / "hermes.log") as driver:
        given = {d["function"]["name"]: d for d in driver.discover(STDIO)}
    for spec in advertised():
        tool = spec.to_mcp(style="dotted", strict=False, form=form)
        ours = function_definition(tool.name, tool.description or "", tool.input_schema)
        assert given.pop(ours["function"]["name"]) == ours, spec.name
        assert definition_bytes(ours) == spec.model_bytes(form)
    assert sum(definition_bytes(d) for d in given.values()) == utility_tool_bytes()
    assert set(given) == {model_name(STDIO, name) for name, _, _ in HERMES_UTILITY_TOOLS}


def _objects(schema: Any) -> list[dict[str, Any]]:
    if isinstance(schema, list):
        return [node for item in schema for node in _objects(item)]
    if not isinstance(schema, dict):
        return []
    own = [schema] if schema.get("type") == "object" else []
    return own + [node for value in schema.values() for node in _objects(value)]


# -- one call of every tool --------------------------------------------------------------------

DOC = {"workspaceId": "ws_1", "documentId": "doc_2"}


def _write(key: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {**DOC, "idempotencyKey": f"{name}-{key}", "dryRun": False, **arguments}


def every_tool_page(key: str) -> dict[str, Any]:
    """A page of the demo workspace for one server key's every-tool run (the HTTP and SSE keys share
    a store, and each run's writes stay on its own page)."""
    slug = key.replace("-", "_")
    return {
        "id": f"doc_tools_{slug}",
        "title": f"Every tool ({key})",
        "blocks": [{"id": f"{slug}_{n}", "type": "paragraph", "text": f"Block {n}."} for n in (1, 2, 3)],
    }


def consent_page(key: str) -> dict[str, Any]:
    """A page of two lists with children, per server key: deleting either asks first."""
    slug = key.replace("-", "_")
    return {
        "id": f"doc_consent_{slug}",
        "title": f"Consent ({key})",
        "blocks": [
            {
                "id": f"{slug}_{name}",
                "type": "bulleted_list",
                "text": f"The {name} list",
                "children": [{"type": "paragraph", "text": f"Under the {name} list, {n}."} for n in (1, 2)],
            }
            for name in ("kept", "deleted")
        ],
    }


def every_tool_target(key: str) -> Target:
    page = every_tool_page(key)
    return Target("ws_1", page["id"], tuple(block["id"] for block in page["blocks"]))


def test_every_tool_answers_once_through_hermes(hermes: tuple[Connected, str]) -> None:
    """Every registered tool's first example (tests/support/tool_calls.py; its prior write first), for
    real; where mnote asks first (the revert), the person approves once at Hermes's prompt."""
    connected, key = hermes
    page = every_tool_target(key)
    for spec in advertised():
        text = ""
        for name, made in calls(spec, page, f"hermes-{key}"):
            text, _ = connected.answered(key, name, "o", **made)
            envelope = unwrap(text)
            assert envelope["ok"] is True, (name, envelope)
        assert envelope["toolName"] == spec.name
        assert len(text) <= one_copy(envelope), (
            spec.name,
            len(text),
            len(compact(envelope)),
        )


def test_a_destructive_delete_asks_at_hermes_approval_prompt(hermes: tuple[Connected, str]) -> None:
    """Issue 25: deleting a list with its children asks first; Hermes 0.19.0 shows mnote's question at
    its own approval prompt (form elicitation) and the person's answer decides: "d" (deny) leaves the
    page as it was and the model reads a refusal; "o" (once) deletes, once."""
    connected, key = hermes
    slug = key.replace("-", "_")
    page = {"workspaceId": "ws_1", "documentId": f"doc_consent_{slug}"}

    def delete(name: str, approve: str) -> tuple[dict[str, Any], str]:
        arguments = {
            **page,
            "idempotencyKey": f"consent-{name}-{key}",
            "dryRun": False,
            "blockIds": [f"{slug}_{name}"],
        }
        text, printed = connected.answered(key, "mnote.block.delete", approve, **arguments)
        return unwrap(text), printed

    declined, asked = delete("kept", "d")
    assert declined["ok"] is False, declined
    assert declined["error"]["code"] == "mnote_tool_permission_denied"
    assert declined["error"]["details"]["confirmation"] == "declined"
    assert declined["error"]["details"]["auditCommandId"], "the refusal is audited"
    # The question in the server's locale: the stdio example's zh-CN, the test's HTTP server's en.
    question = (
        f"确认写入页面《Consent ({key})》（mnote.block.delete）？\n删除 3 个块。"
        if key == STDIO
        else f"Confirm this write to “Consent ({key})” (mnote.block.delete)?\nDeletes 3 block(s)."
    )
    assert question in asked and "  - - The kept list" in asked, asked[-2000:]
    assert "[o]nce" in asked, "Hermes's own approval prompt"

    confirmed, asked_again = delete("deleted", "o")
    assert confirmed["ok"] is True and confirmed["audit"]["effect"] == "write", confirmed
    assert confirmed["result"]["blockIds"] == [f"{slug}_deleted", *confirmed["result"]["blockIds"][1:]]
    assert len(confirmed["result"]["blockIds"]) == 3
    assert "  - - The deleted list" in asked_again

    read = unwrap(connected.call(key, "mnote.page.get", **page))
    assert [block["text"] for block in read["result"]["blocks"]] == ["The kept list"]
    assert len(read["result"]["blocks"][0]["children"]) == 2

    # Issue 31: the agent undoes its own run, unasked (the undo of one's own run never asks).
    undo = {**page, "undoRunId": confirmed["result"]["runId"], "idempotencyKey": f"consent-undo-{key}"}
    undone, printed = connected.answered(key, "mnote.page.revert", "d", **undo, dryRun=False)
    assert unwrap(undone)["ok"] is True and "[o]nce" not in printed, unwrap(undone)
    read = unwrap(connected.call(key, "mnote.page.get", **page))
    assert [block["text"] for block in read["result"]["blocks"]] == ["The kept list", "The deleted list"]


def test_a_refusal_reaches_the_model_as_an_envelope(hermes: tuple[Connected, str]) -> None:
    connected, key = hermes
    text = connected.call(
        key,
        "mnote.page.save",
        **{**DOC, "idempotencyKey": f"stale-{key}", "dryRun": False, "baseRevision": 0},
        content=[{"type": "paragraph", "text": "late"}],
    )
    envelope = unwrap(text)
    assert envelope["ok"] is False
    assert envelope["error"]["code"] == "mnote_tool_conflict"
    assert envelope["error"]["details"]["currentRevision"] >= 1


def test_five_refusals_in_a_row_then_a_read_succeeds(hermes: tuple[Connected, str]) -> None:
    """Hermes opens its circuit breaker after 3 consecutive errors; refusals must not count."""
    connected, key = hermes
    refusals: list[tuple[str, dict[str, Any], str]] = [
        ("mnote.page.get", {"workspaceId": "ws_1", "documentId": "doc_missing"}, "mnote_tool_not_found"),
        ("mnote.page.get", {"workspaceId": "ws_2", "documentId": "doc_9"}, "mnote_tool_permission_denied"),
        ("mnote.page.get", {**DOC, "maxBlocks": 0}, "mnote_tool_invalid_argument"),
        (
            "mnote.page.save",
            _write(key, "refused-stale", content=[{"type": "divider"}], baseRevision=0),
            "mnote_tool_conflict",
        ),
        (
            "mnote.page.update_options",
            _write(key, "refused-option", options={"protectEditing": True}),
            "mnote_tool_option_not_wired",
        ),
    ]
    for tool, arguments, code in refusals:
        envelope = unwrap(connected.call(key, tool, **arguments))
        assert envelope["ok"] is False and envelope["error"]["code"] == code, envelope
    read = unwrap(connected.call(key, "mnote.page.get", **DOC))
    assert read["ok"] is True
    status = {entry["name"]: entry for entry in connected.driver.status()}
    assert status[key]["connected"] is True


def test_an_idempotent_retry_replays_the_first_result(hermes: tuple[Connected, str]) -> None:
    connected, key = hermes
    arguments = _write(key, "retry", content=[{"type": "paragraph", "text": f"once ({key})"}], mode="append")
    first = unwrap(connected.call(key, "mnote.page.save", **arguments))
    again = unwrap(connected.call(key, "mnote.page.save", **arguments))
    assert first["ok"] and again["ok"]
    assert again["result"]["idempotentReplay"] is True
    assert again["result"]["revision"] == first["result"]["revision"]
    assert again["audit"]["commandId"] == first["audit"]["commandId"]
    assert again["toolCallId"] != first["toolCallId"]


def test_a_long_page_comes_in_pieces_within_the_limit(hermes: tuple[Connected, str]) -> None:
    connected, key = hermes
    seen_ids: list[str] = []
    cursor: str | None = None
    pieces = 0
    while True:
        arguments: dict[str, Any] = {"workspaceId": "ws_1", "documentId": BIG_PAGE}
        if cursor is not None:
            arguments["cursor"] = cursor
        text = connected.call(key, "mnote.page.get", **arguments)
        envelope = unwrap(text)
        assert envelope["ok"] is True, envelope
        assert len(text) < HERMES_RESULT_LIMIT
        assert len(text) <= one_copy(envelope)
        seen_ids += [block["id"] for block in envelope["result"]["blocks"]]
        pieces += 1
        cursor = envelope["result"].get("nextCursor")
        if cursor is None:
            break
    assert pieces > 1
    assert seen_ids == [f"b_{index:04d}" for index in range(BIG_PAGE_BLOCKS)]


# -- the agent loop ----------------------------------------------------------------------------


def envelopes_seen(transcript: Transcript) -> list[dict[str, Any]]:
    """The envelopes the model was shown, read leniently (the strict check is `unwrap`)."""
    found: list[dict[str, Any]] = []
    for content in transcript.tool_contents():
        try:
            outer = json.loads(payload(content))
        except ValueError:
            found.append({})
            continue
        value = outer.get("structuredContent", outer.get("result"))
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                value = {}
        found.append(value if isinstance(value, dict) else {})
    return found


def edit_script(key: str) -> Callable[[Transcript], Turn]:
    """Read doc_1, save with its revision, retry that save, insert a block, write an AI note."""
    tool = {spec.name: model_name(key, spec.name) for spec in ALL_TOOLS}
    page = {"workspaceId": "ws_1", "documentId": "doc_1"}

    def next_turn(transcript: Transcript) -> Turn:
        seen = envelopes_seen(transcript)
        step = len(seen)
        if step == 0:
            return Turn((ToolCall(tool["mnote.page.get"], page),))
        revision = (seen[0].get("result") or {}).get("revision", 0)
        save = {
            **page,
            "content": [{"type": "paragraph", "text": "Appended by the agent loop."}],
            "mode": "append",
            "idempotencyKey": "loop-save",
            "dryRun": False,
            "baseRevision": revision,
        }
        if step in (1, 2):
            return Turn((ToolCall(tool["mnote.page.save"], save),))
        if step == 3:
            saved = (seen[1].get("result") or {}).get("revision", 0)
            insert = {
                **page,
                "blocks": [{"type": "paragraph", "text": "Inserted by the agent loop."}],
                "afterBlockId": "p_1",
                "idempotencyKey": "loop-insert",
                "dryRun": False,
                "baseRevision": saved,
            }
            return Turn((ToolCall(tool["mnote.block.insert"], insert),))
        if step == 4:
            note = {
                **page,
                "content": "The agent loop read and edited this page.",
                "idempotencyKey": "loop-note",
            }
            return Turn((ToolCall(tool["mnote.artifact.create_ai_note"], {**note, "dryRun": False}),))
        return Turn(text="All edits are done.")

    return next_turn


@pytest.mark.parametrize(("typed", "deleted"), [("o\n", True), ("d\n", False)], ids=["once", "deny"])
def test_the_agent_loop_asks_the_person_before_deleting_a_list(
    tmp_path: Path, typed: str, deleted: bool
) -> None:
    """Issue 25, the way a person runs Hermes: `hermes chat -q` on the shipped stdio example; the model
    deletes a list with its children, mnote asks, Hermes prints the question at its approval prompt,
    and the person types `o` (once) or `d` (deny) on its stdin."""
    require_hermes()
    db = demo_store(tmp_path / "mnote.db", consent_page(STDIO))
    config = with_every_tool(
        example_config(
            "hermes-stdio.yaml", {COMMAND_PLACEHOLDER: str(MNOTE_COMMAND), DB_PLACEHOLDER: str(db)}
        )
    )
    page = {"workspaceId": "ws_1", "documentId": "doc_consent_mnote"}
    delete = {**page, "blockIds": ["mnote_deleted"], "idempotencyKey": "loop-delete", "dryRun": False}

    def script(transcript: Transcript) -> Turn:
        if not transcript.tool_contents():
            return Turn((ToolCall(model_name(STDIO, "mnote.block.delete"), delete),))
        return Turn(text="The list is handled.")

    with scripted_model(script) as (base_url, transcript):
        home = write_home(tmp_path / "home", config + model_section(base_url))
        run = run_agent_loop(home, "Delete the second list.", STDIO, typed=typed)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "确认写入页面《Consent (mnote)》（mnote.block.delete）？\n删除 3 个块。" in run.stdout, run.stdout[
        -3000:
    ]
    assert "[o]nce" in run.stdout and "The list is handled." in run.stdout
    (content,) = transcript.tool_contents()
    envelope = unwrap(content)
    texts = [block["text"] for block in _blocks(db, "doc_consent_mnote")]
    if deleted:
        assert envelope["ok"] is True and envelope["audit"]["effect"] == "write"
        assert texts == ["The kept list"]
    else:
        assert envelope["ok"] is False and envelope["error"]["details"]["confirmation"] == "declined"
        assert envelope["error"]["message"] == "用户拒绝了这次写入，未写入任何内容"
        assert texts == ["The kept list", "The deleted list"]


HERMES_CELLS = ("stdio", "mcp", "stateless", "sse")


@contextmanager
def hermes_cell(base: Path, cell: str, db: Path) -> Iterator[tuple[str, str, dict[str, str]]]:
    """Hermes's configuration for one cell (a shipped example, verbatim but for paths, ports and the
    token), its server key and environment; an HTTP cell's server runs as the example says (plus
    `--stateless` for that cell)."""
    if cell == "stdio":
        config = example_config(
            "hermes-stdio.yaml", {COMMAND_PLACEHOLDER: str(MNOTE_COMMAND), DB_PLACEHOLDER: str(db)}
        )
        yield with_every_tool(config), STDIO, {}  # as the HTTP cells' servers: every tool
        return
    with example_http_server(base, db, *(("--stateless",) if cell == "stateless" else ())) as server:
        address = server.url.removeprefix("http://")
        example, key = ("hermes-sse.yaml", SSE) if cell == "sse" else ("hermes-http.yaml", HTTP)
        yield example_config(example, {ADDRESS_PLACEHOLDER: address}), key, {"MNOTE_TOKEN": EDITOR_TOKEN}


@pytest.mark.parametrize("cell", HERMES_CELLS)
def test_an_agent_loop_obeying_a_planted_instruction_is_stopped_at_the_consent_step(
    tmp_path: Path, cell: str
) -> None:
    """Issue 31: `hermes chat -q` with a scripted model that reads a page carrying a planted
    instruction and obeys it (tests/clients/consent_scenario.py: delete another page's list with its
    children). Over stdio, `/mcp` and `/sse` Hermes asks at its approval prompt and the person types
    `d`; over `/mcp --stateless` mnote cannot ask within the call, the model is given the confirmation
    result and its turn ends asking the person. Nothing is written either way."""
    require_hermes()
    db = demo_store(tmp_path / "mnote.db", PLANTED, TARGET)
    label = f"hermes-{cell}-no"
    asked = cell != "stateless"
    with (
        hermes_cell(tmp_path, cell, db) as (config, key, env),
        scripted_model(consent_model) as (url, transcript),
    ):
        home = write_home(tmp_path / "home", config + model_section(url))
        run = run_agent_loop(home, f"run {label}", key, typed="d\n" if asked else None, **env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert_the_model_saw_the_tools(transcript, key)
    if asked:
        assert "[o]nce" in run.stdout and "Launch plan" in run.stdout, run.stdout[-3000:]
        assert KEPT in run.stdout
    else:
        assert "[o]nce" not in run.stdout and ASKED in run.stdout, run.stdout[-3000:]
    got = outcome(consent_trail(db), label)
    assert got.stopped == ("declined" if asked else HELD) and got.writes == [], got


def test_hermes_over_stateless_mcp_writes_with_the_handle_once_and_undoes_its_run(tmp_path: Path) -> None:
    """Issue 31: with `--stateless` Hermes 0.19.0 (2025-11-25) cannot be asked within the call; it is
    given the confirmation result, and the handle its model sends back after the person's yes writes
    the delete once. A second use is refused; the agent's own run is undone unasked."""
    require_hermes()
    db = demo_store(tmp_path / "mnote.db", PLANTED, TARGET)
    with hermes_cell(tmp_path, "stateless", db) as (config, key, env):
        home = write_home(tmp_path / "home", config)
        with hermes_driver(home, tmp_path / "hermes.log", **env) as driver:
            driver.discover(key)
            delete = {
                **TARGET_PAGE,
                "blockIds": ["risks"],
                "idempotencyKey": "stateless-delete",
                "dryRun": False,
            }
            text, printed = driver.answered(model_name(key, "mnote.block.delete"), "o", **delete)
            held = unwrap(text)
            assert "[o]nce" not in printed and held["error"]["details"]["confirmation"] == "required", held
            handle = held["error"]["details"]["confirmationKey"]
            assert handle in held["error"]["hint"], "the model is told what to send back"
            written = unwrap(
                driver.call(model_name(key, "mnote.block.delete"), **{**delete, "idempotencyKey": handle})
            )
            again = unwrap(
                driver.call(model_name(key, "mnote.block.delete"), **{**delete, "idempotencyKey": handle})
            )
            undo = {
                **TARGET_PAGE,
                "undoRunId": written["result"]["runId"],
                "idempotencyKey": "stateless-undo",
            }
            undone = unwrap(driver.call(model_name(key, "mnote.page.revert"), **undo, dryRun=False))
    assert written["ok"] and written["audit"]["effect"] == "write", written
    assert again["error"]["details"]["confirmation"] == "used", again
    assert undone["ok"], undone
    writes = [
        (r["commandName"], r["detail"].get("consent")) for r in consent_trail(db) if r["effect"] == "write"
    ]
    assert writes == DELETED_THEN_UNDONE


def audit_trail(db: Path) -> list[dict[str, Any]]:
    """The audit trail as an operator reads it: `mnote-mcp audit --db PATH`."""
    listed = subprocess.run(
        [sys.executable, "-m", "mnote_mcp", "audit", "--db", str(db), "--limit", "1000"],
        capture_output=True,
        text=True,
        timeout=patience(60),
        cwd=ROOT,
        check=True,
    )
    return [json.loads(line) for line in listed.stdout.splitlines() if line.strip()]


def late_command(tmp_path: Path, seconds: float) -> Path:
    """`mnote-mcp` as a machine under load or a first start after an upgrade may run it: late."""
    script = tmp_path / "late-mnote-mcp"
    script.write_text(f'#!/bin/sh\nsleep {seconds}\nexec "{MNOTE_COMMAND}" "$@"\n', encoding="utf-8")
    script.chmod(0o755)
    return script


def assert_the_model_saw_the_tools(transcript: Transcript, server_key: str) -> None:
    """Hermes sends a turn without `tools` when no tool is registered yet (MCP still connecting)."""
    assert transcript.agent_requests, (
        "Hermes asked the model without any tools: its MCP discovery had not finished"
    )
    assert model_name(server_key, "mnote.page.get") in transcript.tool_names()


@pytest.mark.parametrize("start_delay", [0.0, 4.0], ids=["as-shipped", "starting-4s-late"])
def test_the_agent_loop_reads_saves_retries_inserts_and_notes(tmp_path: Path, start_delay: float) -> None:
    """Also with a server that starts later than Hermes's default discovery wait (1.5 s): the
    shipped config's `mcp_discovery_timeout` puts mnote's tools in the first turn anyway."""
    require_hermes()
    db = demo_store(tmp_path / "mnote.db")
    command = late_command(tmp_path, start_delay) if start_delay else MNOTE_COMMAND
    config = example_config("hermes-stdio.yaml", {COMMAND_PLACEHOLDER: str(command), DB_PLACEHOLDER: str(db)})
    with scripted_model(edit_script(STDIO)) as (base_url, transcript):
        home = write_home(tmp_path / "home", config + model_section(base_url))
        run = run_agent_loop(home, "Tidy up the project plan.", STDIO)
    assert run.returncode == 0, run.stderr[-3000:]
    assert_the_model_saw_the_tools(transcript, STDIO)
    assert "All edits are done." in run.stdout
    contents = transcript.tool_contents()
    assert len(contents) == 5, contents
    envelopes = [unwrap(content) for content in contents]
    for content, envelope in zip(contents, envelopes, strict=True):
        assert envelope["ok"] is True, envelope
        assert len(payload(content)) <= one_copy(envelope)
    _, save, retry, insert, note = envelopes
    assert retry["result"]["idempotentReplay"] is True
    assert retry["result"]["revision"] == save["result"]["revision"]
    assert insert["result"]["revision"] == save["result"]["revision"] + 1
    assert note["result"]["artifactId"]

    blocks = _blocks(db, "doc_1")
    texts = [block["text"] for block in blocks]
    assert (
        texts[texts.index("First paragraph: what we are building and why.") + 1]
        == "Inserted by the agent loop."
    )
    assert texts[-1] == "Appended by the agent loop."
    assert texts.count("Appended by the agent loop.") == 1

    records = audit_trail(db)
    commands = [record["commandName"] for record in records if record["outcome"] != "replayed"]
    assert commands == ["page.body.save", "page.block.insert", "artifact.aiNote.create"], records
    assert len({record["runId"] for record in records}) == 1
    assert len({record["sessionId"] for record in records}) == 1
    assert len({record["toolCallId"] for record in records}) == len(records)
    assert {record["toolCallId"] for record in records} <= {e["toolCallId"] for e in envelopes}


def _blocks(db: Path, document_id: str) -> list[dict[str, Any]]:
    import anyio

    from tests.support.helpers import call, connect

    async def read() -> list[dict[str, Any]]:
        async with connect(db, actor="user_1") as client:
            envelope = await call(client, "mnote.page.get", workspaceId="ws_1", documentId=document_id)
            return list(envelope["result"]["blocks"])

    return anyio.run(read)


_CALL_LINE = re.compile(r"call tool=(\S+) .*?runId=(\S+) toolCallId=(\S+)")


def test_two_hermes_runs_over_http_keep_their_ids_apart(tmp_path: Path) -> None:
    """Each run reads the 400-block page in pieces: every piece reaches the model once, under the
    limit; one run's calls share one runId; the two runs share no toolCallId."""
    require_hermes()
    db = demo_store(tmp_path / "mnote.db")
    piece_tool = model_name(HTTP, "mnote.page.get")

    def read_all(transcript: Transcript) -> Turn:
        seen = envelopes_seen(transcript)
        arguments: dict[str, Any] = {"workspaceId": "ws_1", "documentId": BIG_PAGE}
        if seen:
            cursor = (seen[-1].get("result") or {}).get("nextCursor")
            if not cursor:
                return Turn(text="Read the whole page.")
            arguments["cursor"] = cursor
        return Turn((ToolCall(piece_tool, arguments),))

    runs: list[list[tuple[str, str]]] = []
    with example_http_server(tmp_path, db) as server:
        address = server.url.removeprefix("http://")
        config = example_config("hermes-http.yaml", {ADDRESS_PLACEHOLDER: address})
        for attempt in range(2):
            before = len(_CALL_LINE.findall(server.log))
            with scripted_model(read_all) as (base_url, transcript):
                home = write_home(tmp_path / f"home{attempt}", config + model_section(base_url))
                run = run_agent_loop(home, "Read the long page.", HTTP, MNOTE_TOKEN=EDITOR_TOKEN)
            assert run.returncode == 0, run.stderr[-3000:]
            assert_the_model_saw_the_tools(transcript, HTTP)
            contents = transcript.tool_contents()
            assert len(contents) > 1
            ids: list[str] = []
            for content in contents:
                envelope = unwrap(content)
                assert envelope["ok"] is True
                assert len(content) < HERMES_RESULT_LIMIT
                assert not cut_by_hermes(content)
                assert len(payload(content)) <= one_copy(envelope)
                ids += [block["id"] for block in envelope["result"]["blocks"]]
            assert ids == [f"b_{index:04d}" for index in range(BIG_PAGE_BLOCKS)]
            runs.append([(run_id, call_id) for _, run_id, call_id in _CALL_LINE.findall(server.log)[before:]])
    first, second = runs
    assert len({run_id for run_id, _ in first}) == 1
    assert len({run_id for run_id, _ in second}) == 1
    assert {run_id for run_id, _ in first}.isdisjoint(run_id for run_id, _ in second)
    assert {call_id for _, call_id in first}.isdisjoint(call_id for _, call_id in second)


# -- the default budget against Hermes's limit, in every result form ---------------------------

FORMS = ("both", "text", "structured")


def _special_pages() -> list[dict[str, Any]]:
    """Pages whose JSON escapes differently: CJK prose, and code full of quotes and backslashes."""
    cjk = "会议纪要：我们决定先发布 MCP 服务器，再接入更多的智能体框架，并记录每一次修改的原因。"
    code = 'print("a \\"quoted\\" path: C:\\\\temp\\\\x", {"k": "v"})'
    return [
        {
            "id": "doc_cjk",
            "title": "中文长页面",
            "blocks": [{"id": f"c_{i:04d}", "type": "paragraph", "text": f"{i} {cjk}"} for i in range(600)],
        },
        {
            "id": "doc_code",
            "title": "Code",
            "blocks": [
                {"id": f"k_{i:04d}", "type": "code", "text": code, "props": {"language": "python"}}
                for i in range(600)
            ],
        },
    ]


def test_the_default_budget_fits_hermes_in_every_result_form(tmp_path: Path) -> None:
    """What the model reads for the first piece of a long page, per result form, with the default
    budget: below Hermes's 100,000 characters with a 10% margin for ordinary prose in every form; the
    structured form within 1.1x of the envelope whatever the text."""
    require_hermes()
    db = demo_store(tmp_path / "mnote.db", *_special_pages())
    servers = "".join(
        f"  mnote-{form}:\n"
        f"    command: {MNOTE_COMMAND}\n"
        f'    args: ["--db", "{db}", "--refusals", "result", "--result-form", "{form}"]\n'
        for form in FORMS
    )
    home = write_home(tmp_path / "home", "mcp_servers:\n" + servers)
    sizes: dict[tuple[str, str], tuple[int, int]] = {}
    with hermes_driver(home, tmp_path / "hermes.log") as driver:
        driver.discover(*(f"mnote-{form}" for form in FORMS))
        for form in FORMS:
            for page in (BIG_PAGE, "doc_cjk", "doc_code"):
                text = driver.call(
                    model_name(f"mnote-{form}", "mnote.page.get"), workspaceId="ws_1", documentId=page
                )
                outer = json.loads(text)
                value = outer.get("structuredContent", outer["result"])
                envelope = json.loads(value) if isinstance(value, str) else value
                assert envelope["result"].get("nextCursor"), (form, page)
                sizes[form, page] = (len(text), len(compact(envelope)))
    for (form, page), (seen, envelope_chars) in sorted(sizes.items()):
        print(f"{form:10} {page:9} envelope {envelope_chars:6} model {seen:6} x{seen / envelope_chars:.2f}")
        if form == "structured":
            assert seen <= ONE_COPY * envelope_chars
        if page != "doc_code":
            assert seen <= 0.9 * HERMES_RESULT_LIMIT, (form, page, seen)


def test_the_documented_failures_look_as_documented(
    tmp_path: Path, http_example_server: tuple[RunningServer, Path]
) -> None:
    """docs/hermes.md, "Troubleshooting": `/sse` without `transport: sse` is a 405, a wrong token a
    401, and either leaves the server with no tools."""
    server, _ = http_example_server
    config = (
        "mcp_servers:\n"
        "  no-transport:\n"
        f"    url: {server.url}/sse\n"
        f'    headers: {{Authorization: "Bearer {EDITOR_TOKEN}"}}\n'
        "  wrong-token:\n"
        f"    url: {server.url}/mcp\n"
        '    headers: {Authorization: "Bearer not-a-token"}\n'
    )
    home = write_home(tmp_path / "home", config)
    with hermes_driver(home, tmp_path / "hermes.log") as driver:
        assert driver.discover("no-transport", "wrong-token") == []
        status = {entry["name"]: entry for entry in driver.status()}
    assert "405" in status["no-transport"]["error"] and status["no-transport"]["tools"] == 0
    assert "401" in status["wrong-token"]["error"] and status["wrong-token"]["tools"] == 0


def test_a_viewer_refused_again_and_again_is_not_cut_off(
    tmp_path: Path, http_example_server: tuple[RunningServer, Path]
) -> None:
    """Issue 10's second case: a viewer's writes, refused one after the other (five, more than
    Hermes's breaker allows errors), then a read, over the HTTP example with the viewer's token."""
    server, _ = http_example_server
    address = server.url.removeprefix("http://")
    home = write_home(tmp_path / "home", example_config("hermes-http.yaml", {ADDRESS_PLACEHOLDER: address}))
    with hermes_driver(home, tmp_path / "hermes.log", MNOTE_TOKEN=VIEWER_TOKEN) as driver:
        driver.discover(HTTP)
        for attempt in range(5):
            arguments = _write("viewer", f"viewer-{attempt}", title=f"Viewer title {attempt}")
            envelope = unwrap(driver.call(model_name(HTTP, "mnote.page.update_title"), **arguments))
            assert envelope["error"]["code"] == "mnote_tool_permission_denied", envelope
        read = unwrap(driver.call(model_name(HTTP, "mnote.page.get"), **DOC))
    assert read["ok"] is True and read["result"]["title"]


def test_the_readme_snippet_works_as_written(tmp_path: Path) -> None:
    """The README's Hermes block, as a user would paste it (paths substituted): every tool of the
    default selection registers, the definitions Hermes then sends with every model request weigh no
    more than the filesystem server's (issue 35: 8,630 bytes, 616 a tool, measured the same way by
    `python -m bench.agenttasks`), and a read and a refusal reach the model as the envelope, once."""
    require_hermes()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    snippet = readme.split("**Hermes**", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    db = demo_store(tmp_path / "mnote.db")
    for placeholder, value in {COMMAND_PLACEHOLDER: str(MNOTE_COMMAND), DB_PLACEHOLDER: str(db)}.items():
        assert placeholder in snippet
        snippet = snippet.replace(placeholder, value)
    home = write_home(tmp_path / "home", snippet)
    with hermes_driver(home, tmp_path / "hermes.log") as driver:
        definitions = driver.discover(STDIO)
        names = {d["function"]["name"] for d in definitions}
        read = unwrap(driver.call(model_name(STDIO, "mnote.page.get"), **DOC))
        refused = unwrap(
            driver.call(model_name(STDIO, "mnote.page.get"), workspaceId="ws_2", documentId="doc_9")
        )
    default = {model_name(STDIO, spec.name) for spec in advertised() if spec.by_default}
    utility = {model_name(STDIO, name) for name, _, _ in HERMES_UTILITY_TOOLS}
    assert names == default | utility
    weight = sum(definition_bytes(d) for d in definitions)
    assert weight <= 8_630 and weight / len(definitions) <= 8_630 / 14, weight
    assert read["ok"] is True
    assert refused["error"]["code"] == "mnote_tool_permission_denied"


def test_hermes_gives_its_model_the_prompts(hermes: tuple[Connected, str]) -> None:
    """Issue 25: Hermes 0.19.0 turns a server's prompts into two tools of its own (`list_prompts`,
    `get_prompt`); its model can list mnote's and render one (Hermes hands it a text message's text,
    and an embedded resource as the SDK model's `str()`, the page's Markdown inside)."""
    connected, key = hermes
    listed = json.loads(payload(connected.call(key, "list_prompts")))
    assert [prompt["name"] for prompt in listed["prompts"]] == ["summarise_page", "review_run", "tidy_page"]
    arguments = {"name": "summarise_page", "arguments": {"workspaceId": "ws_1", "documentId": "doc_1"}}
    text = connected.driver.send({"op": "call", "name": model_name(key, "get_prompt"), "args": arguments})[
        "text"
    ]
    rendered = json.loads(payload(text))
    first, page = rendered["messages"]
    assert first["role"] == "user" and "mnote.artifact.create_summary" in first["content"]
    assert "Project plan" in first["content"]
    assert page["content"].startswith("type='resource'") and "<!-- heading_1 -->" in page["content"]


# -- one setting for every host (issue 22): Hermes's agent loop on the shipped defaults ------------

GUARDRAILS = "\ntool_loop_guardrails:\n  hard_stop_enabled: true\n"
LOOP_NOTE = re.compile(r"\[Tool loop (?:warning|hard stop)")
EDITS = 20


def stdio_example(
    db: Path, command: Path = MNOTE_COMMAND, substitutions: dict[str, str] | None = None
) -> str:
    return example_config(
        "hermes-stdio.yaml",
        {COMMAND_PLACEHOLDER: str(command), DB_PLACEHOLDER: str(db), **(substitutions or {})},
    )


def edits(tool: str, short_ids: bool = False) -> Callable[[Transcript], Turn]:
    """Twenty text edits in a row (`mnote.page.edit_text`, in the default selection), each new (its own
    key), then an answer; `short_ids`: each call names a short `traceId` and `toolCallId`, for an
    envelope as short as a write's can be."""

    def next_turn(transcript: Transcript) -> Turn:
        done = len(transcript.tool_contents())
        if done < EDITS:
            before = "First paragraph: what we are building and why." if not done else f"Edit {done} of"
            arguments: dict[str, Any] = {
                "workspaceId": "ws_1",
                "documentId": "doc_1",
                "blockId": "p_1",
                "edits": [
                    {
                        "oldText": before,
                        "newText": f"Edit {done + 1} of" if done else "Edit 1 of the agent loop.",
                    }
                ],
                "idempotencyKey": f"edit-{done}",
                "dryRun": False,
            }
            if short_ids:
                arguments |= {"traceId": f"t{done}", "toolCallId": f"c{done}"}
            return Turn((ToolCall(tool, arguments),))
        return Turn(text="Twenty edits are done.")

    return next_turn


@pytest.mark.parametrize("form", ["default", "structured"])
def test_twenty_edits_in_a_row_draw_no_loop_warning(tmp_path: Path, form: str) -> None:
    """Hermes's loop guardrail (hard stops on) calls a result failed when `"error"` is in its first 500
    characters: a short structured-only envelope (`"error": null`) always was, so from the 3rd edit it
    warned and the 8th ended the turn. The default, one text block, is read as the success it is.
    The `structured` case shows what the default fixes (Hermes 0.19.0)."""
    require_hermes()
    db = demo_store(tmp_path / "mnote.db")
    config = stdio_example(db)
    if form == "structured":
        config = config.replace('"--actor", "user_1"]', '"--actor", "user_1", "--result-form", "structured"]')
    # the structured case with short correlation ids: a write's result names its runId too (issue 22),
    # which took an edit's envelope past Hermes's 500 characters with the generated ones
    script = edits(model_name(STDIO, "mnote.page.edit_text"), short_ids=form == "structured")
    with scripted_model(script) as (base_url, transcript):
        home = write_home(tmp_path / "home", config + GUARDRAILS + model_section(base_url))
        run = run_agent_loop(home, "Edit the first paragraph twenty times.", STDIO)
    assert run.returncode == 0, run.stderr[-3000:]
    contents = transcript.tool_contents()
    flagged = [content for content in contents if LOOP_NOTE.search(content)]
    if form == "structured":
        assert flagged and len(contents) < EDITS, "Hermes 0.19.0 no longer misreads short successes"
        return
    assert len(contents) == EDITS and not flagged, flagged[:1]
    # issue 35: the default (`auto`) is text only to Hermes 0.19.0's handshake-era client: one copy
    doubled = [content for content in contents if "structuredContent" in content]
    assert not doubled, doubled[:1]
    assert "Twenty edits are done." in run.stdout
    envelopes = [unwrap(content) for content in contents]
    assert all(envelope["ok"] for envelope in envelopes)
    assert _blocks(db, "doc_1")[1]["text"] == f"Edit {EDITS} of the agent loop."


def patient_edits(tool: str) -> Callable[[Transcript], Turn]:
    """Twenty block edits as a model that meets a rate limit acts: the first time, it sends the refused
    edit again at once, three refusals in a row (what a breaker counting them would trip on); from then
    on it waits the seconds the refusal gives, then sends the same edit (the same idempotencyKey)."""
    waited = {"once": False}

    def next_turn(transcript: Transcript) -> Turn:
        envelopes = [
            json.loads(json.loads(payload(content))["result"]) for content in transcript.tool_contents()
        ]
        done = sum(envelope["ok"] for envelope in envelopes)
        if done >= EDITS:
            return Turn(text="Twenty edits are done.")
        streak = 0
        for envelope in reversed(envelopes):
            if envelope["ok"]:
                break
            streak += 1
        if streak and (streak >= 3 or waited["once"]):
            waited["once"] = True
            time.sleep(envelopes[-1]["error"]["details"]["retryAfterSeconds"])
        arguments: dict[str, Any] = {
            "workspaceId": "ws_1",
            "documentId": "doc_1",
            "blockId": "p_1",
            "text": f"Edit {done + 1} of the agent loop.",
            "idempotencyKey": f"edit-{done}",
            "dryRun": False,
        }
        return Turn((ToolCall(tool, arguments),))

    return next_turn


def test_twenty_edits_under_a_write_limit_wait_and_go_on(tmp_path: Path) -> None:
    """Issue 32: a rate-limited write is an ordinary result (`ok: false`, `mnote_tool_rate_limited`,
    retryable, the seconds to wait), so Hermes 0.19.0's breaker (three `isError` results in a row cut
    the server off) and its loop guardrail (hard stops on) count none of them: three refusals in a row,
    then a model that waits the given time, and all twenty edits land."""
    require_hermes()
    db = demo_store(tmp_path / "mnote.db")
    config = with_every_tool(stdio_example(db)).replace(  # mnote.block.update: not by default
        '"all"]', '"all", "--write-limit", "120/min burst 5"]'
    )
    assert "--write-limit" in config
    script = patient_edits(model_name(STDIO, "mnote.block.update"))
    with scripted_model(script) as (base_url, transcript):
        home = write_home(tmp_path / "home", config + GUARDRAILS + model_section(base_url))
        run = run_agent_loop(home, "Edit the first paragraph twenty times.", STDIO)
    assert run.returncode == 0, run.stderr[-3000:]
    contents = transcript.tool_contents()
    assert not [content for content in contents if LOOP_NOTE.search(content)]
    envelopes = [unwrap(content) for content in contents]  # every one a result: none cut off as an error
    limited = [envelope for envelope in envelopes if not envelope["ok"]]
    assert len(limited) >= 3, "the limit was met, three times in a row at least"
    assert all(envelope["error"]["code"] == "mnote_tool_rate_limited" for envelope in limited), limited[:1]
    assert sum(envelope["ok"] for envelope in envelopes) == EDITS
    assert "Twenty edits are done." in run.stdout
    assert _blocks(db, "doc_1")[1]["text"] == f"Edit {EDITS} of the agent loop."


def outage_command(tmp_path: Path) -> Path:
    """`mnote-mcp` relaying to a runtime that is down (a port nothing listens on)."""
    token = tmp_path / "runtime-token"
    token.write_text("runtime-token-0123456789abcdef\n", encoding="utf-8")
    token.chmod(0o600)
    script = tmp_path / "mnote-mcp-runtime-down"
    script.write_text(
        f'#!/bin/sh\nexec "{MNOTE_COMMAND}" "$@" --kernel http://127.0.0.1:{free_port()}'
        f' --runtime-token "{token}"\n',
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


@pytest.mark.parametrize("form", ["default", "structured"])
def test_a_runtime_outage_reaches_the_model_with_its_code_and_hint(tmp_path: Path, form: str) -> None:
    """A real failure keeps `isError`; Hermes then reads only the text blocks: the default's text is
    the envelope, so the model reads the code, `retryable` and hint. Structured-only, it read
    `{"error": "MCP tool returned an error"}`."""
    require_hermes()
    db = demo_store(tmp_path / "mnote.db")
    config = stdio_example(db, outage_command(tmp_path))
    if form == "structured":
        config = config.replace('"--actor", "user_1"]', '"--actor", "user_1", "--result-form", "structured"]')
    read = ToolCall(model_name(STDIO, "mnote.page.get"), {"workspaceId": "ws_1", "documentId": "doc_1"})

    def script(transcript: Transcript) -> Turn:
        return Turn((read,)) if not transcript.tool_contents() else Turn(text="The runtime is down.")

    with scripted_model(script) as (base_url, transcript):
        home = write_home(tmp_path / "home", config + model_section(base_url))
        run = run_agent_loop(home, "Read the project plan.", STDIO)
    assert run.returncode == 0, run.stderr[-3000:]
    (content,) = transcript.tool_contents()
    if form == "structured":
        assert "mnote_tool_runtime_unavailable" not in content, "Hermes 0.19.0 now reads structured errors"
        return
    error = failure_seen(content)["error"]
    assert error["code"] == "mnote_tool_runtime_unavailable"
    assert error["retryable"] is True and error["hint"], error


def cut_by_hermes(content: str) -> bool:
    """Whether Hermes replaced a result over its cut by a preview (saved to a file, or not)."""
    return "<persisted-output>" in content or "[Truncated: tool response was" in content


def every_tool_content(transcript: Transcript) -> list[str]:
    """Every tool result the model was shown, in order, each as it first came: on a small window
    Hermes compresses older turns, so the last request no longer holds the first pieces."""
    seen: dict[str, str] = {}
    for request in transcript.agent_requests:
        for message in request["messages"]:
            if message.get("role") == "tool" and message.get("tool_call_id") not in seen:
                seen[message.get("tool_call_id")] = _text(message.get("content"))
    return list(seen.values())


LONG_PAGE_BLOCKS = 2_000
CONTEXT_64K = 65_536


def pieces_of(tool: str, resource_tool: str, document_id: str) -> Callable[[Transcript], Turn]:
    """Read a page whole with `mnote.page.get` (cursor by cursor), then as a resource (piece by piece,
    each naming the next), then answer."""
    first_uri = f"mnote://workspaces/ws_1/pages/{document_id}"

    def next_turn(transcript: Transcript) -> Turn:
        contents = transcript.tool_contents()
        if not contents:
            return Turn((ToolCall(tool, {"workspaceId": "ws_1", "documentId": document_id}),))
        last = contents[-1]
        if cut_by_hermes(last):  # a preview: nothing to go on with
            return Turn(text="A piece came as a preview.")
        if json.loads(payload(last)).get("result", "").startswith("{"):  # a page.get piece
            cursor = unwrap(last)["result"].get("nextCursor")
            if cursor:
                arguments = {"workspaceId": "ws_1", "documentId": document_id, "cursor": cursor}
                return Turn((ToolCall(tool, arguments),))
            return Turn((ToolCall(resource_tool, {"uri": first_uri}),))
        following = re.search(r"read the next piece: (\S+) -->", last)
        if following:
            return Turn((ToolCall(resource_tool, {"uri": following.group(1)}),))
        return Turn(text="Read the whole page twice.")

    return next_turn


@pytest.mark.parametrize("budget", ["the 64k setting", "the default"])
def test_a_2000_block_page_read_in_pieces_on_a_64k_model_loses_no_piece(tmp_path: Path, budget: str) -> None:
    """A 64k-token model: Hermes cuts a result past 39,321 characters to a 1,500-character preview.
    With the setting docs/hermes.md gives for it (`MNOTE_MAX_RESULT_CHARS=28000`, commented in the
    example) every piece of a 2,000-block page, by `mnote.page.get` and by `read_resource`, reaches
    the model whole: every block once, in order. The default (40,000) does not fit that model."""
    require_hermes()
    page = big_page(LONG_PAGE_BLOCKS)
    page["id"] = "doc_long"
    db = demo_store(tmp_path / "mnote.db", page)
    substitutions = {}
    if budget == "the 64k setting":
        substitutions['# MNOTE_MAX_RESULT_CHARS: "28000"'] = 'MNOTE_MAX_RESULT_CHARS: "28000"'
    config = stdio_example(db, substitutions=substitutions)
    script = pieces_of(model_name(STDIO, "mnote.page.get"), model_name(STDIO, "read_resource"), "doc_long")
    with scripted_model(script) as (base_url, transcript):
        home = write_home(tmp_path / "home", config + model_section(base_url, CONTEXT_64K))
        run = run_agent_loop(home, "Read the long page.", STDIO)
    assert run.returncode == 0, run.stderr[-3000:]
    contents = every_tool_content(transcript)
    limit = hermes_result_limit(CONTEXT_64K)
    previews = [content for content in contents if cut_by_hermes(content)]
    if budget == "the default":
        assert previews, "a 40,000-character piece now fits a 64k model's 39,321"
        return
    assert not previews and all(len(payload(content)) <= limit for content in contents)
    expected = [block["id"] for block in page["blocks"]]
    by_tool, by_resource = [], []
    for content in contents:
        text = json.loads(payload(content))["result"]
        if text.startswith("{"):
            by_tool += [block["id"] for block in unwrap(content)["result"]["blocks"]]
        else:
            by_resource += re.findall(r"<!-- (b_\d+) -->", text)
    assert by_tool == expected
    assert by_resource == expected
    assert "Read the whole page twice." in run.stdout
