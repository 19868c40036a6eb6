"""Accepting HTTP connections under `--max-connections`, for both HTTP servers of the project (the MCP
transport and the reference runtime's `runtime serve`).

uvicorn leaves accepting to the event loop (`loop.create_server`), which accepts whatever arrives:
a guard that counts connections can only close the ones over the cap after they were accepted, so a
flood of connections costs a file descriptor, an accept and a close each, many per loop turn, and
running out of descriptors is logged by asyncio as one traceback per refused accept (hundreds per
turn: issue 26 logged 137 MB in 30 s). So the server accepts itself (`GuardedServer`):

- A `Gate` counts every connection from accept to close (those being closed and those accepted but
  not started included): the cap bounds file descriptors, not just requests.
- At the cap, connections waiting for a request's headers make room, as many as are waiting to be
  accepted, the longest-waiting first: those that never sent a request before idle keep-alive ones,
  and never one whose request bytes have arrived but are not read yet (it is a client at work).
  Nothing is accepted until they are closed; if every connection is busy with a request, the
  listening socket is not read at all until one ends: new clients wait in the kernel's accept queue
  (`backlog`), costing the process nothing.
- The file limit (`ulimit -n`) is a cap too: at start the soft limit is raised towards the hard one
  if the cap needs it, and the cap lowered to fit it if it cannot be; running out of descriptors
  anyway (EMFILE: the limit lowered under a running server, descriptors used elsewhere) lowers the cap
  below what is open now and is logged once, not once per connection.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import itertools
import logging
import resource
import socket
import struct
import termios
import time
from collections.abc import Callable
from typing import Any, Protocol

import uvicorn

logger = logging.getLogger("mnote_mcp")

BATCH = 16  # connections accepted (and evicted to make room) per turn of the event loop
FD_RESERVE = 128  # descriptors kept for everything but connections: the store, logs, tokens file
FD_SLACK = 16  # after running out of descriptors, the cap is this far below the connections open
LOG_EVERY = 60.0  # seconds between two lines about the same overload
_OUT_OF_FILES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


class Waiting(Protocol):
    """A connection that may be closed to make room: it is waiting for a request's headers."""

    def unread(self) -> int:
        """Bytes that arrived on its socket and are not read yet."""

    def evict(self) -> None:
        """Close it (408): its deadline is up early."""


class _Throttled:
    """Says when a line may be logged again: once, then at most every `every` seconds."""

    def __init__(self, every: float = LOG_EVERY) -> None:
        self.every = every
        self._last = -every

    def ready(self) -> bool:
        now = time.monotonic()
        if now - self._last < self.every:
            return False
        self._last = now
        return True


class Gate:
    """The connections one server holds, its cap, and who makes room at the cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.configured = cap
        self.open: set[Waiting] = set()  # from connection_made to connection_lost
        self.pending: set[int] = set()  # accepted (their descriptors), the protocol not started yet
        self.evicting: set[Waiting] = set()  # closed to make room, not gone yet
        self._fresh: dict[Waiting, None] = {}  # waiting for a first request, oldest first
        self._idle: dict[Waiting, None] = {}  # waiting for a next request (keep-alive)
        self._on_change: list[Callable[[], None]] = []

    def held(self) -> int:
        return len(self.open) + len(self.pending)

    def wait(self, connection: Waiting, *, fresh: bool) -> None:
        """`connection` waits for a request's headers from now on (and may make room)."""
        self.busy(connection)
        (self._fresh if fresh else self._idle)[connection] = None
        self._changed()

    def busy(self, connection: Waiting) -> None:
        """`connection` has a request (or is closing): it is not to be evicted."""
        self._fresh.pop(connection, None)
        self._idle.pop(connection, None)

    def started(self, connection: Waiting, fd: int) -> None:
        """`connection` (on the accepted descriptor `fd`) is made: counted open from now on."""
        self.pending.discard(fd)
        self.open.add(connection)

    def ended(self, connection: Waiting) -> None:
        self.busy(connection)
        self.open.discard(connection)
        self.evicting.discard(connection)
        self._changed()

    def on_change(self, resume: Callable[[], None]) -> None:
        """`resume()` is called whenever a connection ends or starts waiting: room may be made."""
        self._on_change.append(resume)

    def _changed(self) -> None:
        for resume in self._on_change:
            resume()

    def make_room(self, wanted: int) -> int:
        """Close waiting connections until `wanted` are closing; how many are closing now. Idle
        keep-alive connections only when no other connection is about to make room (none that never
        sent a request, none starting, none closing): they are clients that did send requests."""
        evictable = self._fresh if self._fresh or self.pending or self.evicting else self._idle
        skipped = 0
        for connection in list(itertools.islice(evictable, wanted + BATCH)):  # oldest first
            if len(self.evicting) >= wanted or skipped >= BATCH:
                break
            if connection.unread():
                skipped += 1  # its request is arriving: the next one instead
                continue
            self.busy(connection)
            self.evicting.add(connection)
            connection.evict()
        return len(self.evicting)

    def lower(self, cap: int) -> None:
        self.cap = max(1, min(self.cap, cap))


def unread_bytes(fd: int) -> int:
    """Bytes waiting in the socket `fd`'s receive buffer (FIONREAD); 0 if it cannot say."""
    try:
        return int(struct.unpack("=i", fcntl.ioctl(fd, termios.FIONREAD, bytes(4)))[0])
    except OSError:
        return 0


def accept_queue(sock: socket.socket) -> int:
    """How many connections wait to be accepted on the listening `sock` (Linux reports it as the
    `tcpi_unacked` of a listening socket's TCP_INFO); 1 where that cannot be read."""
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 32)
    except (OSError, AttributeError):
        return 1
    return max(1, int(struct.unpack_from("=I", info, 24)[0])) if len(info) >= 28 else 1


def fit_file_limit(cap: int, reserve: int = FD_RESERVE) -> int:
    """The cap the process's file limit allows: the soft limit is raised (up to the hard one) if
    `cap` connections and `reserve` other descriptors need more; if they still do not fit, a lower
    cap, logged."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = cap + reserve
    if soft != resource.RLIM_INFINITY and soft < needed:
        raised = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return cap
    fitted = max(1, soft - min(reserve, soft // 2))
    logger.warning(
        "--max-connections %d lowered to %d: the process may open %d files (ulimit -n), and keeps %d"
        " for the store and the logs; raise the limit to allow more connections",
        cap,
        fitted,
        soft,
        soft - fitted,
    )
    return fitted


class Listener:
    """One listening socket, read only while the gate has room; what `uvicorn.Server` expects of
    its servers (`close`, `wait_closed`, `sockets`)."""

    def __init__(
        self,
        sock: socket.socket,
        gate: Gate,
        protocol_factory: Callable[[], asyncio.Protocol],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.sockets = [sock]
        self._sock = sock
        self._gate = gate
        self._factory = protocol_factory
        self._loop = loop
        self._reading = False
        self._closed = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._busy_log = _Throttled()
        self._files_log = _Throttled()
        self._error_log = _Throttled()
        gate.on_change(self._resume)
        self._resume()

    def _resume(self) -> None:
        if not self._reading and not self._closed:
            self._loop.add_reader(self._sock.fileno(), self._accept)
            self._reading = True

    def _pause(self) -> None:
        if self._reading:
            self._loop.remove_reader(self._sock.fileno())
            self._reading = False

    def _accept(self) -> None:
        """The listening socket is readable: connections wait to be accepted."""
        gate = self._gate
        room = gate.cap - gate.held()
        if room <= 0:
            # close as many waiting connections as clients wait to be accepted (a batch at most),
            # and accept them once those are gone
            wanted = min(accept_queue(self._sock), BATCH) - room
            if not gate.make_room(wanted) and not gate.pending and self._busy_log.ready():
                logger.warning(
                    "%d connections open (--max-connections %d), every one busy with a request:"
                    " new connections wait to be accepted",
                    gate.held(),
                    gate.cap,
                )
            self._pause()  # until a connection ends or starts waiting
            return
        for _ in range(min(room, BATCH)):
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as exc:
                if exc.errno not in _OUT_OF_FILES:
                    raise
                self._out_of_files(exc)  # over the lowered cap now: room is made next turn
                return
            conn.setblocking(False)
            gate.pending.add(conn.fileno())
            task = self._loop.create_task(self._start(conn))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _out_of_files(self, exc: OSError) -> None:
        gate = self._gate
        held = gate.held()
        gate.lower(held - FD_SLACK)
        if self._files_log.ready():
            soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            logger.error(
                "out of file descriptors accepting a connection (%s; ulimit -n %d) with %d connections"
                " open: accepting at most %d from now on (--max-connections %d)",
                exc.strerror,
                soft,
                held,
                gate.cap,
                gate.configured,
            )

    async def _start(self, conn: socket.socket) -> None:
        """Hand `conn` to the loop; its protocol's `connection_made` moves it from pending to open."""
        fd = conn.fileno()
        try:
            await self._loop.connect_accepted_socket(self._factory, conn)
        except Exception as exc:
            self._gate.pending.discard(fd)  # before closing it: the number may be reused at once
            conn.close()
            if not isinstance(exc, OSError) and self._error_log.ready():  # OSError: gone before it began
                logger.exception("a connection could not be started")
            self._resume()

    def close(self) -> None:
        if not self._closed:
            self._pause()
            self._closed = True
            self._sock.close()

    async def wait_closed(self) -> None:
        return None


def bind(host: str, port: int, backlog: int) -> list[socket.socket]:
    """Listening sockets for `host` (every address it names, as `loop.create_server` does)."""
    sockets: list[socket.socket] = []
    try:
        seen = set()
        for family, kind, proto, _, address in socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        ):
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(backlog)
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


class GuardedServer(uvicorn.Server):
    """uvicorn, accepting connections itself under the gate of its protocol (`httpguard.
    guarded_protocol`): what uvicorn's startup does but `loop.create_server`."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        config = self.config
        if not config.loaded:
            config.load()
        protocol: Any = config.http_protocol_class
        gate: Gate = protocol.gate
        gate.cap = gate.configured = fit_file_limit(gate.configured)
        listening = sockets or bind(config.host, config.port, config.backlog)
        await super().startup(sockets=[])  # the lifespan and the server state; no listener
        loop = asyncio.get_running_loop()

        def create_protocol() -> asyncio.Protocol:
            made: asyncio.Protocol = protocol(
                config=config, server_state=self.server_state, app_state=self.lifespan.state, _loop=loop
            )
            return made

        self.servers = [Listener(sock, gate, create_protocol, loop) for sock in listening]  # type: ignore[misc]
