"""The evaluator's handle on its Ray driver process (:mod:`.ray_driver`): start it, talk
to it, tell why it died, stop it. Ray itself is never imported here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from typing import Any

from ale_robotics.evaluator.execution.base import ExecutorUnavailable
from ale_robotics.evaluator.execution.blas import worker_blas_env

__all__ = ["DriverDied", "DriverProcess", "relay", "unreachable"]

log = logging.getLogger(__name__)

_ENTRY = "from ale_robotics.evaluator.execution.ray_driver import main; main()"
_START_TIMEOUT_S = 180.0
"""How long the driver may take to join Ray (a local instance starts in ~5 s on a busy
host; a cluster address is first checked to answer within 10 s)."""
_STOP_WAIT_S = 15.0
"""How long a driver told to stop may take to shut its Ray connection down before it is
killed (a local instance stops its processes in a few seconds)."""
_TAIL_BYTES = 8192
_FATAL = re.compile(r"Check failed|plasma|Terminate|Error|error|lost|died|failed")
_NOISE = re.compile(r"\d{10,}|[0-9a-fA-F]{16,}|^\[[^\]]*\]\s*|^\S+ \S+ \d+ \d+ \S+\s*")


class DriverDied(Exception):
    """The driver process ended (or closed its link); the message says how."""


class DriverProcess:
    """One driver process and its link. ``where`` names the cluster for messages."""

    def __init__(
        self, address: str | None, num_cpus: int, object_store_bytes: int, where: str
    ) -> None:
        self.where = where
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - kept open: the driver's stderr
        mine, theirs = socket.socketpair()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _ENTRY, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=self._log,
                # the evaluator's session and group, as its Ray processes always were (a
                # terminal's Ctrl-C reaches them; the driver itself ignores SIGINT)
                # the workers' OpenBLAS kernel: the stack the driver reports is theirs
                env={**os.environ, **worker_blas_env()},
            )
        finally:
            theirs.close()
        self.conn = Connection(mine.detach())
        self.info: dict[str, Any] = {}
        self.conn.send(("connect", address, num_cpus, object_store_bytes))
        self._wait_ready()

    def _wait_ready(self) -> None:
        end = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < end:
            try:
                message = self.receive(0.2)
            except DriverDied as exc:
                raise ExecutorUnavailable(
                    f"cannot start the Ray driver for {self.where}: {exc}"
                ) from None
            if message is None:
                continue
            if message[0] == "ready":
                self.info = dict(message[1])
                return
            if message[0] == "unavailable":
                self.close()
                raise ExecutorUnavailable(str(message[1]))
            if message[0] == "log":
                relay(message)
        self.kill()
        raise ExecutorUnavailable(
            f"the Ray driver did not join {self.where} within {_START_TIMEOUT_S:.0f}s"
        )

    def send(self, message: tuple[Any, ...]) -> None:
        try:
            self.conn.send(message)
        except OSError:
            raise DriverDied(self.death()) from None

    def receive(self, timeout: float) -> tuple[Any, ...] | None:
        """The driver's next message within ``timeout`` s, or None; DriverDied once it ended."""
        try:
            if not self.conn.poll(timeout):
                return None
            message: tuple[Any, ...] = self.conn.recv()
        except (EOFError, OSError):
            raise DriverDied(self.death()) from None
        return message

    def alive(self) -> bool:
        return self.proc.poll() is None and not self.conn.closed

    def death(self) -> str:
        """How the driver ended, with the last telling line of its output (Ray's own
        account: the plasma store's connection failed, the GCS is unreachable, ...)."""
        try:
            code = self.proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            self.kill()
            return "the Ray driver process closed its link and was killed"
        if code < 0:
            how = f"the Ray driver process was killed by {signal.Signals(-code).name}"
        else:
            how = f"the Ray driver process exited with code {code}"
        said = self._last_words()
        return f"{how} ({said})" if said else how

    def _last_words(self) -> str:
        try:
            self._log.seek(0, 2)
            size = self._log.tell()
            self._log.seek(max(0, size - _TAIL_BYTES))
            tail = self._log.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""
        lines = [line.strip() for line in tail.splitlines() if line.strip()]
        if lines:
            log.warning("the Ray driver's last output:\n%s", "\n".join(lines[-20:]))
        for line in reversed(lines):
            if _FATAL.search(line):
                return _NOISE.sub("", line).strip()[:200]
        return ""

    def close(self) -> None:
        """Stop the driver: its link closes, it shuts its Ray connection down and exits
        (killed after :data:`_STOP_WAIT_S`)."""
        with contextlib.suppress(OSError):
            self.conn.close()
        try:
            self.proc.wait(timeout=_STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            self.kill()
        with contextlib.suppress(OSError):
            self._log.close()

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.close()
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10.0)


def relay(message: tuple[Any, ...]) -> None:
    """A driver's ``("log", level, logger, text)`` into the evaluator's log."""
    _, level, name, text = message
    logging.getLogger(str(name)).log(int(level), "%s", text)


def unreachable(address: str, timeout: float) -> str | None:
    """Why ``host:port`` refuses a TCP connection within ``timeout`` s, or None when it
    accepts one (or is not of that form: 'auto')."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return None
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout):
            return None
    except OSError as exc:
        return str(exc.strerror or exc)
