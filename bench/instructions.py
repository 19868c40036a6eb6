"""`python -m bench.instructions`: instructions per call and per start, counted by valgrind.

On a shared machine, CPU time per call moves with the neighbours (caches, frequency, the other
hyperthread); the number of instructions a call executes does not. This counts them with valgrind's
callgrind (`apt-get install valgrind`), user space only (the kernel's side of a pipe write is not
in it), for two figures of issue 14:

- **per call**: the SDK `Server` of the echo and of mnote fed `tools/call` lines in process (framed and
  answered by mnote's stdio transport functions, no pipes), `--width` calls in flight; the count of a
  run of `--calls` calls minus that of a run of 64, divided by the difference: startup cancels out.
- **per start** (`--cold`): a server started, `initialize` and `tools/list` answered, stdin at EOF, the
  process ended: what a cold start executes, bytecode loaded from a cache as an installed package's.

`--write` counts writes instead of reads: mnote's `create_ai_note` (a key of its own per call), the
echo's page; the kernel's side of SQLite's `pwrite`s and `fsync`s is not in the count either.
`--root DIR` measures mnote from another source tree (an earlier commit, checked out there).
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.measure import without_call_limits

ROOT = Path(__file__).resolve().parent.parent
INIT = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    b'"capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}\n'
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
    b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n'
)
BASE_CALLS = 64


async def serve_calls(target: str, db: Path, calls: int, width: int) -> None:
    """The measured work: `calls` reads (`mnote`, `echo`) or writes (`mnote:write`: a
    `create_ai_note` with a key of its own each, what the stdio suite's write is; `echo:write`, the
    echo's page as its write) through the SDK server of the target, `width` in flight."""
    import anyio
    import orjson

    from bench import echo_server
    from bench.fixtures import ACTOR, PAGE, WORKSPACE
    from mnote_mcp.app import open_app
    from mnote_mcp.config import ServerConfig
    from mnote_mcp.transports.stdio import encode, frame

    target, _, kind = target.partition(":")
    config = ServerConfig(db=db, actor=ACTOR, demo=False, log_level="warning")
    async with open_app(config) as app:
        server: Any
        args: Callable[[int], dict[str, Any]]
        page = {"workspaceId": WORKSPACE, "documentId": PAGE}
        if target == "mnote" and kind == "write":
            server, tool = app.server(), "mnote.artifact.create_ai_note"

            def args(n: int) -> dict[str, Any]:
                key = f"i_{os.getpid()}_{n}"
                return {**page, "content": f"note {n}", "idempotencyKey": key, "dryRun": False}

        elif target == "mnote":
            server, tool, args = app.server(), "mnote.page.get", lambda n: page
        else:
            server, tool, args = echo_server.server, "echo_page", lambda n: {"blocks": 50}
        gc.freeze()
        send_in, read_in = anyio.create_memory_object_stream[Any](64)
        send_out, read_out = anyio.create_memory_object_stream[Any](64)
        async with anyio.create_task_group() as group:
            group.start_soon(server.run, read_in, send_out, server.create_initialization_options())
            for line in INIT.splitlines():
                framed = frame(line)
                assert framed.message is not None
                await send_in.send(framed.message)
                if b'"id"' in line:
                    encode(await read_out.receive())
            lines = [
                orjson.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": n + 10,
                        "method": "tools/call",
                        "params": {"name": tool, "arguments": args(n)},
                    }
                )
                for n in range(calls)
            ]
            for start in range(0, calls, width):
                chunk = lines[start : start + width]
                for line in chunk:
                    framed = frame(line)
                    assert framed.message is not None
                    await send_in.send(framed.message)
                for _ in chunk:
                    answer = encode(await read_out.receive())
                    assert b'"isError":false' in answer, answer[:1200]
            await send_in.aclose()
            group.cancel_scope.cancel()


def counted(argv: list[str], stdin: bytes = b"", cwd: Path = ROOT, env: dict[str, str] | None = None) -> int:
    """Instructions valgrind counts for one run of `argv`."""
    from bench.targets import PYCACHE

    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        env={**os.environ, **PYCACHE, **(env or {})},
        check=True,
    )
    found = re.search(rb"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(done.stderr.decode(errors="replace")[-2000:])
    return int(found.group(1))


def store_for(tree: Path, db: Path) -> Path:
    """`db`, or for another source tree a store of its own schema, seeded by its own code."""
    if tree == ROOT:
        return db
    own = db.with_name(f"{tree.name}.db")
    if not own.exists():
        seed = f"from pathlib import Path; from bench.fixtures import seed_mnote; seed_mnote(Path({str(own)!r}), (50,))"
        subprocess.run(
            [sys.executable, "-c", seed], check=True, cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}
        )
    return own


def per_call(target: str, db: Path, calls: int, width: int, root: Path) -> float:
    tree = root if target.startswith("mnote") else ROOT
    db = store_for(tree, db)

    def run(n: int) -> int:
        argv = [sys.executable, str(Path(__file__).resolve()), "--serve", target, str(db), str(n), str(width)]
        return counted(argv, cwd=tree, env={"PYTHONPATH": str(tree)})

    return (run(calls) - run(BASE_CALLS)) / (calls - BASE_CALLS)


def per_start(target: str, db: Path, root: Path) -> int:
    from bench.fixtures import ACTOR
    from bench.targets import PYCACHE

    if target == "mnote":
        db = store_for(root, db)
        argv = [
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
        ]
    else:
        argv = [sys.executable, str(ROOT / "bench" / "echo_server.py")]
        root = ROOT
    env = {"PYTHONPATH": str(root)}
    subprocess.run(
        argv, input=INIT, capture_output=True, cwd=root, env={**os.environ, **PYCACHE, **env}
    )  # warm
    return counted(argv, INIT, cwd=root, env=env)


def main(argv: list[str] | None = None) -> int:
    without_call_limits()
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__)
    parser.add_argument("--calls", type=int, default=320)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--cold", action="store_true", help="instructions per start instead")
    parser.add_argument("--write", action="store_true", help="per write (create_ai_note) instead of per read")
    parser.add_argument("--root", type=Path, default=ROOT, help="mnote from this source tree")
    parser.add_argument("--serve", nargs=4, help=argparse.SUPPRESS)  # the measured child
    args = parser.parse_args(argv)
    if args.serve:
        target, db, calls, width = args.serve
        import uvloop

        uvloop.run(serve_calls(target, Path(db), int(calls), int(width)))
        return 0
    from bench import fixtures

    with tempfile.TemporaryDirectory(prefix="mnote-instructions-") as tmp:
        db = Path(tmp) / "bench.db"
        fixtures.seed_mnote(db, (50,))
        figures = {}
        for target in ("echo", "mnote"):
            if args.cold:
                figures[target] = float(per_start(target, db, args.root))
            else:
                kind = f"{target}:write" if args.write else target
                figures[target] = per_call(kind, db, args.calls, args.width, args.root)
    what = "per start" if args.cold else f"per {'write' if args.write else 'read'} ({args.width} in flight)"
    print(
        f"instructions {what}: echo {figures['echo']:,.0f}  mnote {figures['mnote']:,.0f}  "
        f"mnote/echo {figures['mnote'] / figures['echo']:.2f}  (mnote from {args.root})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
