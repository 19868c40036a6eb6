"""Group commit: the writes that reach the kernel together, in one transaction (where the dialect
says so: SQLite).

A write's own work on SQLite is small next to what every transaction pays: `BEGIN IMMEDIATE`, and a
`COMMIT` that appends each page it changed to the log (the leaves of the artifact, edge, audit and
ledger tables and of their indexes). Writes that arrive together share them: one transaction, each
command in a `SAVEPOINT` of its own, run whole as if alone (permissions, idempotency ledger,
revision, plan, rows, history, search index, audit record with its own commandId). A command that
fails is rolled back to its savepoint and gets its own error; the others stand. Every caller is
answered after the `COMMIT`; a failed `BEGIN` or `COMMIT` fails every caller of the group and leaves
nothing written. A command with heavy work, or a store another connection holds, goes to a worker
thread alone, as any call of the kernel does (`MoveToThread`).

The first write to arrive leads: it lets the event loop run the calls already on their way, one turn
at a time, until `GATHER_TURNS` turns pass with no write joining (or `MAX_GROUP` have joined), then
runs the group on the loop and wakes the others. A sequential client's write makes a group of one,
run as a write always was (no savepoint), a few loop turns later. A leader cancelled while
gathering still runs its group, as a call abandoned on a thread still commits; so does a cancelled
follower's write (its retry replays). PostgreSQL is not grouped (`Dialect.group_commit`): its writers
of different pages run side by side, and a group would make them wait for each other's page locks.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import anyio
import anyio.lowlevel

from mnote_mcp.kernel.port import Command, CommandOutcome
from mnote_mcp.kernel.store import ledger
from mnote_mcp.kernel.store.bounds import heavy_request
from mnote_mcp.kernel.store.changes import Writes
from mnote_mcp.kernel.store.commands import CommandSpec, command_spec
from mnote_mcp.kernel.store.dialect import MoveToThread
from mnote_mcp.kernel.store.sql import Connection

# The most writes one transaction takes (a bound of the server's, not of a client's).
MAX_GROUP = 64
# Loop turns a leader waits, with no write joining, before it runs its group: a call read from the
# pipe takes a few turns to reach the kernel (the SDK's dispatcher, a task per request).
GATHER_TURNS = 3

# What a command of a group comes to: its outcome, or what it raised.
Done = CommandOutcome | Exception


class GroupStore(Protocol):
    """What a group needs of the store (`store.Store`; this module does not import it)."""

    def execute(self, command: Command, *, inline: bool = False) -> CommandOutcome: ...

    def writing(self, *, inline: bool = False) -> AbstractContextManager[Writes]: ...

    def run_command(
        self,
        conn: Connection,
        writes: Writes | None,
        command: Command,
        spec: CommandSpec[Any],
        payload: Any,
        print_: str,
        inline: bool,
    ) -> CommandOutcome: ...


def run_group(store: GroupStore, commands: Sequence[Command], *, inline: bool) -> list[Done]:
    """Real (not dry-run) commands in one transaction, each in a savepoint (see the module)."""
    done: list[Done] = [MoveToThread()] * len(commands)
    todo: list[tuple[int, Command, CommandSpec[Any], Any, str]] = []
    for index, command in enumerate(commands):
        try:
            if command.dry_run:
                raise ValueError("a dry run only reads: it is not run in a group")
            spec = command_spec(command.name)
            if inline and heavy_request(command.payload):
                raise MoveToThread  # validating, planning and writing that many blocks is heavy
            todo.append((index, command, spec, spec.validate(command.payload), ledger.fingerprint(command)))
        except Exception as exc:
            done[index] = exc
    if not todo:
        return done
    try:
        with store.writing(inline=inline) as writes:
            for index, command, spec, payload, print_ in todo:
                try:
                    with writes.savepoint():
                        done[index] = store.run_command(
                            writes.conn, writes, command, spec, payload, print_, inline
                        )
                except Exception as exc:
                    done[index] = exc
    except Exception as exc:  # nothing of the group is committed
        for index, *_ in todo:
            done[index] = exc
    return done


class _Waiting:
    __slots__ = ("answered", "command", "done")

    def __init__(self, command: Command) -> None:
        self.command = command
        self.done: Done | None = None
        self.answered = anyio.Event()


class GroupCommit:
    """Gathers the writes that reach the kernel together and runs them as one group (see the module)."""

    def __init__(self, store: GroupStore) -> None:
        self.store = store
        self._queue: list[_Waiting] = []
        self._leading = False

    async def submit(self, command: Command) -> Done:
        waiting = _Waiting(command)
        self._queue.append(waiting)
        if self._leading:
            await waiting.answered.wait()
        else:
            self._leading = True
            try:
                seen, idle = len(self._queue), 0
                while idle < GATHER_TURNS and len(self._queue) < MAX_GROUP:
                    await anyio.lowlevel.checkpoint()
                    idle = idle + 1 if len(self._queue) == seen else 0
                    seen = len(self._queue)
            finally:  # cancelled or not: the others wait on this group
                group, self._queue = self._queue, []
                self._leading = False
                self._run(group)
        assert waiting.done is not None
        return waiting.done

    def _run(self, group: list[_Waiting]) -> None:
        if len(group) == 1:
            try:
                group[0].done = self.store.execute(group[0].command, inline=True)
            except Exception as exc:
                group[0].done = exc
        else:
            outcomes = run_group(self.store, [waiting.command for waiting in group], inline=True)
            for waiting, done in zip(group, outcomes, strict=True):
                waiting.done = done
        for waiting in group:
            waiting.answered.set()
