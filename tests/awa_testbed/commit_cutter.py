"""A TCP proxy between a client and PostgreSQL that cuts the connection at a COMMIT.

It reads the client's side of the protocol (so no TLS through it: libpq's
SSLRequest is passed on and the test servers answer "no"), counts the simple
queries ``COMMIT`` (how psycopg commits), and at the one it is armed for:

- ``before``: drops the COMMIT and closes both sides. The server sees the
  client go while idle in transaction and rolls back.
- ``after``: forwards the COMMIT, then closes the client's side at once; the
  server's side is half-closed after the COMMIT, so the server reads it,
  commits, and then sees the client go. The client never hears back.
- ``hold``: drops the COMMIT and closes the client's side only. The server's
  side stays open, idle in transaction, as in a network partition the server
  has not noticed, until ``release()``.

With ``refuse=True`` it also stops listening at the cut (connections are then
refused) until ``listen()``. Everything runs in daemon threads of the calling
process, so a module run by ``ansible`` in a child process goes through it too.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass, field

# Untyped packets a client may send before its StartupMessage, and the one after which nothing follows.
SSL_REQUEST, GSSENC_REQUEST, CANCEL_REQUEST = 80877103, 80877104, 80877102
COMMIT = b"COMMIT"
MODES = ("before", "after", "hold")


@dataclass
class Cut:
    mode: str
    nth: int
    refuse: bool
    done: threading.Event = field(default_factory=threading.Event)
    cut_at: float | None = None  # time.monotonic() of the cut


def _read_exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def _close(sock: socket.socket, how: int = socket.SHUT_RDWR) -> None:
    try:
        sock.shutdown(how)
    except OSError:
        pass
    if how == socket.SHUT_RDWR:
        sock.close()


class CommitCutter:
    """``with CommitCutter(host, port) as proxy:`` connect to ``proxy.port``; ``proxy.arm("after")`` to cut."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.commits = 0
        self._cut: Cut | None = None
        self._held: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._closed = False

    def __enter__(self) -> CommitCutter:
        self.listen()
        return self

    def __exit__(self, *exc_info) -> None:
        self._closed = True
        self.release()
        if self._listener is not None:
            _close(self._listener)

    def arm(self, mode: str, nth: int = 1, *, refuse: bool = False) -> Cut:
        """Cut at the ``nth`` COMMIT from now on; the returned cut's ``done`` is set when it happened."""
        assert mode in MODES, mode
        with self._lock:
            self._cut = Cut(mode, self.commits + nth, refuse)
            return self._cut

    def listen(self) -> None:
        """Accept connections (again, on the same port after a refusing cut)."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def release(self) -> None:
        """Close the server sides a ``hold`` cut kept open."""
        with self._lock:
            held, self._held = self._held, []
        for sock in held:
            _close(sock)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, dummy = listener.accept()
            except OSError:
                return  # stopped listening
            try:
                server = socket.create_connection(self.target)
            except OSError:
                _close(client)
                continue
            threading.Thread(target=self._pump_client, args=(client, server), daemon=True).start()
            threading.Thread(target=self._pump_server, args=(server, client), daemon=True).start()

    def _pump_server(self, server: socket.socket, client: socket.socket) -> None:
        """Server to client, unread; after a cut the client side is gone and the rest is dropped."""
        try:
            while chunk := server.recv(65536):
                try:
                    client.sendall(chunk)
                except OSError:
                    pass
        except OSError:
            pass
        _close(client)
        _close(server)

    def _pump_client(self, client: socket.socket, server: socket.socket) -> None:
        """Client to server, message by message, watching for COMMIT."""
        try:
            self._startup(client, server)
            while True:
                header = _read_exact(client, 5)
                body = _read_exact(client, struct.unpack("!I", header[1:])[0] - 4)
                if header[:1] == b"Q" and body.rstrip(b"\0").strip().upper() == COMMIT and self._cut_here(
                        client, server, header + body):
                    return
                server.sendall(header + body)
        except (EOFError, OSError):
            _close(client)
            _close(server, socket.SHUT_WR)

    def _startup(self, client: socket.socket, server: socket.socket) -> None:
        """The untyped packets before the typed messages: SSL/GSS requests, then the StartupMessage."""
        while True:
            length = _read_exact(client, 4)
            payload = _read_exact(client, struct.unpack("!I", length)[0] - 4)
            server.sendall(length + payload)
            if struct.unpack("!I", payload[:4])[0] not in (SSL_REQUEST, GSSENC_REQUEST):
                return

    def _cut_here(self, client: socket.socket, server: socket.socket, commit: bytes) -> bool:
        with self._lock:
            self.commits += 1
            cut = self._cut
            if cut is None or cut.nth != self.commits:
                return False
            self._cut = None
            if cut.mode == "hold":
                self._held.append(server)
        # A refusing cut stops listening before the client can notice the cut: a reconnection that came in
        # between would find the outcome (under load one did, and "cannot look" was not tested).
        if cut.refuse and self._listener is not None:
            _close(self._listener)
            self._listener = None
        # The client's side closes before the COMMIT goes on: the server's answer, which the other thread
        # forwards, must never reach the client (under load it once did, and the cut was no cut).
        _close(client)
        if cut.mode == "after":
            server.sendall(commit)
        if cut.mode != "hold":
            _close(server, socket.SHUT_WR)  # the server reads what it got, then the end of the stream
        cut.cut_at = time.monotonic()
        cut.done.set()
        return True
