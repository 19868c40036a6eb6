"""Noticing that a watched page changed, whoever changed it.

Writes can come from any tool on any connection, or from another server process sharing the store
(stdio starts one process per client), so a watcher does not listen for writes: it polls the
kernel's `page_revisions` for the pages it watches, per actor (so a watch never outlives the actor's
read permission unnoticed), and calls a watch's `notify` when the revision it last saw changes. A
write made through this process nudges the watchers so its notification does not wait a full interval.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass

import anyio

from mnote_mcp.kernel.errors import MnoteError
from mnote_mcp.kernel.port import Kernel, PageKey

logger = logging.getLogger(__name__)
Notify = Callable[[], Awaitable[None]]
# What one connection may subscribe to, and one listen stream name (`--max-subscriptions`): each is a
# watch polled for as long as it lasts.
DEFAULT_MAX_SUBSCRIPTIONS = 1_000


@dataclass(eq=False)
class Watch:
    actor_id: str
    key: PageKey
    revision: int | None  # None: the page is gone, or no longer readable by the actor
    notify: Notify
    # Whether the credential that subscribed may still see the page (a token removed from the tokens
    # file, or narrowed to other workspaces, may not): a watch that may not is dropped, unannounced.
    allowed: Callable[[], bool] | None = None


class PageWatcher:
    def __init__(self, kernel: Kernel, interval: float) -> None:
        self.kernel = kernel
        self.interval = interval
        self._watches: dict[Hashable, Watch] = {}
        self._wake = anyio.Event()

    def add(self, token: Hashable, watch: Watch) -> None:
        self._watches[token] = watch

    def remove(self, token: Hashable) -> None:
        self._watches.pop(token, None)

    def __len__(self) -> int:
        return len(self._watches)

    def __contains__(self, token: Hashable) -> bool:
        return token in self._watches

    def nudge(self) -> None:
        if self._watches:  # nothing to poll for: a write need not wake the loop below
            self._wake.set()

    async def run(self) -> None:
        while True:
            with anyio.move_on_after(self.interval):
                await self._wake.wait()
            self._wake = anyio.Event()
            await self.poll()

    async def poll(self) -> None:
        by_actor: dict[str, list[tuple[Hashable, Watch]]] = {}
        for token, watch in list(self._watches.items()):
            if watch.allowed is not None and not watch.allowed():
                logger.info("dropping a watch whose credential no longer allows it")
                self.remove(token)
                continue
            by_actor.setdefault(watch.actor_id, []).append((token, watch))
        for actor_id, watches in by_actor.items():
            try:
                revisions = await self.kernel.page_revisions(actor_id, [watch.key for _, watch in watches])
            except MnoteError as error:
                logger.warning("revision poll for %s failed: %s", actor_id, error.code.value)
                continue
            except Exception:  # a failed poll must not end the server; the next one retries
                logger.exception("revision poll for %s failed", actor_id)
                continue
            for token, watch in watches:
                current = revisions.get(watch.key)
                if current == watch.revision:
                    continue
                watch.revision = current
                try:
                    await watch.notify()
                except Exception:  # the subscriber went away: stop watching for it
                    logger.debug("dropping a watch whose subscriber is gone", exc_info=True)
                    self.remove(token)
