"""The servers behind one real Hermes (hermes-agent 0.19.0 in `.ci/hermes`), and what its model reads.

Every call goes through Hermes's own MCP client and dispatch (`tests/clients/hermes/driver.py`), and
its answer is then made what the agent loop shows the model (Hermes's per-result cut for the model's
window, its untrusted-data banner): the agent reads only that. A task's bytes are what the model
reads: the tool definitions of its server with every model request (a task of n calls is n + 1
requests, the last one answering), plus each result once. Definitions are charged two ways: every
definition with every request, as Hermes 0.19.0 sends them; and only the definitions of the tools the
task calls, with every request, as a host that defers tools behind a search (Hermes >= 0.20) sends them
at best. What the model writes (the call arguments) is counted apart.

mnote runs twice: this checkout, and (`--before DIR`) another release's tree beside it, each on a store
of its own seeded alike, both on their defaults; the filesystem server on the same pages as Markdown.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.targets import ROOT
from tests.clients.hermes.harness import HermesDriver, hermes_driver, model_name, payload, write_home

FILESYSTEM_JS = (
    ROOT
    / "bench"
    / "node"
    / "node_modules"
    / "@modelcontextprotocol"
    / "server-filesystem"
    / "dist"
    / "index.js"
)
MNOTE, BEFORE, FILESYSTEM = "mnote", "before", "filesystem"
CONTEXT = 200_000  # a 200k-token model: Hermes's per-result cut is its full 100,000 characters


def definition_bytes(definitions: list[dict[str, Any]]) -> int:
    return sum(len(json.dumps(d, ensure_ascii=False, separators=(",", ":")).encode()) for d in definitions)


@dataclass
class Tally:
    """One agent's task: its calls, what the model read of their results, what it wrote."""

    calls: int = 0
    result_bytes: int = 0
    written_bytes: int = 0
    cut: int = 0  # results Hermes replaced by a preview
    limited: int = 0  # calls refused over a per-actor limit (mnote_tool_rate_limited): 0 at the defaults
    log: list[tuple[str, int]] = field(default_factory=list)  # each call and the bytes the model read


@dataclass
class Agent:
    """The model's side of one server: call a tool, read what Hermes shows of the answer."""

    driver: HermesDriver
    key: str
    tally: Tally = field(default_factory=Tally)
    # The server takes a page's title in `documentId` (issue 35): read from its definitions, as a model
    # reads it; an agent of a release without it searches for the page first.
    titles: bool = False
    # What the person types at Hermes's approval prompt when mnote asks before a destructive write
    # (a revert asks by default: docs/hermes.md); "" is no answer, a denial. The question goes to the
    # person, not to the model: it is not counted.
    approve: str = ""

    def call(self, tool: str, **arguments: Any) -> str:
        name = model_name(self.key, tool)
        shown = self.driver.present(name, self.driver.answered(name, self.approve, **arguments)[0], CONTEXT)
        self.tally.calls += 1
        self.tally.result_bytes += len(shown.encode())
        self.tally.log.append((tool, len(shown.encode())))
        self.tally.written_bytes += len(json.dumps(arguments, ensure_ascii=False).encode())
        if "[Truncated: tool response was" in shown or "<persisted-output>" in shown:
            self.tally.cut += 1
        if "mnote_tool_rate_limited" in shown:
            self.tally.limited += 1
        return payload(shown)

    def result(self, tool: str, **arguments: Any) -> Any:
        """The call's answer as the model reads it: Hermes's `{"result": ...}` (or `{"error": ...}`)
        parsed; None where Hermes cut it to a preview (not JSON any more)."""
        try:
            outer = json.loads(self.call(tool, **arguments))
        except ValueError:
            return None
        return outer


def takes_titles(definitions: list[dict[str, Any]]) -> bool:
    """Whether a server's `documentId` says it takes a title (the words a model reads)."""
    for definition in definitions:
        described = definition["function"]["parameters"].get("properties", {}).get("documentId", {})
        if "title" in str(described.get("description", "")):
            return True
    return False


@dataclass
class Servers:
    driver: HermesDriver
    definitions: dict[str, list[dict[str, Any]]]

    def agent(self, key: str) -> Agent:
        return Agent(self.driver, key, titles=takes_titles(self.definitions[key]))

    def definition_bytes(self, key: str, used: Collection[str] | None = None) -> int:
        """Every definition of `key`'s server (and Hermes's tools for it), or only those of the tools
        in `used` (their names as the server gives them)."""
        chosen = self.definitions[key]
        if used is not None:
            names = {model_name(key, tool) for tool in used}
            chosen = [d for d in chosen if d["function"]["name"] in names]
        return definition_bytes(chosen)


def mnote_command(base: Path, tree: Path | None) -> Path:
    """This checkout's `mnote-mcp`, or a script running another tree's package with this interpreter
    (`python -m` puts the working directory first on sys.path)."""
    if tree is None:
        return Path(sys.executable).parent / "mnote-mcp"
    script = base / "mnote-mcp-before"
    script.write_text(
        f'#!/bin/sh\ncd "{tree}" && exec "{sys.executable}" -m mnote_mcp "$@"\n', encoding="utf-8"
    )
    script.chmod(0o755)
    return script


@contextmanager
def servers(base: Path, dbs: dict[str, Path], notes: Path, before: Path | None = None) -> Iterator[Servers]:
    """Hermes connected to mnote (stdio, the shipped defaults; `before`: another tree's too) and to the
    filesystem server on `notes`."""
    config = "mcp_servers:\n"
    for key, tree in ((MNOTE, None), (BEFORE, before)):
        if key not in dbs:
            continue
        args = json.dumps(["--db", str(dbs[key]), "--actor", "user_1", "--log-level", "warning"])
        config += f"  {key}:\n    command: {mnote_command(base, tree)}\n    args: {args}\n    timeout: 300\n"
    config += (
        f"  {FILESYSTEM}:\n    command: node\n    args: {json.dumps([str(FILESYSTEM_JS), str(notes)])}\n"
        "    timeout: 300\n"
    )
    home = write_home(base / "home", config)
    with hermes_driver(home, base / "hermes.log") as driver:
        definitions = {key: driver.discover(key) for key in (*dbs, FILESYSTEM)}
        yield Servers(driver, definitions)
