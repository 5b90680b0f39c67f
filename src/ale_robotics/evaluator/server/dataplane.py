"""The evaluator's shared-memory data plane: its socket, its tickets, its channels.

Offered only beside an agent listener that is a Unix socket (a client that reaches
it shares the evaluator's host and kernel), and only where the kernel can seal a
memfd against the agent's writes (:func:`~ale_robotics.dataplane.regions.seals_supported`).
The socket lies in the agent socket's directory (:func:`~ale_robotics.dataplane.layout.
data_socket_name`), which every sandbox binds whole. Its mode is 0666: it is reached
only by who can search that directory, as the agent socket is, and a connection is
worth nothing without a ticket.

A ticket is 32 random bytes, issued by OpenDataPlane to a caller that may see the
session (the servicer checks the token and the run), single use, valid
:data:`TICKET_TTL_S`, one per session. A connection presents it first thing; a
wrong, expired or reused ticket gets a one-line refusal and the socket closed. A
session has one channel at a time: a new one ends the old.

A channel serves on a thread of its own while it is used; after
:data:`~.shm_channel.PARK_AFTER_S` without a request it parks on the data plane's one
poller (:class:`_Parking`: an epoll over every parked channel's eventfds and socket) and
its thread ends, so open, idle sessions cost no thread each (a thread is what made a
shared-memory session cost its evaluator more memory than a gRPC one). A request, the
client's end, a stop or the session's close starts a thread that serves it again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import select
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ale_robotics.dataplane.layout import data_socket_name
from ale_robotics.evaluator.runs.registry import Scope
from ale_robotics.evaluator.server.shm_channel import ServerChannel

if TYPE_CHECKING:
    from ale_robotics.evaluator.sessions.manager import SessionManager
    from ale_robotics.evaluator.sessions.vector import Session

__all__ = ["TICKET_TTL_S", "DataPlaneServer"]

log = logging.getLogger(__name__)

TICKET_TTL_S = 10.0
HANDSHAKE_S = 5.0
"""How long a connection may take to present its ticket."""
MAX_HANDSHAKES = 16
"""Connections presenting tickets at once; more are closed at once."""


@dataclass(frozen=True)
class _Ticket:
    session: Session
    scope: Scope
    expires: float


class _Parking:
    """Idle channels, waiting on one epoll instead of a thread each (module doc)."""

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._lock = threading.Lock()
        self._by_fd: dict[int, ServerChannel] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ale-shm-parking", daemon=True)
        self._thread.start()

    def park(self, channel: ServerChannel) -> None:
        with self._lock:
            for fd in channel.wake_fds:
                self._by_fd[fd] = channel
                self._epoll.register(fd, select.EPOLLIN)

    def _unpark(self, channel: ServerChannel) -> bool:
        """Take ``channel`` off the poller; False when it was not on it (resumed already)."""
        with self._lock:
            fds = [fd for fd, c in self._by_fd.items() if c is channel]
            for fd in fds:
                del self._by_fd[fd]
                with contextlib.suppress(OSError):
                    self._epoll.unregister(fd)
        return bool(fds)

    def _loop(self) -> None:
        scanned = time.monotonic()
        while not self._stop.is_set():
            for fd, _ in self._epoll.poll(1.0):
                channel = self._by_fd.get(fd)
                if channel is not None and self._unpark(channel):
                    channel.resume()
            if time.monotonic() - scanned >= 1.0:  # sessions closed meanwhile: end them
                scanned = time.monotonic()
                with self._lock:
                    parked = set(self._by_fd.values())
                for channel in parked:
                    if channel.session_closed and self._unpark(channel):
                        channel.resume()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._epoll.close()


class DataPlaneServer:
    """The data socket beside ``agent_socket``, and every channel opened through it."""

    def __init__(
        self, sessions: SessionManager, agent_socket: Path, max_response_bytes: int
    ) -> None:
        self._sessions = sessions
        self._max_response_bytes = max_response_bytes
        self.socket_name = data_socket_name(agent_socket.name)
        self.path = agent_socket.parent / self.socket_name
        self._lock = threading.Lock()
        self._tickets: dict[bytes, _Ticket] = {}
        self._channels: dict[str, ServerChannel] = {}
        self._handshakes = threading.BoundedSemaphore(MAX_HANDSHAKES)
        self._stopped = False
        self._parking = _Parking()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            if self.path.is_socket():
                self.path.unlink()  # a previous process's
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        try:
            self._sock.bind(str(self.path))
            os.chmod(self.path, 0o666)
            self._sock.listen(64)
        except BaseException:
            self._sock.close()
            self._parking.close()
            raise
        self._thread = threading.Thread(
            target=self._accept_loop, name="ale-shm-accept", daemon=True
        )
        self._thread.start()

    # ------------------------------------------------------------- tickets --

    def offer(self, session: Session, scope: Scope) -> bytes:
        """A ticket for one channel of ``session`` (replacing any earlier one of it)."""
        ticket = secrets.token_bytes(32)
        now = time.monotonic()
        with self._lock:
            for key, old in list(self._tickets.items()):
                if old.expires < now or old.session.id == session.id:
                    del self._tickets[key]
            self._tickets[ticket] = _Ticket(session, scope, now + TICKET_TTL_S)
        return ticket

    def _redeem(self, ticket: bytes) -> _Ticket | None:
        with self._lock:
            found = self._tickets.pop(ticket, None)
        if found is None or found.expires < time.monotonic():
            return None
        return found

    # ------------------------------------------------------------- channels --

    def channels(self) -> int:
        with self._lock:
            return len(self._channels)

    def _accept_loop(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError as exc:
                if self._stopped:
                    return  # closed by stop()
                # ECONNABORTED, EMFILE...: this connection is lost, not the data plane
                log.warning("the data socket's accept failed (%s); accepting again", exc)
                time.sleep(0.05)
                continue
            if not self._handshakes.acquire(blocking=False):
                conn.close()
                continue
            threading.Thread(
                target=self._handshake, args=(conn,), name="ale-shm-channel", daemon=True
            ).start()

    def _handshake(self, conn: socket.socket) -> None:
        """Take a ticket; on a good one, this thread goes on to serve the channel."""
        channel: ServerChannel | None = None
        try:
            conn.settimeout(HANDSHAKE_S)
            ticket = self._redeem(conn.recv(64))
            if ticket is None:
                _refuse(conn, "unknown, used or expired ticket: call OpenDataPlane again")
                return
            if ticket.session.closed:
                _refuse(conn, f"session {ticket.session.id} was closed")
                return
            channel = ServerChannel(
                self._sessions,
                ticket.session,
                ticket.scope,
                conn,
                self._max_response_bytes,
                self._forget,
                self._parking.park,
            )
            with self._lock:
                old = self._channels.get(channel.session_id)
                self._channels[channel.session_id] = channel
                stopped = self._stopped
            if old is not None:
                old.stop()
            if stopped:
                channel.stop()
            conn.settimeout(None)
            channel.hand_over()
            log.info("session %s: data plane open", channel.session_id)
        except OSError as exc:
            log.info("a data-plane handshake failed: %s", exc)
            conn.close()
            return
        finally:
            self._handshakes.release()
        if channel is not None:
            channel.serve()

    def _forget(self, channel: ServerChannel) -> None:
        with self._lock:
            if self._channels.get(channel.session_id) is channel:
                del self._channels[channel.session_id]

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, end every channel, remove the socket."""
        with self._lock:
            self._stopped = True
            channels = list(self._channels.values())
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        for channel in channels:
            channel.stop()
        for channel in channels:
            channel.join(timeout)
        self._parking.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def _refuse(conn: socket.socket, why: str) -> None:
    with contextlib.suppress(OSError):
        conn.send(json.dumps({"error": why}).encode())
    conn.close()
