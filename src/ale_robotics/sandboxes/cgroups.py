"""A cgroup per run: the agent's CPU, memory and process count, capped and measured.

bubblewrap has no cgroups, so the harness makes one cgroup for each run and puts
the agent in it: bwrap and everything it starts, or the agent's own process with
``--sandbox none``. The kernel then caps the agent at ``cpus`` CPUs (CFS quota),
``memory_bytes`` of memory (swap included where swap is accounted; past it the
OOM killer kills the largest of its processes) and ``pids_max`` tasks (threads
count: a fork bomb stops there), and counts its CPU-seconds and peak memory for
``result.json``. Memory counts as the kernel charges it: the agent's tmpfs files
(the sandbox's ``/tmp`` and ``/dev/shm``) and page cache included.

**Entering before exec.** The agent's launcher (:func:`ale_robotics.harness.agent.io.limited_argv`)
writes its own pid into every ``cgroup.procs`` of the run, then execs bwrap or the
agent, so whatever the agent starts is born inside: there is no window in which a
child could be forked outside and escape. ``preexec_fn`` would do the same in the
child, but it is unsafe in a process with threads (the embedded evaluator's gRPC
threads). Right after spawning it the harness writes the launcher's pid itself
too (a no-op when the launcher was first): that write is the check, so a cgroup
the agent could not enter is reported, never silently unused. An agent with
``--sandbox none`` runs as the harness's user (root) and can move itself out; in
the sandbox ``/sys`` does not exist and its cgroup namespace is rooted at its cgroup.

**Made** by :func:`.cgroup_setup.create_run_cgroup` (which hierarchy, where in it, and
what the harness does when none can be made): this module is the cgroup once it
exists, which the sandboxes (:mod:`.process`, the docker sandbox) hold and read.

**Freezing.** :meth:`RunCgroup.freeze` stops every process of the agent at once
(v1 ``freezer``, v2 ``cgroup.freeze``; else ``SIGSTOP`` to each process of the
cgroup, or to the agent's process group without a cgroup). The harness freezes
the agent while a job of a task with host-timed metrics (``planning_time``) is
queued or running; see :mod:`ale_robotics.harness.run`.

**Removal.** :meth:`RunCgroup.close` freezes the cgroup (nothing forks while it
is emptied), ``SIGKILL`` s every process left in it, thaws it so the kills land,
waits until it is empty, reads the counters and removes its directories. A
process that left the agent's process group (``setsid``) dies there too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

__all__ = [
    "Limits",
    "RunCgroup",
    "Usage",
    "read_control",
    "signal_freeze",
    "write_control",
]


@dataclass(frozen=True)
class Limits:
    """What a run's cgroup caps; None leaves that resource uncapped (still measured)."""

    cpus: float | None = None
    memory_bytes: int | None = None
    pids_max: int | None = None

    def as_dict(self) -> dict[str, float | int | None]:
        return {"cpus": self.cpus, "memory_bytes": self.memory_bytes, "pids_max": self.pids_max}


@dataclass(frozen=True)
class Usage:
    """What the agent used, read from its cgroup at the end of the run."""

    cpu_s: float | None
    peak_memory_bytes: int | None
    oom_kills: int | None


def read_control(path: Path) -> str | None:
    """The text of a cgroup file, None when it cannot be read (no such controller here)."""
    try:
        return path.read_text()
    except OSError:
        return None


def write_control(path: Path, value: str) -> None:
    """Write a cgroup file (a limit, a pid to move, a freeze); OSError when the kernel refuses."""
    with open(path, "w") as fh:
        fh.write(value)


def _keyed(text: str | None, key: str) -> int | None:
    """The value of ``key`` in a flat-keyed file (``memory.events``, ``cpu.stat``)."""
    for line in (text or "").splitlines():
        k, _, v = line.partition(" ")
        if k == key:
            with contextlib.suppress(ValueError):
                return int(v)
    return None


@dataclass
class RunCgroup:
    """The run's cgroup: one directory per v1 hierarchy, or one v2 directory."""

    version: Literal[1, 2]
    dirs: dict[str, Path]
    """v1: controller -> directory (co-mounted controllers share one); v2: ``{"": dir}``."""
    limits: Limits
    missing: list[str] = field(default_factory=list)
    """What could not be capped or measured here, in words (empty when all of it works)."""
    _peak_sampled: int = 0
    _stopped: list[int] = field(default_factory=list)
    _frozen_how: str | None = None

    @property
    def paths(self) -> list[Path]:
        """Every directory of this cgroup, once each."""
        return list(dict.fromkeys(self.dirs.values()))

    @property
    def procs_files(self) -> list[Path]:
        """The ``cgroup.procs`` files a process writes its pid into to enter the cgroup."""
        return [p / "cgroup.procs" for p in self.paths]

    def describe(self) -> str:
        return f"cgroup v{self.version} " + ", ".join(str(p) for p in self.paths)

    def _dir(self, controller: str) -> Path | None:
        return self.dirs.get("" if self.version == 2 else controller)

    # --------------------------------------------------------------- membership ---

    def join(self, pid: int) -> None:
        """Move ``pid`` (a whole process) into every directory of the cgroup; OSError if not."""
        for procs in self.procs_files:
            write_control(procs, str(pid))

    def pids(self) -> set[int]:
        """Every process in the cgroup now (in any of its directories)."""
        out: set[int] = set()
        for procs in self.procs_files:
            for line in (read_control(procs) or "").split():
                with contextlib.suppress(ValueError):
                    out.add(int(line))
        out.discard(os.getpid())  # never the harness itself, whatever happened
        return out

    # ------------------------------------------------------------------ counters ---

    def cpu_s(self) -> float | None:
        """CPU-seconds (user + system) used by every process that was ever in the cgroup."""
        if self.version == 2:
            usec = _keyed(read_control(self.dirs[""] / "cpu.stat"), "usage_usec")
            return None if usec is None else usec / 1e6
        d = self._dir("cpuacct")
        text = None if d is None else read_control(d / "cpuacct.usage")
        return None if text is None else int(text) / 1e9

    def memory_bytes(self) -> int | None:
        d = self._dir("memory")
        name = "memory.current" if self.version == 2 else "memory.usage_in_bytes"
        text = None if d is None else read_control(d / name)
        return None if text is None else int(text)

    def sample(self) -> None:
        """Note the memory in use now (v2 kernels before 5.19 have no ``memory.peak``)."""
        now = self.memory_bytes()
        if now is not None:
            self._peak_sampled = max(self._peak_sampled, now)

    def peak_memory_bytes(self) -> int | None:
        d = self._dir("memory")
        if d is None:
            return None
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        text = read_control(d / name)
        if text is not None:
            return max(int(text), self._peak_sampled)
        return self._peak_sampled or None

    def oom_kills(self) -> int | None:
        """Processes the OOM killer killed at the cgroup's memory limit."""
        d = self._dir("memory")
        if d is None:
            return None
        if self.version == 2:
            return _keyed(read_control(d / "memory.events"), "oom_kill")
        return _keyed(read_control(d / "memory.oom_control"), "oom_kill")

    def usage(self) -> Usage:
        return Usage(self.cpu_s(), self.peak_memory_bytes(), self.oom_kills())

    # ------------------------------------------------------------ freeze / thaw ---

    def _freezer(self) -> tuple[Path, str, str] | None:
        """(file, frozen value, thawed value) of this cgroup's freezer, if it has one."""
        if self.version == 2:
            f = self.dirs[""] / "cgroup.freeze"
            return (f, "1", "0") if f.exists() else None
        d = self._dir("freezer")
        return None if d is None else (d / "freezer.state", "FROZEN", "THAWED")

    def _is_frozen(self) -> bool:
        if self.version == 2:
            return _keyed(read_control(self.dirs[""] / "cgroup.events"), "frozen") == 1
        d = self._dir("freezer")
        return d is not None and (read_control(d / "freezer.state") or "").strip() == "FROZEN"

    def freeze(self, timeout_s: float = 5.0) -> str:
        """Stop every process of the cgroup; returns how (``freezer``, ``SIGSTOP``)."""
        freezer = self._freezer()
        if freezer is not None:
            try:
                write_control(freezer[0], freezer[1])
            except OSError:
                pass
            else:
                deadline = time.monotonic() + timeout_s
                while not self._is_frozen() and time.monotonic() < deadline:
                    time.sleep(0.005)
                self._frozen_how = "freezer"
                return self._frozen_how
        self._stopped = sorted(signal_freeze(self.pids()))
        self._frozen_how = "SIGSTOP"
        return self._frozen_how

    def thaw(self) -> None:
        """Undo :meth:`freeze`."""
        if self._frozen_how == "freezer":
            freezer = self._freezer()
            if freezer is not None:
                with contextlib.suppress(OSError):
                    write_control(freezer[0], freezer[2])
        elif self._frozen_how == "SIGSTOP":
            for pid in self._stopped:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGCONT)
            self._stopped = []
        self._frozen_how = None

    # ------------------------------------------------------------------- ending ---

    def kill_all(self, timeout_s: float = 5.0) -> int:
        """SIGKILL every process in the cgroup, and wait until it is empty; how many died."""
        seen: set[int] = set()
        kill_file = self.dirs[""] / "cgroup.kill" if self.version == 2 else None
        deadline = time.monotonic() + timeout_s
        while True:
            left = self.pids()
            if not left or time.monotonic() > deadline:
                return len(seen | left)
            seen |= left
            if kill_file is not None and kill_file.exists():
                with contextlib.suppress(OSError):
                    write_control(kill_file, "1")
            else:
                # Frozen, nothing forks between reading the list and the kills; thawed,
                # the kills land (a frozen v1 task dies only once it is thawed).
                how = self.freeze(timeout_s=1.0)
                for pid in left:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                if how == "freezer":
                    self.thaw()
                self._frozen_how, self._stopped = None, []
            time.sleep(0.01)

    def close(self) -> Usage:
        """Kill what is left, read the counters, remove the cgroup's directories."""
        self.thaw()
        self.kill_all()
        self.sample()
        usage = self.usage()
        self.remove()
        return usage

    def remove(self, timeout_s: float = 5.0) -> None:
        """``rmdir`` every directory (retried briefly while the last processes exit)."""
        deadline = time.monotonic() + timeout_s
        for d in self.paths:
            while True:
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.02)


def signal_freeze(pids: Iterable[int]) -> list[int]:
    """``SIGSTOP`` each of ``pids``; the ones that got it (send them ``SIGCONT`` to thaw)."""
    out: list[int] = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGSTOP)
        except (ProcessLookupError, PermissionError):
            continue
        out.append(pid)
    return out
