"""The seam between the portable kernel and the SQL database it runs on: what a dialect adapter gives.

Everything in `kernel/store` reads and writes rows through a `Connection` (`sql.py`: `?` or `:name`
placeholders, a cursor back) in a transaction the `Dialect` opens, and asks the dialect only for what
the databases really do differently:

- **transactions**: a read (one snapshot), a write (SQLite's `BEGIN IMMEDIATE` holds the whole file;
  PostgreSQL locks the page's row, `lock_page`), `statements` for reads that need no transaction (a
  whole-page read: on PostgreSQL statements of their own, `snapshot_reads` False, so the reader checks
  the page's stamp again), `serialize` (seeders one after the other), `retryable` (a failure that means
  "run the whole transaction again": never on SQLite; a key taken by another replica's commit, a
  serialization failure or a deadlock on PostgreSQL);
- **where calls run**: `inline` (SQLite: on the event loop first, moving to a worker thread when it
  would wait or has heavy work, `MoveToThread`; PostgreSQL: always on a thread), `threads`,
  `group_commit` (writes that arrive together share a transaction); what expensive calls may hold is
  not a dialect's: one admission for every store (`mnote_mcp/calls/admission.py`);
- **the full-text index** (`SearchIndex`): `apply(conn, PageChange)`, fed by the one page-change path
  (`changes.publish`), and `search(conn, query, segments)`;
- **change notification** (`ChangeFeed`): `publish` inside the writing transaction, `committed` after
  its COMMIT, `watch` for listeners (SQLite: this process's writes, told after COMMIT; PostgreSQL:
  every replica's, by LISTEN/NOTIFY);
- **the schema**: a dialect is opened on a created, migrated or (read-only) checked schema; `created`
  says whether this opening created it;
- `fold`: the SQL function that case-folds a title for the page listing's prefix;
- `figures` (the pool's and the database's figures for the metrics, `figures.py`), `dump` (every row
  as text: what tests compare to prove nothing was written) and `close`.

No dialect reaches into the portable kernel's private names, and the portable kernel imports no
dialect (tests/test_architecture.py checks both).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

# The seam's types only: its constants are read by the settings, and a read loads no search.
if TYPE_CHECKING:
    from mnote_mcp.kernel.port import PageChangeListener, SearchQuery, SearchResult
    from mnote_mcp.kernel.search import Segment
    from mnote_mcp.kernel.store.changes import PageChange
    from mnote_mcp.kernel.store.figures import StoreFigures
    from mnote_mcp.kernel.store.search import Clock
    from mnote_mcp.kernel.store.sql import Connection

DEFAULT_BUSY_TIMEOUT = 30.0
# How long a database server may take to accept a connection before it counts as down
# (`--db-connect-timeout`: a networked dialect answers `store_unreachable` within about it).
DEFAULT_CONNECT_TIMEOUT = 3.0
# Above this many blocks, whole-page work (reading, rendering, diffing, replacing) moves off the event loop.
INLINE_BLOCKS = 2_000
# How often a write whose transaction hit a retryable failure is run again before the failure stands.
WRITE_ATTEMPTS = 8


class MoveToThread(Exception):  # noqa: N818 - a signal to the caller, not a failure
    """An inline call would have to wait for a lock, or has heavy work to do: run it on a thread."""


class SchemaTooNewError(RuntimeError):
    """The store was written by a newer mnote-mcp; opening it could lose what that version added."""


class SchemaNotCurrentError(RuntimeError):
    """A store opened read-only has another schema than this release's: it can be neither created nor
    upgraded (the message says what to do; it does not name the store, the caller does)."""


class SearchIndex(Protocol):
    """A dialect's full-text index of page titles and block texts (docs/search.md)."""

    @property
    def clock(self) -> Clock:
        """What a search cursor pins its results to."""
        ...

    def apply(self, conn: Connection, change: PageChange) -> None:
        """Follow one write, in its transaction, after its rows are written (`changes.publish`)."""

    def search(
        self, conn: Connection, query: SearchQuery, segments: Sequence[Segment] | None
    ) -> SearchResult:
        """The hits of one search, best first, of the pages the actor may read; without segments,
        the listing (`search.listing`, portable)."""
        ...


class ChangeFeed(Protocol):
    """Who hears of page writes, and how a write tells them."""

    def publish(self, conn: Connection, change: PageChange) -> None:
        """Inside the writing transaction (`changes.publish`)."""

    def committed(self, changes: Sequence[PageChange]) -> None:
        """After the transaction that published `changes` committed."""

    def watch(self, listener: PageChangeListener) -> Callable[[], None]:
        """Call `listener(page, revision)` for every page write it hears of, from any thread (and with
        revision 0 for every page when some may have been missed); returns what stops it."""
        ...

    def close(self) -> None: ...


class Dialect(Protocol):
    """One database, opened on a current schema (see the module)."""

    @property
    def name(self) -> str:
        """`sqlite` or `postgresql`."""
        ...

    @property
    def location(self) -> str:
        """Where the data lives, for messages (a URL without its password)."""
        ...

    @property
    def created(self) -> bool:
        """Whether opening it created the schema (a new store is seeded)."""
        ...

    @property
    def inline(self) -> bool:
        """Whether calls run on the event loop first (else always on a worker thread)."""
        ...

    @property
    def group_commit(self) -> bool: ...

    @property
    def threads(self) -> int:
        """Worker threads the async kernel may use at once."""
        ...

    @property
    def snapshot_reads(self) -> bool:
        """Whether the statements of `statements` see one snapshot."""
        ...

    @property
    def fold(self) -> str:
        """The SQL function that case-folds text for a prefix match (`access.readable_pages`): SQLite's
        `lower` folds only ASCII, so there Python's `str.casefold`, registered on every connection;
        PostgreSQL's `lower` folds by the database's locale."""
        ...

    @property
    def index(self) -> SearchIndex: ...

    @property
    def feed(self) -> ChangeFeed: ...

    def transaction(self, *, write: bool, inline: bool = False) -> AbstractContextManager[Connection]:
        """One transaction, committed when the block ends, rolled back if it raises."""
        ...

    def statements(self, *, inline: bool = False) -> AbstractContextManager[Connection]:
        """A connection for a few reads (one snapshot only where `snapshot_reads`)."""
        ...

    def lock_page(self, conn: Connection, workspace_id: str, page_id: str) -> None:
        """Keep other writers of this page out until the transaction ends."""

    def serialize(self, conn: Connection, name: str) -> None:
        """Transactions that serialize on `name` run one at a time."""

    def retryable(self, exc: BaseException) -> bool:
        """Whether the write transaction that raised `exc` should run again whole."""
        ...

    def dump(self) -> str:
        """Every row of the store as text, in a stable order."""
        ...

    def figures(self) -> StoreFigures:
        """The pool's and the database's own figures now, from counts kept anyway (`figures.py`):
        cheap, safe from any thread, no statement run."""
        ...

    def close(self) -> None: ...
