"""Page writes as they commit, across replicas: PostgreSQL's LISTEN/NOTIFY (the dialect's `ChangeFeed`).

Every write that makes a revision sends `NOTIFY mnote_pages` inside its transaction (`publish`, on the
page-change path), so PostgreSQL delivers it when, and only if, the write commits, to every
connection listening on the database, whichever replica it belongs to. A process listens on one
dedicated connection (a `ChangeHub`, started by its first listener, on a daemon thread), and fans each
notification out to its listeners; the resource watcher is one (it then asks `page_revisions`, as
when it polls). A lost connection is reopened (after a second); since notifications may have been
missed meanwhile, every listener is then told "anything may have changed" (`ALL`), and polls.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence

import psycopg

from mnote_mcp.kernel.port import PageChangeListener, PageKey
from mnote_mcp.kernel.store.changes import Listeners, PageChange
from mnote_mcp.kernel.store.sql import Connection

CHANNEL = "mnote_pages"
ALL = PageKey("", "")  # "notifications may have been missed": every page may have changed
RECONNECT_SECONDS = 1.0
logger = logging.getLogger(__name__)


def parse(payload: str) -> tuple[PageKey, int] | None:
    try:
        data = json.loads(payload)
        return PageKey(str(data["w"]), str(data["d"])), int(data["r"])
    except (ValueError, TypeError, KeyError):
        return None


class NotifyFeed:
    """The feed of one PostgreSQL store: NOTIFY in the writing transaction, LISTEN for listeners."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.hub: ChangeHub | None = None
        self._lock = threading.Lock()

    def publish(self, conn: Connection, change: PageChange) -> None:
        """Announce the page's new revision, delivered when the transaction commits."""
        payload = json.dumps({"w": change.workspace_id, "d": change.page_id, "r": change.revision})
        conn.execute("SELECT pg_notify(?, ?)", (CHANNEL, payload))

    def committed(self, changes: Sequence[PageChange]) -> None:
        """Nothing more: PostgreSQL delivers the notifications at COMMIT, to this process too."""

    def watch(self, listener: PageChangeListener) -> Callable[[], None]:
        """Hear every page write committed on the database, by any replica."""
        with self._lock:
            if self.hub is None:
                self.hub = ChangeHub(self.url)
            hub = self.hub
        return hub.add(listener)

    def close(self) -> None:
        with self._lock:
            hub, self.hub = self.hub, None
        if hub is not None:
            hub.close()


class ChangeHub:
    """One LISTEN connection per process, shared by every listener of it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.listeners = Listeners()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.listening = threading.Event()  # set while the LISTEN connection is up

    def add(self, listener: PageChangeListener) -> Callable[[], None]:
        remove = self.listeners.add(listener)
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="mnote-listen", daemon=True)
                self._thread.start()
        return remove

    def _run(self) -> None:
        first = True
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, application_name="mnote-mcp listen") as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self.listening.set()
                    if not first:
                        self.listeners.tell(ALL, 0)  # whatever was written while we were away
                    first = False
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=0.5):
                            found = parse(note.payload)
                            if found is not None:
                                self.listeners.tell(*found)
            except psycopg.Error as exc:
                self.listening.clear()
                if not self._stop.is_set():
                    logger.warning("page change notifications lost (%s); reconnecting", exc)
                    self._stop.wait(RECONNECT_SECONDS)
        self.listening.clear()

    def close(self, timeout: float = 2.0) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
