"""Caps on what an agent can write on the host: its log and its writable directories.

The agent writes in three places the harness keeps: ``agent.log`` (its stdout
and stderr), its scratch directory (the working directory) and the submission
directory. Unbounded, any of them lets an agent fill the host's disk and take
other runs, the evaluator's job store and the trajectory down with it.

* The log goes through a pipe that the harness drains (:class:`LogPump`): past
  ``cap`` bytes it keeps reading, so the agent never blocks on a full pipe, but
  writes only one line saying the log was cut.
* Each file the agent writes is capped by ``RLIMIT_FSIZE``, set by a tiny
  launcher (:func:`limited_argv`) before it execs the agent (or bwrap), so it
  holds in every child too. Python ignores ``SIGXFSZ``, so a Python agent gets
  ``OSError: [Errno 27] File too large`` rather than dying.
* The total of the scratch and submission directories is polled
  (:func:`disk_usage`) and the harness stops an agent over the quota. Between
  two polls an agent can overshoot by what it writes in that time; the per-file
  limit bounds any single file.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO

from ale_robotics.harness.agent.activity import LastLine

__all__ = ["LogPump", "disk_usage", "format_bytes", "limited_argv"]

_LAUNCHER = (
    "import os, resource, sys\n"
    "n = int(sys.argv[1])\n"
    "for p in filter(None, sys.argv[2].split('\\n')):\n"
    "    try:\n"
    "        with open(p, 'w') as f:\n"
    "            f.write(str(os.getpid()))\n"
    "    except OSError as e:\n"
    "        print(f'ale-robotics: cannot enter the run cgroup {p}: {e}', file=sys.stderr)\n"
    "resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))\n"
    "os.execvp(sys.argv[3], sys.argv[3:])\n"
)


def limited_argv(
    argv: list[str], max_file_bytes: int, cgroup_procs: Sequence[Path] = ()
) -> list[str]:
    """``argv`` run under ``RLIMIT_FSIZE = max_file_bytes`` (isolated Python, stdlib only),
    inside the run's cgroup: the launcher writes its pid into each of ``cgroup_procs``
    before it execs, so every process of the agent starts inside
    (:mod:`ale_robotics.sandboxes.cgroups`).

    A launcher process rather than ``preexec_fn``, which is unsafe in a process
    with threads (the embedded evaluator's gRPC threads). A cgroup it cannot enter
    is said on stderr (``agent.log``) and the harness, which moves it too, reports it.
    """
    procs = "\n".join(str(p) for p in cgroup_procs)
    return [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(max_file_bytes), procs, *argv]


def format_bytes(n: int) -> str:
    """``1.5 MiB``-style sizes for messages."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def disk_usage(roots: Iterable[Path]) -> int:
    """Bytes allocated on disk under ``roots`` (sparse files count what they use).

    Never follows symlinks; entries that vanish while walking are skipped.
    """
    total = 0
    stack = [str(r) for r in roots]
    while stack:
        top = stack.pop()
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            total += st.st_blocks * 512
            if stat.S_ISDIR(st.st_mode):
                stack.append(entry.path)
    return total


class LogPump:
    """Copies the agent's output pipe into ``agent.log``, at most ``cap`` bytes of it."""

    def __init__(self, source: IO[bytes], sink: IO[bytes], cap: int) -> None:
        self._source = source
        self._sink = sink
        self._cap = cap
        self.written = 0
        self.dropped = 0
        self.last = LastLine()
        """The agent's last line of output (read past the cap too): the console shows it."""
        self._thread = threading.Thread(target=self._run, name="ale-agent-log", daemon=True)
        self._thread.start()

    @property
    def truncated(self) -> bool:
        return self.dropped > 0

    def _run(self) -> None:
        fd = self._source.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            self.last.feed(chunk)
            room = self._cap - self.written
            if room > 0:
                part = chunk[:room]
                self._sink.write(part)
                self._sink.flush()
                self.written += len(part)
                chunk = chunk[room:]
            if chunk:
                if not self.dropped:
                    self._note_cut()
                self.dropped += len(chunk)

    def _note_cut(self) -> None:
        self._sink.write(
            f"\n[ale-robotics: agent.log cut at {format_bytes(self._cap)}; the agent's further "
            "output was read and discarded]\n".encode()
        )
        self._sink.flush()

    def join(self, timeout: float = 10.0) -> None:
        """Wait until the pipe is drained (every writer closed it)."""
        self._thread.join(timeout)
