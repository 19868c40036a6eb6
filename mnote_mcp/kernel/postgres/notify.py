"""Page writes as they commit, across replicas: PostgreSQL's LISTEN/NOTIFY.

Every write that makes a revision sends `NOTIFY mnote_pages` inside its transaction (a write hook), so
PostgreSQL delivers it when, and only if, the write commits, to every connection listening on the
database, whichever replica it belongs to. A process listens on one dedicated connection (a
`ChangeHub`, started by its first listener, on a daemon thread), and fans each notification out to
its listeners; the resource watcher is one (it then asks `page_revisions`, as when it polls). A lost
connection is reopened (after a second); since notifications may have been missed meanwhile, every
listener is then told "anything may have changed" (`ALL`), and polls.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable

import psycopg

from mnote_mcp.kernel.port import PageChangeListener, PageKey
from mnote_mcp.kernel.store.rows import PageChange
from mnote_mcp.kernel.store.sql import Connection

CHANNEL = "mnote_pages"
ALL = PageKey("", "")  # "notifications may have been missed": every page may have changed
RECONNECT_SECONDS = 1.0
logger = logging.getLogger(__name__)


def notify_hook(conn: Connection, change: PageChange) -> None:
    """The write hook: announce the page's new revision when the transaction commits."""
    payload = json.dumps({"w": change.workspace_id, "d": change.page_id, "r": change.revision})
    conn.execute("SELECT pg_notify(?, ?)", (CHANNEL, payload))


def parse(payload: str) -> tuple[PageKey, int] | None:
    try:
        data = json.loads(payload)
        return PageKey(str(data["w"]), str(data["d"])), int(data["r"])
    except (ValueError, TypeError, KeyError):
        return None


class ChangeHub:
    """One LISTEN connection per process, shared by every listener of it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._listeners: dict[int, PageChangeListener] = {}
        self._next = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.listening = threading.Event()  # set while the LISTEN connection is up

    def add(self, listener: PageChangeListener) -> Callable[[], None]:
        with self._lock:
            token = self._next
            self._next += 1
            self._listeners[token] = listener
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="mnote-listen", daemon=True)
                self._thread.start()

        def remove() -> None:
            with self._lock:
                self._listeners.pop(token, None)

        return remove

    def _tell(self, key: PageKey, revision: int) -> None:
        with self._lock:
            listeners = list(self._listeners.values())
        for listener in listeners:
            try:
                listener(key, revision)
            except Exception:  # a listener's failure is its own; the others still hear
                logger.debug("a page change listener failed", exc_info=True)

    def _run(self) -> None:
        first = True
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, application_name="mnote-mcp listen") as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self.listening.set()
                    if not first:
                        self._tell(ALL, 0)  # whatever was written while we were away
                    first = False
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=0.5):
                            found = parse(note.payload)
                            if found is not None:
                                self._tell(*found)
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
