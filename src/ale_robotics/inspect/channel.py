"""The sample's side of the toolbox channel: a Unix socket the sandboxed toolbox connects to.

The harness owns the socket (it listens, in a directory of its own that the run's
sandbox shows the agent, as it does the model gateway's); the toolbox
(:mod:`.toolbox`), started as the run's agent, connects once and serves the requests
sent here. Only the first connection is served: the listener is closed once the
toolbox is in. A request waits for its answer on the caller's thread; one reader
thread hands the answers out by id. When the toolbox is gone (it exited, or the
harness killed it at its budget or disk quota) every waiting and later call raises
:class:`ToolboxGone`.

:class:`ToolboxAccess` is what the run's sandbox needs to show the toolbox the socket
(the same shape as the model gateway's access: its directory, no variables, and the
command that starts the toolbox, given where the sandbox shows the directory).
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import shutil
import socket
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ale_robotics.errors import AleError

__all__ = ["ToolChannel", "ToolboxAccess", "ToolboxGone", "toolbox_command"]

SOCKET_NAME = "toolbox.sock"


class ToolboxGone(AleError):
    """The toolbox is not (or no longer) connected: the run's agent phase has ended."""


def toolbox_command(python: str = sys.executable) -> str:
    """The run's agent command: the toolbox module, on ``python``."""
    return f"{python} -m ale_robotics.inspect.toolbox"


@dataclass
class ToolboxAccess:
    """What the run's sandbox needs to let the toolbox reach its channel."""

    socket_dir: Path
    env: Mapping[str, str] = field(default_factory=dict)

    def wrap(
        self,
        argv: Sequence[str],
        python: str = sys.executable,
        *,
        relay: str | None = None,
        socket_dir: str | None = None,
    ) -> list[str]:
        """The toolbox command with the socket as the sandbox shows it (``socket_dir``:
        where a container mounts :attr:`socket_dir`; by default its host path)."""
        del python, relay  # the command names its own Python; no relay in front
        return [*argv, f"{socket_dir or self.socket_dir}/{SOCKET_NAME}"]

    def stored_bytes(self) -> int:
        """Nothing is kept on the host for the toolbox (Inspect keeps its own log)."""
        return 0

    def quota_breach(self) -> int | None:
        return None

    def last_call_unix(self) -> float:
        """Inspect drives the agent: its model calls are Inspect's (never idle here)."""
        return 0.0

    def last_refusal(self) -> tuple[float, str] | None:
        return None


class ToolChannel:
    """The listening socket, then the one connection to the toolbox (module docstring)."""

    def __init__(self) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="ale-toolbox-"))
        self._dir.chmod(0o755)  # the agent's user in a container is another uid
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self._dir / SOCKET_NAME))
        (self._dir / SOCKET_NAME).chmod(0o666)  # connecting needs write permission
        self._listener.listen(1)
        self._conn: socket.socket | None = None
        self._send_lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._pending_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._gone: str | None = None
        self.ready: dict[str, Any] = {}
        """The toolbox's greeting: its working directory and pid."""

    @property
    def access(self) -> ToolboxAccess:
        return ToolboxAccess(socket_dir=self._dir)

    def accept(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the toolbox; True once it is connected (a connection
        that does not greet as the toolbox does is dropped: False)."""
        if self._conn is not None:
            return True
        self._listener.settimeout(timeout)
        try:
            conn, _ = self._listener.accept()
        except TimeoutError:
            return False
        conn.settimeout(max(timeout, 5.0))  # a connection that never greets is dropped
        lines = conn.makefile("rb")
        try:
            greeting = json.loads(lines.readline() or b"{}")
        except (OSError, ValueError):
            greeting = {}
        if not isinstance(greeting, dict) or not greeting.get("ready"):
            conn.close()  # not the toolbox: dropped, and the toolbox still awaited
            return False
        conn.settimeout(None)
        self.ready = greeting
        self._conn = conn
        self._listener.close()  # one toolbox per run: nobody else is heard
        threading.Thread(
            target=self._read, args=(lines,), name="ale-toolbox-reader", daemon=True
        ).start()
        return True

    def call(self, request: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """Send ``request`` and wait for its answer (``timeout``: None waits for good)."""
        if self._conn is None or self._gone is not None:
            raise ToolboxGone(self._gone or "the toolbox is not connected")
        req_id = next(self._ids)
        pending = _Pending()
        with self._pending_lock:
            self._pending[req_id] = pending
        try:
            line = json.dumps({"id": req_id, **request}).encode() + b"\n"
            with self._send_lock:
                self._conn.sendall(line)
        except OSError as exc:
            self._drop(req_id)
            raise ToolboxGone(f"the toolbox is gone ({exc})") from None
        if not pending.done.wait(timeout):
            self._drop(req_id)
            raise TimeoutError("the toolbox did not answer in time")
        if pending.answer is None:
            raise ToolboxGone(self._gone or "the toolbox is gone")
        return pending.answer

    def close(self) -> None:
        """Close the connection (the toolbox sees its end) and remove the socket's directory."""
        for s in (self._conn, self._listener):
            if s is not None:
                with contextlib.suppress(OSError):
                    s.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def _drop(self, req_id: int) -> None:
        with self._pending_lock:
            self._pending.pop(req_id, None)

    def _read(self, lines: Any) -> None:
        # The toolbox runs as the agent, which can write to its socket too: a line that is
        # not an answer ends the channel as the toolbox's end does (the agent phase is over).
        try:
            for raw in lines:
                answer = json.loads(raw)
                if not isinstance(answer, dict) or not isinstance(answer.get("id"), int):
                    break
                with self._pending_lock:
                    pending = self._pending.pop(answer.pop("id"), None)
                if pending is not None:
                    pending.answer = answer
                    pending.done.set()
        except (OSError, ValueError, RecursionError):
            pass
        self._gone = "the toolbox is gone: the run's agent phase has ended"
        with self._pending_lock:
            waiting, self._pending = list(self._pending.values()), {}
        for pending in waiting:
            pending.done.set()


@dataclass
class _Pending:
    done: threading.Event = field(default_factory=threading.Event)
    answer: dict[str, Any] | None = None


def decode(data: str | None) -> bytes:
    """A field of an answer, base64, as bytes."""
    return base64.b64decode(data) if data else b""
