"""A cgroup per run: the agent's CPU, memory and process count, capped and measured.

bubblewrap has no cgroups, so the harness makes one cgroup for each run and puts
the agent in it: bwrap and everything it starts, or the agent's own process with
``--sandbox none``. The kernel then caps the agent at ``cpus`` CPUs (CFS quota),
``memory_bytes`` of memory (swap included where swap is accounted; past it the
OOM killer kills the largest of its processes) and ``pids_max`` tasks (threads
count: a fork bomb stops there), and counts its CPU-seconds and peak memory for
``result.json``. Memory counts as the kernel charges it: the agent's tmpfs files
(the sandbox's ``/tmp`` and ``/dev/shm``) and page cache included.

**Entering before exec.** The agent's launcher (:func:`ale_robotics.harness.agent_io.limited_argv`)
writes its own pid into every ``cgroup.procs`` of the run, then execs bwrap or the
agent, so whatever the agent starts is born inside: there is no window in which a
child could be forked outside and escape. ``preexec_fn`` would do the same in the
child, but it is unsafe in a process with threads (the embedded evaluator's gRPC
threads). Right after spawning it the harness writes the launcher's pid itself
too (a no-op when the launcher was first): that write is the check, so a cgroup
the agent could not enter is reported, never silently unused. An agent with
``--sandbox none`` runs as the harness's user (root) and can move itself out; in
the sandbox ``/sys`` does not exist and its cgroup namespace is rooted at its cgroup.

**Where.** cgroup v1 (here: ``cpu``, ``cpuacct``, ``memory``, ``pids``, ``freezer``
mounted under ``/sys/fs/cgroup``): in each hierarchy, a child
``ale-robotics-<run_id>`` of the harness's own cgroup, so that whatever limits the
host put on the harness (a container's) still hold. cgroup v2, where it is the
hierarchy with the controllers (``/sys/fs/cgroup`` is ``cgroup2``): a child of
the hierarchy's root, since v2 allows controllers to be enabled only below a
cgroup without processes, and the harness's own cgroup has the harness in it.
A v2 cgroup without the ``cpu``, ``memory`` or ``pids`` controllers still counts
CPU time, freezes and kills; the limits it cannot apply are listed in
:attr:`RunCgroup.missing`.

**Unavailable** (not root, nothing mounted, a read-only ``/sys/fs/cgroup``):
:func:`create_run_cgroup` raises :class:`CgroupsUnavailable` with the reason; the
harness says so on stderr and in ``result.json`` and runs the agent uncapped, as
``--sandbox none`` runs it unsandboxed. It never fails a run for it.

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
    "CgroupsUnavailable",
    "Limits",
    "Mount",
    "RunCgroup",
    "Usage",
    "create_run_cgroup",
    "own_cgroups",
    "parse_mounts",
    "signal_freeze",
]

V1_CONTROLLERS = ("cpu", "cpuacct", "memory", "pids", "freezer")
"""The v1 hierarchies a run's cgroup is made in, where they are mounted."""
V2_CONTROLLERS = ("cpu", "memory", "pids")
"""The v2 controllers enabled for a run's cgroup, where the root offers them."""
CFS_PERIOD_US = 100_000


class CgroupsUnavailable(Exception):
    """No cgroup can be made for the run here; the message says why."""


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


@dataclass(frozen=True)
class Mount:
    """One cgroup hierarchy from ``/proc/self/mountinfo``."""

    version: Literal[1, 2]
    mountpoint: Path
    root: str
    """The mount's root inside the hierarchy (``/`` unless a container mounted a subtree)."""
    controllers: frozenset[str]


def parse_mounts(mountinfo: str) -> list[Mount]:
    """The cgroup (v1) and cgroup2 mounts of a ``/proc/<pid>/mountinfo`` text."""
    out: list[Mount] = []
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        if not sep:
            continue
        fields, rest = head.split(), tail.split()
        if len(fields) < 5 or len(rest) < 3 or rest[0] not in ("cgroup", "cgroup2"):
            continue
        mountpoint = Path(_unescape(fields[4]))
        root = _unescape(fields[3])
        if rest[0] == "cgroup2":
            out.append(Mount(2, mountpoint, root, frozenset()))
        else:
            opts = frozenset(rest[2].split(","))
            out.append(Mount(1, mountpoint, root, opts & frozenset(V1_CONTROLLERS)))
    return out


def own_cgroups(proc_cgroup: str) -> dict[str, str]:
    """Controller name (``""`` for v2) -> this process's cgroup path, from ``/proc/self/cgroup``."""
    out: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, names, path = parts
        for name in names.split(",") if names else [""]:
            out[name] = path
    return out


def _unescape(s: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as ``\\ooo``."""
    for code in ("040", "011", "012", "134"):
        s = s.replace("\\" + code, chr(int(code, 8)))
    return s


def _below(mount: Mount, path: str) -> Path:
    """The directory of cgroup ``path`` under ``mount`` (paths are relative to the mount root)."""
    root = mount.root.rstrip("/")
    if root and (path == root or path.startswith(root + "/")):
        path = path[len(root) :]
    return mount.mountpoint / path.lstrip("/")


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _write(path: Path, value: str) -> None:
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
            _write(procs, str(pid))

    def pids(self) -> set[int]:
        """Every process in the cgroup now (in any of its directories)."""
        out: set[int] = set()
        for procs in self.procs_files:
            for line in (_read(procs) or "").split():
                with contextlib.suppress(ValueError):
                    out.add(int(line))
        out.discard(os.getpid())  # never the harness itself, whatever happened
        return out

    # ------------------------------------------------------------------ counters ---

    def cpu_s(self) -> float | None:
        """CPU-seconds (user + system) used by every process that was ever in the cgroup."""
        if self.version == 2:
            usec = _keyed(_read(self.dirs[""] / "cpu.stat"), "usage_usec")
            return None if usec is None else usec / 1e6
        d = self._dir("cpuacct")
        text = None if d is None else _read(d / "cpuacct.usage")
        return None if text is None else int(text) / 1e9

    def memory_bytes(self) -> int | None:
        d = self._dir("memory")
        name = "memory.current" if self.version == 2 else "memory.usage_in_bytes"
        text = None if d is None else _read(d / name)
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
        text = _read(d / name)
        if text is not None:
            return max(int(text), self._peak_sampled)
        return self._peak_sampled or None

    def oom_kills(self) -> int | None:
        """Processes the OOM killer killed at the cgroup's memory limit."""
        d = self._dir("memory")
        if d is None:
            return None
        if self.version == 2:
            return _keyed(_read(d / "memory.events"), "oom_kill")
        return _keyed(_read(d / "memory.oom_control"), "oom_kill")

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
            return _keyed(_read(self.dirs[""] / "cgroup.events"), "frozen") == 1
        d = self._dir("freezer")
        return d is not None and (_read(d / "freezer.state") or "").strip() == "FROZEN"

    def freeze(self, timeout_s: float = 5.0) -> str:
        """Stop every process of the cgroup; returns how (``freezer``, ``SIGSTOP``)."""
        freezer = self._freezer()
        if freezer is not None:
            try:
                _write(freezer[0], freezer[1])
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
                    _write(freezer[0], freezer[2])
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
                    _write(kill_file, "1")
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


def create_run_cgroup(
    run_id: str,
    limits: Limits,
    *,
    version: Literal[1, 2] | None = None,
    mountinfo: str | None = None,
    proc_cgroup: str | None = None,
) -> RunCgroup:
    """Make the run's cgroup and apply ``limits``; :class:`CgroupsUnavailable` if none can be.

    ``version`` picks a hierarchy (default: v1 where any of its controllers is
    mounted, else v2). ``mountinfo`` and ``proc_cgroup`` default to this process's.
    """
    if mountinfo is None:
        mountinfo = _read(Path("/proc/self/mountinfo")) or ""
    if proc_cgroup is None:
        proc_cgroup = _read(Path("/proc/self/cgroup")) or ""
    mounts = parse_mounts(mountinfo)
    own = own_cgroups(proc_cgroup)
    name = f"ale-robotics-{run_id}"
    v1 = [m for m in mounts if m.version == 1 and m.controllers]
    v2 = [m for m in mounts if m.version == 2]
    if version == 1 or (version is None and v1):
        if not v1:
            raise CgroupsUnavailable("no cgroup v1 controller is mounted")
        return _create_v1(name, limits, v1, own)
    if not v2:
        raise CgroupsUnavailable("no cgroup hierarchy is mounted (see /proc/self/mountinfo)")
    # The one at /sys/fs/cgroup where there are several (a hybrid host's /sys/fs/cgroup/unified).
    v2.sort(key=lambda m: m.mountpoint != Path("/sys/fs/cgroup"))
    return _create_v2(name, limits, v2[0])


def _create_v1(name: str, limits: Limits, mounts: list[Mount], own: dict[str, str]) -> RunCgroup:
    dirs: dict[str, Path] = {}
    errors: list[str] = []
    for mount in mounts:
        ctrl = sorted(mount.controllers)[0]
        d = _below(mount, own.get(ctrl, "/")) / name
        try:
            d.mkdir()
        except OSError as exc:
            errors.append(f"{d}: {exc.strerror or exc}")
            continue
        for c in mount.controllers:
            dirs[c] = d
    if not dirs:
        raise CgroupsUnavailable("cannot create the run's cgroup (" + "; ".join(errors) + ")")
    cg = RunCgroup(1, dirs, limits)
    try:
        _limit_v1(cg)
    except OSError as exc:
        cg.remove()
        raise CgroupsUnavailable(f"cannot set the run's cgroup limits: {exc}") from None
    cg.missing += _missing(limits, set(dirs), cpu_counter="cpuacct", version=1)
    return cg


def _limit_v1(cg: RunCgroup) -> None:
    lim, dirs = cg.limits, cg.dirs
    if lim.cpus is not None and "cpu" in dirs:
        _write(dirs["cpu"] / "cpu.cfs_period_us", str(CFS_PERIOD_US))
        _write(dirs["cpu"] / "cpu.cfs_quota_us", str(max(1000, round(lim.cpus * CFS_PERIOD_US))))
    if lim.memory_bytes is not None and "memory" in dirs:
        _write(dirs["memory"] / "memory.limit_in_bytes", str(lim.memory_bytes))
        memsw = dirs["memory"] / "memory.memsw.limit_in_bytes"
        if memsw.exists():  # swap accounted: memory + swap capped at the same total
            _write(memsw, str(lim.memory_bytes))
    if lim.pids_max is not None and "pids" in dirs:
        _write(dirs["pids"] / "pids.max", str(lim.pids_max))


def _create_v2(name: str, limits: Limits, mount: Mount) -> RunCgroup:
    root = mount.mountpoint  # the hierarchy's root as mounted here
    offered = set((_read(root / "cgroup.controllers") or "").split())
    enabled = set((_read(root / "cgroup.subtree_control") or "").split())
    for c in V2_CONTROLLERS:
        if c in offered and c not in enabled:
            with contextlib.suppress(OSError):  # EBUSY in a cgroup with processes
                _write(root / "cgroup.subtree_control", f"+{c}")
    d = root / name
    try:
        d.mkdir()
    except OSError as exc:
        raise CgroupsUnavailable(
            f"cannot create the run's cgroup {d}: {exc.strerror or exc}"
        ) from None
    cg = RunCgroup(2, {"": d}, limits)
    have = set((_read(d / "cgroup.controllers") or "").split())
    lim = limits
    try:
        if lim.cpus is not None and "cpu" in have:
            _write(d / "cpu.max", f"{max(1000, round(lim.cpus * CFS_PERIOD_US))} {CFS_PERIOD_US}")
        if lim.memory_bytes is not None and "memory" in have:
            _write(d / "memory.max", str(lim.memory_bytes))
            if (d / "memory.swap.max").exists():
                _write(d / "memory.swap.max", "0")
        if lim.pids_max is not None and "pids" in have:
            _write(d / "pids.max", str(lim.pids_max))
    except OSError as exc:
        cg.remove()
        raise CgroupsUnavailable(f"cannot set the run's cgroup limits: {exc}") from None
    cg.missing += _missing(limits, have | {"cpu.stat"}, cpu_counter="cpu.stat", version=2)
    return cg


def _missing(limits: Limits, have: set[str], *, cpu_counter: str, version: int) -> list[str]:
    """In words, what ``limits`` asked for or the report needs that ``have`` cannot give."""
    out: list[str] = []
    for what, ctrl in (("cpus", "cpu"), ("memory_bytes", "memory"), ("pids_max", "pids")):
        if getattr(limits, what) is not None and ctrl not in have:
            out.append(f"{what} not applied (no cgroup v{version} {ctrl!r} controller)")
    if cpu_counter not in have:
        out.append(f"CPU time not measured (no cgroup v{version} {cpu_counter!r} controller)")
    if "memory" not in have:
        out.append(f"peak memory not measured (no cgroup v{version} 'memory' controller)")
    return out
