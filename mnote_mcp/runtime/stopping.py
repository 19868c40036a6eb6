"""`runtime serve` stopping: the requests in flight answer, and a request the runtime will not run gets
the protocol's own refusal, `503` `mnote_tool_runtime_unavailable` (`shutting_down`), which a relay
retries.

uvicorn's graceful shutdown waits a while for connections to finish, then cancels what still runs,
and a request cancelled so is answered by uvicorn itself: a bare `500 Internal Server Error` in plain
text, which a relay reads as a bug in the runtime and does not retry (issue 30). So the runtime takes
over, as the MCP server does (`transports/server.py`): on SIGTERM/SIGINT it stops accepting
connections, answers every request that arrives from then on (on a connection already open) with the
refusal at once, lets the requests in flight finish for `--shutdown-grace`, then cancels those still
running (a kernel call on a worker thread is abandoned, its transaction committing or rolling back
whole: the idempotency key makes the relay's retry safe) and they answer the refusal too; only then
does uvicorn close the connections and the lifespan close the kernel.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import uvicorn

from mnote_mcp.base.httplisten import GuardedServer
from mnote_mcp.base.running import Running
from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason

logger = logging.getLogger(__name__)
# How long the requests stopped past the grace have to hand their answers to uvicorn.
ANSWER_SECONDS = 1.0
RETRY_AFTER_SECONDS = 1


def shutting_down() -> MnoteError:
    """The runtime stopped before the request finished (or began): retryable, as a write may still
    commit after this and its idempotency key makes the retry safe."""
    return MnoteError(ErrorCode.RUNTIME_UNAVAILABLE, Reason.SHUTTING_DOWN, {"cause": "shutting_down"})


class Requests(Running):
    """The requests the runtime is running; `closing` once it stops accepting."""

    def __init__(self) -> None:
        super().__init__()
        self.closing = False

    @contextmanager
    def running(self) -> Iterator[anyio.CancelScope]:
        """A request's cancel scope, cancelled by `stop`."""
        with self.track(), self.cancellable(anyio.CancelScope()) as scope:
            yield scope

    def stop(self) -> int:
        """Cancel every request still running; how many."""
        return self.cancel()


class StoppingServer(GuardedServer):
    """uvicorn under the connection cap, stopping as the module says."""

    def __init__(self, config: uvicorn.Config, requests: Requests, grace: float) -> None:
        super().__init__(config)
        self._requests = requests
        self._grace = grace

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._requests.closing = True
        for server in self.servers:
            server.close()
        logger.info("shutting down: no new connections; %d request(s) in flight", self._requests.count)
        if not await self._requests.settle(self._grace):
            stopped = self._requests.stop()
            logger.warning(
                "shutting down with %d request(s) still running after %gs: they answer shutting_down",
                stopped,
                self._grace,
            )
            await self._requests.settle(ANSWER_SECONDS)
        await super().shutdown(sockets)
