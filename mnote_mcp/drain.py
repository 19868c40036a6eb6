"""Finishing what was started: calls in flight complete and answer before a connection shuts down.

The SDK cancels in-flight handlers the moment its read stream ends (stdin closed, server stopping).
A write running in a kernel thread still commits, but its answer would be lost, and a client that
pipes requests and closes stdin would never see them answered. `DrainingReadStream` holds the end of
the stream back until the calls in flight have answered, or a grace period has passed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any, Generic, TypeVar

import anyio

T = TypeVar("T")
DEFAULT_GRACE_SECONDS = 30.0
_QUIET_ROUNDS = 3
_ROUND_SECONDS = 0.02


class InFlight:
    """Counts calls in progress; `wait_idle` returns once there are none."""

    def __init__(self) -> None:
        self.count = 0
        self._idle: anyio.Event | None = None

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

    async def wait_idle(self, grace: float = DEFAULT_GRACE_SECONDS) -> bool:
        """True when idle; False when the grace period ran out first."""
        with anyio.move_on_after(grace):
            while self.count:
                if self._idle is None:
                    self._idle = anyio.Event()
                await self._idle.wait()
            return True
        return False

    async def settle(self, grace: float = DEFAULT_GRACE_SECONDS) -> bool:
        """Wait until idle and staying idle: a request read just before the end may not have reached
        its handler yet, so idleness must hold across a few scheduling rounds."""
        with anyio.move_on_after(grace):
            quiet = 0
            while quiet < _QUIET_ROUNDS:
                await anyio.sleep(_ROUND_SECONDS)
                if self.count:
                    quiet = 0
                    await self.wait_idle(grace)
                else:
                    quiet += 1
            return True
        return False


class DrainingReadStream(Generic[T]):
    """A read stream whose end waits for the calls in flight (same protocol as the SDK's streams)."""

    def __init__(self, inner: Any, inflight: InFlight, grace: float = DEFAULT_GRACE_SECONDS) -> None:
        self._inner = inner
        self._inflight = inflight
        self._grace = grace

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> T:
        try:
            item: T = await self._inner.receive()
        except anyio.EndOfStream:
            await self._inflight.settle(self._grace)
            raise
        return item

    def __aiter__(self) -> DrainingReadStream[T]:
        return self

    async def __anext__(self) -> T:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> DrainingReadStream[T]:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
