"""The one page-change path: every write says what it did to a page, and this is where it says it.

A command, a revert, a fixture's new or replaced page and a migration that rebuilds an index each make
a `PageChange` (the page, its new revision, its title before and after, every block row before and
after) and hand it to `publish`, inside the writing transaction, after its rows are written and before
COMMIT. `publish` feeds, in order, the dialect's search index (`SearchIndex.apply`), its change
notification (`ChangeFeed.publish`) and the store's own write hooks; one that raises rolls the write
back. So a search after a write sees it, a rolled-back write leaves no trace, and both databases index
and announce every write the same way. Once the transaction commits, the feed is told
(`ChangeFeed.committed`): SQLite tells this process's listeners then; PostgreSQL's NOTIFY, sent in the
transaction, is delivered by the database at COMMIT to every replica.

`Writes` is one write transaction: its connection and the changes published in it, with savepoints
that take back what a rolled-back command published (group commit). `Listeners` is the fan-out both
feeds use to tell a process's listeners; `InProcessFeed` is a feed that tells them after COMMIT (the
SQLite dialect's: another process's writes are not heard, the resource watcher's poll finds them).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from mnote_mcp.kernel.port import PageChangeListener, PageKey
from mnote_mcp.kernel.store.rows import BlockChange
from mnote_mcp.kernel.store.sql import Connection

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PageChange:
    """What one write did to one page (see the module)."""

    workspace_id: str
    page_id: str
    revision: int
    title: tuple[str, str] | None  # (before, after) when it changed; a new page: ("", its title)
    blocks: list[BlockChange]
    created: bool = False  # the page is new (a fixture's page), or an index is rebuilt from its rows

    @property
    def recorded(self) -> bool:
        """Whether the write is in the page's history (every write but a page's creation)."""
        return not self.created


WriteHook = Callable[[Connection, PageChange], None]


def publish(conn: Connection, change: PageChange, sinks: Iterable[WriteHook]) -> None:
    """The one page-change path (see the module): every sink, in order, in the writing transaction."""
    for sink in sinks:
        sink(conn, change)


class Writes:
    """One write transaction: its connection, and the page changes published in it so far."""

    __slots__ = ("_sinks", "changes", "conn")

    def __init__(self, conn: Connection, sinks: Callable[[], Iterable[WriteHook]]) -> None:
        self.conn = conn
        self.changes: list[PageChange] = []
        self._sinks = sinks

    def publish(self, change: PageChange) -> None:
        publish(self.conn, change, self._sinks())
        self.changes.append(change)

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A part of the transaction that can fail alone: rolled back to where it began (with what it
        published), the rest of the transaction going on; what it raised goes up."""
        mark = len(self.changes)
        self.conn.execute("SAVEPOINT command")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK TO command")
            del self.changes[mark:]
            raise
        finally:
            self.conn.execute("RELEASE command")


class Listeners:
    """A process's page-change listeners (thread-safe); a listener's failure is its own."""

    def __init__(self) -> None:
        self._listeners: dict[int, PageChangeListener] = {}
        self._next = 0
        self._lock = threading.Lock()

    def add(self, listener: PageChangeListener) -> Callable[[], None]:
        with self._lock:
            token = self._next
            self._next += 1
            self._listeners[token] = listener

        def remove() -> None:
            with self._lock:
                self._listeners.pop(token, None)

        return remove

    def __bool__(self) -> bool:
        return bool(self._listeners)

    def tell(self, key: PageKey, revision: int) -> None:
        with self._lock:
            listeners = list(self._listeners.values())
        for listener in listeners:
            try:
                listener(key, revision)
            except Exception:  # the others still hear
                logger.debug("a page change listener failed", exc_info=True)


class InProcessFeed:
    """A `ChangeFeed` of this process's writes: its listeners are told after each COMMIT."""

    def __init__(self) -> None:
        self.listeners = Listeners()

    def publish(self, conn: Connection, change: PageChange) -> None:
        """Nothing to send in the transaction: a write that rolls back is never told."""

    def committed(self, changes: Sequence[PageChange]) -> None:
        if self.listeners:
            for change in changes:
                self.listeners.tell(PageKey(change.workspace_id, change.page_id), change.revision)

    def watch(self, listener: PageChangeListener) -> Callable[[], None]:
        return self.listeners.add(listener)

    def close(self) -> None:
        """Nothing runs on its own."""
