"""How to start each server under test, and what a read and a write call to it are."""

from __future__ import annotations

import itertools
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.fixtures import ACTOR, PAGE, WORKSPACE
from tests.support.helpers import every_tool_env

ROOT = Path(__file__).resolve().parent.parent
MEMORY_SERVER = (
    ROOT / "bench" / "node" / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
)
Args = Callable[[int], dict[str, Any]]
_unique = itertools.count()
# Python servers load bytecode as an installed package does (pip compiles it at install), from a cache
# outside the source trees, whatever PYTHONDONTWRITEBYTECODE the shell has: without it, mnote (an
# editable install) would compile every one of its modules on every start while the SDK, the echo's
# whole weight, loads compiled ones. The first start of each target (untimed) fills it.
PYCACHE = {
    "PYTHONDONTWRITEBYTECODE": "",
    "PYTHONPYCACHEPREFIX": str(Path(tempfile.gettempdir()) / "mnote-bench-pycache"),
}


@dataclass
class Target:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path = ROOT
    read: tuple[str, Args] = ("", lambda n: {})
    write: tuple[str, Args] = ("", lambda n: {})


def mnote(db: Path, baseline: Path | None = None, *flags: str) -> Target:
    """mnote-mcp on `db`; with `baseline`, the same from another source tree (an earlier release);
    `flags` are more of its flags (the target is named after them). It answers in both forms, every
    failure `isError` (`--result-form both --refusals error`), as the echo server does and as every
    figure of docs/performance.md before issue 22 was measured: the same protocol work whatever the
    default (one text block since issue 22, which is less), and a failed call is never counted."""
    env = {**PYCACHE, **every_tool_env(baseline or ROOT)}  # the suites call every tool
    if baseline is not None:
        env["PYTHONPATH"] = str(baseline)
    name = "mnote" if baseline is None else "mnote-baseline"
    return Target(
        name=" ".join((name, *flags)),
        cwd=baseline or ROOT,  # `python -m` puts the working directory first on sys.path
        argv=[
            sys.executable,
            "-m",
            "mnote_mcp",
            "serve",
            "--db",
            str(db),
            "--actor",
            ACTOR,
            "--log-level",
            "warning",
            *("--result-form", "both", "--refusals", "error"),
            *flags,
        ],
        env=env,
        read=("mnote.page.get", lambda n: {"workspaceId": WORKSPACE, "documentId": PAGE}),
        write=(
            "mnote.artifact.create_ai_note",
            lambda n: {
                "workspaceId": WORKSPACE,
                "documentId": PAGE,
                "content": f"note {n}",
                "idempotencyKey": f"bench_{os.getpid()}_{next(_unique)}",
                "dryRun": False,
            },
        ),
    )


def echo(blocks: int = 50, transport: str = "sdk") -> Target:
    """The floor: a page-like answer of as many blocks, structured content plus text, as mnote's;
    served through the SDK's stdio transport (`echo`) or through mnote's (`echo-mnote-io`)."""
    call: Args = lambda n: {"blocks": blocks}  # noqa: E731 - one expression, named for the table
    mode = ["mnote-stdio"] if transport == "mnote" else []
    return Target(
        name="echo" if transport == "sdk" else "echo-mnote-io",
        argv=[sys.executable, str(ROOT / "bench" / "echo_server.py"), *mode],
        env=dict(PYCACHE),
        read=("echo_page", call),
        write=("echo_page", call),
    )


def echo_text(size: int) -> Target:
    """The bare minimum: plain text of as many characters as mnote's read answer."""
    call: Args = lambda n: {"size": size}  # noqa: E731
    return Target(
        name="echo-text",
        argv=[sys.executable, str(ROOT / "bench" / "echo_server.py")],
        env=dict(PYCACHE),
        read=("echo", call),
        write=("echo", call),
    )


def memory(data: Path) -> Target | None:
    if not MEMORY_SERVER.exists():
        return None
    return Target(
        name="server-memory",
        argv=["node", str(MEMORY_SERVER)],
        env={"MEMORY_FILE_PATH": str(data)},
        read=("read_graph", lambda n: {}),
        write=(
            "add_observations",
            lambda n: {
                "observations": [
                    {"entityName": "entity_0", "contents": [f"bench {os.getpid()} {next(_unique)}"]}
                ]
            },
        ),
    )
