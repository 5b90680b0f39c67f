"""Making a run's cgroup: the host's cgroup hierarchies found, the cgroup created, its limits set.

Apart from :mod:`.cgroups` (the cgroup once it exists: membership, counters, freezing,
removal) because this is the part that reads the host's mounts and decides where the
cgroup goes, and the part a host without cgroups stops at.

**Where.** cgroup v1 (here: ``cpu``, ``cpuacct``, ``memory``, ``pids``, ``freezer``
mounted under ``/sys/fs/cgroup``): in each hierarchy, a child
``ale-robotics-<run_id>`` of the harness's own cgroup, so that whatever limits the
host put on the harness (a container's) still hold. cgroup v2, where it is the
hierarchy with the controllers (``/sys/fs/cgroup`` is ``cgroup2``): a child of
the hierarchy's root, since v2 allows controllers to be enabled only below a
cgroup without processes, and the harness's own cgroup has the harness in it.
A v2 cgroup without the ``cpu``, ``memory`` or ``pids`` controllers still counts
CPU time, freezes and kills; the limits it cannot apply are listed in
:attr:`.RunCgroup.missing`.

**Unavailable** (not root, nothing mounted, a read-only ``/sys/fs/cgroup``):
:func:`create_run_cgroup` raises :class:`CgroupsUnavailable` with the reason; the
harness says so on stderr and in ``result.json`` and runs the agent uncapped, as
``--sandbox none`` runs it unsandboxed. It never fails a run for it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ale_robotics.sandboxes.cgroups import Limits, RunCgroup, read_control, write_control

__all__ = [
    "CgroupsUnavailable",
    "Mount",
    "create_run_cgroup",
    "own_cgroups",
    "parse_mounts",
]

V1_CONTROLLERS = ("cpu", "cpuacct", "memory", "pids", "freezer")
"""The v1 hierarchies a run's cgroup is made in, where they are mounted."""
V2_CONTROLLERS = ("cpu", "memory", "pids")
"""The v2 controllers enabled for a run's cgroup, where the root offers them."""
CFS_PERIOD_US = 100_000


class CgroupsUnavailable(Exception):
    """No cgroup can be made for the run here; the message says why."""


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
        mountinfo = read_control(Path("/proc/self/mountinfo")) or ""
    if proc_cgroup is None:
        proc_cgroup = read_control(Path("/proc/self/cgroup")) or ""
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
        write_control(dirs["cpu"] / "cpu.cfs_period_us", str(CFS_PERIOD_US))
        write_control(
            dirs["cpu"] / "cpu.cfs_quota_us", str(max(1000, round(lim.cpus * CFS_PERIOD_US)))
        )
    if lim.memory_bytes is not None and "memory" in dirs:
        write_control(dirs["memory"] / "memory.limit_in_bytes", str(lim.memory_bytes))
        memsw = dirs["memory"] / "memory.memsw.limit_in_bytes"
        if memsw.exists():  # swap accounted: memory + swap capped at the same total
            write_control(memsw, str(lim.memory_bytes))
    if lim.pids_max is not None and "pids" in dirs:
        write_control(dirs["pids"] / "pids.max", str(lim.pids_max))


def _create_v2(name: str, limits: Limits, mount: Mount) -> RunCgroup:
    root = mount.mountpoint  # the hierarchy's root as mounted here
    offered = set((read_control(root / "cgroup.controllers") or "").split())
    enabled = set((read_control(root / "cgroup.subtree_control") or "").split())
    for c in V2_CONTROLLERS:
        if c in offered and c not in enabled:
            with contextlib.suppress(OSError):  # EBUSY in a cgroup with processes
                write_control(root / "cgroup.subtree_control", f"+{c}")
    d = root / name
    try:
        d.mkdir()
    except OSError as exc:
        raise CgroupsUnavailable(
            f"cannot create the run's cgroup {d}: {exc.strerror or exc}"
        ) from None
    cg = RunCgroup(2, {"": d}, limits)
    have = set((read_control(d / "cgroup.controllers") or "").split())
    lim = limits
    try:
        if lim.cpus is not None and "cpu" in have:
            write_control(
                d / "cpu.max", f"{max(1000, round(lim.cpus * CFS_PERIOD_US))} {CFS_PERIOD_US}"
            )
        if lim.memory_bytes is not None and "memory" in have:
            write_control(d / "memory.max", str(lim.memory_bytes))
            if (d / "memory.swap.max").exists():
                write_control(d / "memory.swap.max", "0")
        if lim.pids_max is not None and "pids" in have:
            write_control(d / "pids.max", str(lim.pids_max))
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
