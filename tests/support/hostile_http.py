"""An HTTP endpoint that answers badly on purpose, on its own thread (so what it measures does not
depend on the event loop under test): it trickles a body a byte at a time, or sends one that never
ends, or announces one of hundreds of megabytes. It counts the connections it holds open, the most
it held at once, and the bytes it got out, so a test can see a client that gives up keep reading.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal

Mode = Literal["trickle", "endless", "announced"]
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
OPENING = b'{"keys": ['
PIECE = b" " * 65536  # JSON whitespace: the body stays a document that has not ended yet


@dataclass
class HostileServer:
    """`trickle`: one byte every `every` seconds; `endless`: a 64 KiB piece every `every` seconds (at
    0.01 s, 6.4 MB a second: enough to see a client read on, not enough to fill a shared machine's
    memory if it does), no length announced; `announced`: `Content-Length` of `announce` bytes, then
    64 KiB pieces as fast as they go out."""

    mode: Mode
    every: float = 0.1
    announce: int = 600 * 1024 * 1024
    open: int = 0
    peak: int = 0
    connections: int = 0
    sent: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _sock: socket.socket | None = None

    @property
    def url(self) -> str:
        assert self._sock is not None
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}/jwks"

    def __enter__(self) -> HostileServer:
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._sock is not None:
            self._sock.close()

    def _accept(self) -> None:
        assert self._sock is not None
        while not self._stop.is_set():
            try:
                connection, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self.open += 1
                self.peak = max(self.peak, self.open)
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        try:
            with connection:
                connection.settimeout(10)
                request = b""
                while b"\r\n\r\n" not in request:
                    chunk = connection.recv(4096)
                    if not chunk:
                        return
                    request += chunk
                length = b"Content-Length: %d\r\n" % self.announce if self.mode == "announced" else b""
                self._send(connection, HEAD + length + b"\r\n" + OPENING)
                while not self._stop.is_set():
                    if self.mode != "announced" and self._closed_within(connection, self.every):
                        return
                    self._send(connection, b" " if self.mode == "trickle" else PIECE)
        except OSError:
            pass  # the client closed the connection: what the tests want to see
        finally:
            with self._lock:
                self.open -= 1

    @staticmethod
    def _closed_within(connection: socket.socket, seconds: float) -> bool:
        """Wait `seconds`, or less if the client closes the connection meanwhile (then True): the
        server sees a client give up at once, not at its next write."""
        connection.settimeout(seconds)
        try:
            return connection.recv(4096) == b""
        except TimeoutError:
            return False
        finally:
            connection.settimeout(10)

    def _send(self, connection: socket.socket, data: bytes) -> None:
        connection.sendall(data)
        with self._lock:
            self.sent += len(data)
