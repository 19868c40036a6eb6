"""What a server is running now, and waiting until it runs nothing: the MCP server's tool calls
(`calls.dispatch.InFlight`) and the reference runtime's requests (`runtime.stopping.Requests`) stop
the same way, the work in flight answering first, then after a grace cancelled, so both count it here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio


class Running:
    """A count of what runs, the cancel scopes that can stop it, and a wait for none."""

    def __init__(self) -> None:
        self.count = 0
        self._idle: anyio.Event | None = None
        self._scopes: set[anyio.CancelScope] = set()

    @contextmanager
    def track(self) -> Iterator[None]:
        self.count += 1
        try:
            yield
        finally:
            self.count -= 1
            if self.count == 0 and self._idle is not None:
                self._idle.set()
                self._idle = None

    @contextmanager
    def cancellable(self, scope: anyio.CancelScope) -> Iterator[anyio.CancelScope]:
        """`scope` entered, cancelled by `cancel`."""
        self._scopes.add(scope)
        try:
            with scope:
                yield scope
        finally:
            self._scopes.discard(scope)

    def cancel(self) -> int:
        """Cancel everything running under a scope; how many."""
        for scope in list(self._scopes):
            scope.cancel()
        return len(self._scopes)

    async def settle(self, seconds: float) -> bool:
        """True once nothing runs; False when `seconds` ran out first."""
        with anyio.move_on_after(seconds):
            while self.count:
                if self._idle is None:
                    self._idle = anyio.Event()
                await self._idle.wait()
            return True
        return False
