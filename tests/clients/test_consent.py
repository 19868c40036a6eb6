"""Consent that holds on every host (issue 31): the real clients CI installs, each on its default
transports (stdio, `/mcp`, `/sse`) and on `--stateless`, play the consent scenario
(tests/clients/consent_scenario.py): a scripted agent reads a page with an instruction planted in it
and obeys, deleting a list with its children on another page. It is stopped at the consent step in
every cell: asked (the client's elicitation) or answered with the confirmation result, which the agent
turns into a question to its person. On "no" nothing is written; on "yes" the delete is written once
(with the handle, or as the person accepted), and the agent then undoes its own run. Each
conversation is read back from the audit trail (`detail.consent`). Hermes's cells are in
tests/clients/test_hermes.py and test_hermes_oauth.py; docs/consent.md's table names every cell's test.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from mnote_mcp.kernel.port import Correlation, PageQuery
from mnote_mcp.kernel.sqlite.opening import open_kernel
from tests.clients.consent_scenario import (
    ASKED,
    ASKED_THEN_UNDONE,
    DELETED_THEN_UNDONE,
    HELD,
    KEPT,
    PERSON_NO,
    PERSON_YES,
    PLANTED,
    TARGET,
    TARGET_IDS,
    TARGET_PAGE,
    UNDONE,
    audit_trail,
    consent_model,
    outcome,
)
from tests.clients.frameworks.harness import run_in, run_ts
from tests.clients.hermes.fake_model import scripted_model
from tests.support.helpers import EVERY_TOOL_ENV, FIXTURE, store_with_pages
from tests.support.http_helpers import RunningServer, http_server, write_tokens

pytestmark = [pytest.mark.frameworks]

TOKEN = "consent-editor-token-0123456789"
# What docs/clients.md tells the OpenAI-style agent frameworks to run the server with.
AGENT_FLAGS = ("--tool-names", "underscore", "--schema-form", "strict")
# (label, the server it talks to, transport): each host's default transports and --stateless.
CELLS = (
    ("stdio", "default", "stdio"),
    ("mcp", "default", "http"),
    ("sse", "default", "sse"),
    ("stateless", "stateless", "http"),
)
PERSONS = {"yes": PERSON_YES, "no": PERSON_NO}


@dataclass
class Served:
    db: Path
    server: RunningServer
    flags: tuple[str, ...]

    @property
    def url(self) -> str:
        return self.server.url


@contextmanager
def served(base: Path, *flags: str) -> Iterator[Served]:
    base.mkdir(parents=True, exist_ok=True)
    db = store_with_pages(base / "mnote.db", FIXTURE, PLANTED, TARGET)
    tokens = write_tokens(base / "tokens.json", {TOKEN: {"actorId": "user_editor"}})
    with http_server(db, "--auth-file", str(tokens), *flags) as server:
        yield Served(db, server, flags)


@contextmanager
def both_servers(tmp_path: Path, *flags: str) -> Iterator[dict[str, Served]]:
    """A server with the defaults and one with `--stateless`, each on its own store."""
    with ExitStack() as stack:
        yield {
            "default": stack.enter_context(served(tmp_path / "default", *flags)),
            "stateless": stack.enter_context(served(tmp_path / "stateless", *flags, "--stateless")),
        }


@pytest.fixture(scope="module")
def agent_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Served]]:
    """The pair the agent frameworks talk to, as docs/clients.md runs it for them; made once for the
    module (each test's conversations are labelled by host, and each leaves the target page as it was)."""
    with both_servers(tmp_path_factory.mktemp("consent-agents"), *AGENT_FLAGS) as servers:
        yield servers


@pytest.fixture(scope="module")
def client_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Served]]:
    """The pair the client libraries talk to (the server's defaults), made once for the module."""
    with both_servers(tmp_path_factory.mktemp("consent-clients")) as servers:
        yield servers


def connection(where: Served, transport: str, label: str) -> dict[str, Any]:
    """As the host's example configures it: stdio starts a server of its own on the store; over HTTP
    the token, and the run named by `X-Mnote-Run-Id` as the examples do."""
    if transport == "stdio":
        return {
            "transport": "stdio",
            "command": sys.executable,
            "args": ["-m", "mnote_mcp", "--db", str(where.db), "--actor", "user_editor", *where.flags],
            "env": {"PATH": os.environ.get("PATH", ""), "MNOTE_LOCALE": "en", **EVERY_TOOL_ENV},
        }
    endpoint = "/mcp" if transport == "http" else "/sse"
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Mnote-Run-Id": f"run-{label}"}
    return {"transport": transport, "url": where.url + endpoint, "headers": headers}


def conversations(servers: dict[str, Served], host: str, **extra: Any) -> dict[str, dict[str, Any]]:
    """One conversation per cell and answer of the person: `<host>-<cell>-<yes|no>`."""
    found: dict[str, dict[str, Any]] = {}
    for cell, server, transport in CELLS:
        for answer in PERSONS:
            label = f"{host}-{cell}-{answer}"
            found[label] = {**connection(servers[server], transport, label), "person": answer, **extra}
    return found


def db_of(servers: dict[str, Served], label: str) -> Path:
    return servers["stateless" if "-stateless-" in label else "default"].db


def check_conversations(servers: dict[str, Served], labels: list[str], consent: str = "handle") -> None:
    """Each conversation in its store's audit trail: stopped at the consent step; on "no" nothing of
    its run written; on "yes" the delete once, as consented, then the undo of its own run. The target
    page is as it was."""
    trails = {name: audit_trail(where.db) for name, where in servers.items()}
    for label in labels:
        got = outcome(trails["stateless" if "-stateless-" in label else "default"], label)
        asked = consent == "asked" and "-stateless-" not in label
        if label.endswith("-no"):
            assert got.stopped == ("declined" if asked else HELD), (label, got)
            assert got.writes == [], (label, got)
        else:
            assert got.stopped == (None if asked else HELD), (label, got)
            assert got.writes == (ASKED_THEN_UNDONE if asked else DELETED_THEN_UNDONE), (label, got)
    for where in servers.values():
        assert page_ids(where.db) == TARGET_IDS


def page_ids(db: Path) -> list[str]:
    """The target page's top-level blocks, as the kernel reads them."""

    async def read() -> list[str]:
        kernel = open_kernel(db)
        try:
            ids = Correlation("sess_check", "run_check", "call_check", "trace_check")
            view = await kernel.get_page(PageQuery("ws_1", "doc_target", "user_editor", ids))
        finally:
            await kernel.aclose()
        return [block["id"] for block in view.get("blocks", [])]

    return anyio.run(read)


# -- the agent frameworks: a scripted model obeys the planted page; the person answers in the chat --

RUNNERS = {
    "openai-agents": "run_openai_agents.py",
    "pydantic-ai": "run_pydantic_ai.py",
    "langchain": "run_langchain.py",
}


@pytest.mark.parametrize("framework", list(RUNNERS))
def test_an_agent_framework_obeying_a_planted_instruction_is_stopped_at_the_consent_step(
    agent_servers: dict[str, Served], framework: str
) -> None:
    """No elicitation in these frameworks (as their examples run them): every cell answers the
    confirmation result; the agent asks its person, and only their yes brings the handle back."""
    servers = agent_servers
    with scripted_model(consent_model) as (url, _):
        chats = conversations(servers, framework)
        for chat in chats.values():
            chat["person"] = PERSONS[chat["person"]]
        answers = run_in(
            framework, RUNNERS[framework], stdin={"model_url": url, "connections": chats}, timeout=600
        )
    for label, answer in answers.items():
        assert str(answer["asked"]).startswith(ASKED), (label, answer)
        assert "needs the person's confirmation" in str(answer["asked"]), (label, answer)
        assert answer["final"] == (KEPT if label.endswith("-no") else UNDONE), (label, answer)
    check_conversations(servers, list(chats))


# -- the client libraries: a scripted agent in the client's own process -----------------------------


def test_fastmcp_obeying_a_planted_instruction_is_stopped_at_the_consent_step(
    client_servers: dict[str, Served],
) -> None:
    servers = client_servers
    chats = conversations(servers, "fastmcp")
    answers = run_in("fastmcp", "consent_fastmcp.py", stdin={"connections": chats}, timeout=600)
    for label, answer in answers.items():
        held = answer["envelopes"][1]
        assert held["ok"] is False and held["error"]["details"]["confirmation"] == "required", (label, held)
        assert answer["final"] == ("kept" if label.endswith("-no") else "undone"), (
            label,
            answer["envelopes"],
        )
    check_conversations(servers, list(chats))


@pytest.mark.parametrize("elicitation", ["none", "handler"])
def test_the_typescript_sdk_obeying_a_planted_instruction_is_stopped_at_the_consent_step(
    client_servers: dict[str, Served], elicitation: str
) -> None:
    """Without an elicitation handler (the example): the confirmation result in every cell. With one
    (the person answers at the client's prompt): asked over stdio, `/mcp` and `/sse`; `--stateless`
    has no channel for the answer, so there it is the confirmation result too."""
    servers = client_servers
    chats = conversations(servers, f"ts-{elicitation}")
    if elicitation == "handler":
        for label, chat in chats.items():
            chat["elicitation"] = "decline" if label.endswith("-no") else "accept"
    answers = run_ts("consent_ts.mjs", stdin={"connections": chats}, timeout=600)
    for label, answer in answers.items():
        asked = elicitation == "handler" and "-stateless-" not in label
        assert len(answer["questions"]) == (1 if asked else 0), (label, answer["questions"])
        if asked:
            assert "Launch plan" in answer["questions"][0] and "Deletes 3 block(s)" in answer["questions"][0]
        assert answer["final"] == ("kept" if label.endswith("-no") else "undone"), (
            label,
            answer["envelopes"],
        )
    check_conversations(servers, list(chats), "asked" if elicitation == "handler" else "handle")


@pytest.mark.parametrize(
    ("server", "consent"), [("default", "asked"), ("stateless", "held")], ids=["mcp", "stateless"]
)
def test_a_typescript_client_that_declines_is_never_written(
    client_servers: dict[str, Served], server: str, consent: str
) -> None:
    """Issue 31 (high): the TypeScript SDK with an elicitation handler that declines had the delete
    written, on a default `/mcp` server and on `--stateless`."""
    where = client_servers[server]
    delete = {**TARGET_PAGE, "blockIds": ["risks"], "idempotencyKey": "ts-decline", "dryRun": False}
    chat = {
        "transport": "http",
        "url": where.url + "/mcp",
        "headers": {"Authorization": f"Bearer {TOKEN}"},
        "elicitation": "decline",
        "calls": [
            {"name": "mnote.block.delete", "arguments": delete},
            {"name": "mnote.page.get", "arguments": TARGET_PAGE},
        ],
    }
    (answer,) = run_ts("ts_client.mjs", stdin={"connections": {"ts": chat}}).values()
    deleted, read = (
        result["structuredContent"] or json.loads(result["text"][0]) for result in answer["results"]
    )
    assert [block["id"] for block in read["result"]["blocks"]] == TARGET_IDS, "not written"
    assert deleted["ok"] is False, deleted
    if consent == "asked":
        assert len(answer["questions"]) == 1 and "Launch plan" in answer["questions"][0]
        assert deleted["error"]["details"]["confirmation"] == "declined"
    else:
        assert answer["questions"] == []
        assert deleted["error"]["details"]["confirmation"] == "required"
