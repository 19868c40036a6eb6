"""`python -m bench.profile TARGET OUT.svg`: a flame graph of one stdio server under load.

The server is driven by the raw client with 32 `mnote.page.get` reads (or the echo's page) in flight
for `--seconds`, while `py-spy record` samples it (`pip install py-spy`; it needs ptrace rights over
the child). TARGET: `mnote` (as it serves by default), `mnote-before` (the SDK's stdio transport on
the standard asyncio loop: what mnote was before issue 14), `echo` (the SDK echo), `echo-mnote-io`
(the echo through mnote's transport). `--format raw` writes collapsed stacks instead, for reading
with any flame graph tool; docs/performance.md shows the SVGs this writes.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import fixtures
from bench.measure import checked, in_flight
from bench.rawclient import StdioPeer
from bench.targets import Target, echo, mnote

TARGETS = ("mnote", "mnote-before", "echo", "echo-mnote-io")


def target(name: str, db: Path) -> Target:
    return {
        "mnote": lambda: mnote(db),
        "mnote-before": lambda: mnote(db, None, "--stdio-transport", "sdk", "--no-uvloop"),
        "echo": lambda: echo(),
        "echo-mnote-io": lambda: echo(transport="mnote"),
    }[name]()


async def profile(name: str, out: Path, seconds: int, form: str) -> int:
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    with tempfile.TemporaryDirectory(prefix="mnote-profile-") as tmp:
        db = Path(tmp) / "bench.db"
        fixtures.seed_mnote(db, (50,))
        chosen = target(name, db)
        peer = await StdioPeer.spawn(chosen.argv, chosen.env, str(chosen.cwd))
        try:
            await peer.initialize()
            tool, args = chosen.read
            for n in range(50):  # warm up
                await checked(peer.call(tool, args(n)))
            record = ["record", "--pid", str(peer.process.pid), "-d", str(seconds), "-r", "250"]
            sampler = await asyncio.create_subprocess_exec(
                spy, *record, "-o", str(out), "-f", form, stdout=subprocess.DEVNULL
            )
            await asyncio.sleep(1)
            calls, end = 0, time.monotonic() + seconds - 1
            while time.monotonic() < end:
                await in_flight(lambda n: checked(peer.call(tool, args(n))), 200, 32)
                calls += 200
            status = await sampler.wait()
        finally:
            await peer.close()
    print(f"{name}: {calls} calls in {seconds} s sampled into {out}")
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__)
    parser.add_argument("target", choices=TARGETS)
    parser.add_argument("out", type=Path)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--format", default="flamegraph", choices=("flamegraph", "raw", "speedscope"))
    args = parser.parse_args(argv)
    return asyncio.run(profile(args.target, args.out, args.seconds, args.format))


if __name__ == "__main__":
    sys.exit(main())
