"""Finishing what was started: calls in flight complete and answer before a connection shuts down.

The SDK cancels in-flight handlers the moment its read stream ends (stdin closed, server stopping).
A write running in a kernel thread still commits, but its answer would be lost, and a client that
pipes requests and closes stdin would never see them answered. `DrainingReadStream` holds the end of
the stream back until the calls in flight have answered, or a grace period has passed; past it, the
calls still running are stopped (`InFlight.stop`) and answer `shutting_down` (retryable) before the
stream ends, rather than nothing.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Generic, TypeVar

import anyio

from mnote_mcp.calls.dispatch import DEFAULT_GRACE_SECONDS, InFlight

# How long the calls stopped past the grace have to hand their answers to the transport.
ANSWER_SECONDS = 1.0

T = TypeVar("T")


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
            if not await self._inflight.settle(self._grace) and self._inflight.stop():
                await self._inflight.settle(ANSWER_SECONDS)
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
