"""The agent's cgroup (issue 13): CPU, memory and processes capped and measured, for real.

Real agents through ``python -m ale_robotics run`` in real cgroups: a CPU burner under
``--cpus 0.5``, a memory hog under ``--memory-mib 200``, a spinning agent frozen while its
planning job is timed, a process that left the agent's process group, and a host without
cgroups (an empty ``/sys/fs/cgroup`` in a private mount namespace). Each of these failed
before the harness made a cgroup per run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Literal

import pytest

from ale_robotics.sandboxes.bwrap.command import sandbox_available

CLI = [sys.executable, "-m", "ale_robotics"]
PENDULUM = "td3-inverted-pendulum-v1"
MOUNTINFO = Path("/proc/self/mountinfo").read_text()


def _cgroup_mounts() -> dict[str, Path]:
    """v1 controller (or "" for the v2 hierarchy) -> mount point, read here without the
    harness's module, so that these tests run (and fail) against code that has none."""
    out: dict[str, Path] = {}
    for line in MOUNTINFO.splitlines():
        head, _, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if len(rest) >= 3 and rest[0] == "cgroup2":
            out.setdefault("", Path(fields[4]))
        elif len(rest) >= 3 and rest[0] == "cgroup":
            for opt in rest[2].split(","):
                out[opt] = Path(fields[4])
    return out


def _cgroups_reason() -> str | None:
    if os.geteuid() != 0:
        return "cgroups need root here (the harness makes a cgroup per run)"
    mounts = _cgroup_mounts()
    where = mounts.get("memory") or mounts.get("")
    if where is None:
        return "no cgroup memory controller or v2 hierarchy is mounted"
    probe = where / f"ale-probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        return f"cannot create a cgroup under {where}: {exc}"
    return None


REASON = _cgroups_reason()
needs_cgroups = pytest.mark.skipif(REASON is not None, reason=REASON or "")
needs_bwrap = pytest.mark.skipif(not sandbox_available(), reason="bubblewrap cannot start here")

# Prints the cgroups it is in, so the test can check they are gone after the run.
WHERE = """
import pathlib
print("CGROUP", repr(pathlib.Path("/proc/self/cgroup").read_text()), flush=True)
"""


def _agent(where: Path, body: str) -> str:
    path = where / "agent.py"
    path.write_text(textwrap.dedent(body))
    return f"{sys.executable} {path}"


def _run(
    tmp: Path, agent: str, *extra: str, task: str = PENDULUM, sandbox: str = "none", **kw: Any
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    proc = subprocess.run(
        [
            *CLI,
            "run",
            task,
            "--agent",
            agent,
            "--sandbox",
            sandbox,
            "--episodes",
            "2",
            "--workers",
            "1",
            "--run-dir",
            str(tmp / "run"),
            "--state-dir",
            str(tmp / "state"),
            "--workspace",
            str(tmp),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp,
        **kw,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    doc: dict[str, Any] = json.loads((tmp / "run" / "result.json").read_text())
    return proc, doc


def _log(tmp: Path) -> str:
    return (tmp / "run" / "agent.log").read_text()


def _events(tmp: Path, kind: str) -> list[dict[str, Any]]:
    lines = (tmp / "run" / "trajectory.jsonl").read_text().splitlines()
    return [e["payload"] for e in map(json.loads, lines) if e["kind"] == kind]


def _agent_cgroup_dirs(tmp: Path) -> list[Path]:
    """The run's cgroup directories the agent reported being in (its WHERE line)."""
    line = next(x for x in _log(tmp).splitlines() if x.startswith("CGROUP "))
    mounts = _cgroup_mounts()
    out = []
    for entry in eval(line[len("CGROUP ") :]).splitlines():  # a repr() the agent printed
        _, names, path = entry.split(":", 2)
        mount = mounts.get(names.split(",")[0])
        if mount is not None and "ale-robotics-" in path:
            out.append(mount / path.lstrip("/"))
    return out


BURN = """
import hashlib, threading, time
buf = b"x" * (1 << 20)
stop = time.monotonic() + 3.0
def spin():  # hashlib releases the GIL on large buffers: 4 threads really run at once
    while time.monotonic() < stop:
        hashlib.sha256(buf).digest()
t0, c0 = time.monotonic(), time.process_time()
threads = [threading.Thread(target=spin) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("SELF", time.process_time() - c0, time.monotonic() - t0, flush=True)
"""


@needs_cgroups
@pytest.mark.parametrize("sandbox", ["none", pytest.param("bwrap", marks=needs_bwrap)])
def test_cpus_caps_an_agent_burning_four_threads(short_tmp: Path, sandbox: str) -> None:
    _, doc = _run(short_tmp, _agent(short_tmp, BURN), "--cpus", "0.5", sandbox=sandbox)
    line = next(x for x in _log(short_tmp).splitlines() if x.startswith("SELF "))
    self_cpu, self_wall = map(float, line.split()[1:])
    assert self_cpu / self_wall < 0.75, line  # uncapped, 4 threads use every core there is
    assert doc["agent_cgroup"] in ("v1", "v2") and doc["agent_cgroup_warning"] is None
    assert doc["agent_limits"] == {"cpus": 0.5, "memory_bytes": None, "pids_max": 4096}
    # the cgroup counts every process of the agent (bwrap, the interpreter's start-up too)
    assert self_cpu * 0.95 <= doc["agent_cpu_s"] < 0.75 * self_wall + 0.5
    assert doc["agent_peak_memory_bytes"] > 1 << 20  # at least the 1 MiB buffer
    (resources,) = _events(short_tmp, "agent_resources")
    assert resources["cpu_s"] == doc["agent_cpu_s"] and resources["limits"]["cpus"] == 0.5


HOG = """
chunks = []
for i in range(1, 101):
    chunks.append(bytearray(10 * 1024 * 1024))  # zero-filled pages, touched: resident
    print("allocated", 10 * i, "MiB", flush=True)
"""


@needs_cgroups
def test_an_agent_over_memory_mib_is_oom_killed_and_the_report_says_so(short_tmp: Path) -> None:
    _, doc = _run(short_tmp, _agent(short_tmp, HOG), "--memory-mib", "200")
    log = _log(short_tmp)
    assert "allocated 150 MiB" in log and "allocated 200 MiB" not in log, log[-500:]
    assert doc["agent_oom_killed"] is True
    assert doc["agent_exit_code"] == -9  # SIGKILL from the OOM killer
    assert 150 * 2**20 <= doc["agent_peak_memory_bytes"] <= 200 * 2**20
    assert doc["agent_limits"]["memory_bytes"] == 200 * 2**20
    assert (
        "OOM killer killed 1 of the agent's processes at its 200.0 MiB memory limit"
        in (doc["score"]["explanation"])
    )
    assert _events(short_tmp, "agent_exited")[0]["oom_killed"] is True


SPINNING_PLANNER = """
import hashlib, subprocess, sys, threading
from ale_robotics.client import AleClient
c = AleClient.from_env()
(c.submission_dir / "planner.yaml").write_text("planner: RRTConnect\\ntime_limit_s: 2\\n")
# a spinner that left the process group (for 60 s at most, should it outlive the run), and
# two in-process threads, all burning CPU
spin60 = "import time\\nend = time.monotonic() + 60\\nwhile time.monotonic() < end: pass"
subprocess.Popen([sys.executable, "-c", spin60], start_new_session=True)
buf = b"x" * (1 << 20)
def spin():
    while True:
        hashlib.sha256(buf).digest()
for _ in range(2):
    threading.Thread(target=spin, daemon=True).start()
print("job state:", c.wait(c.submit(), poll_s=0.1).state, flush=True)
"""


@needs_cgroups
def test_a_spinning_agent_is_frozen_while_its_planning_job_is_timed(short_tmp: Path) -> None:
    _, doc = _run(short_tmp, _agent(short_tmp, SPINNING_PLANNER), task="panda-planner-config-v1")
    assert "job state: SUCCEEDED" in _log(short_tmp)
    assert doc["eval_result"]["metrics"]["planning_time"] > 0
    (frozen,) = _events(short_tmp, "agent_frozen")
    (thawed,) = _events(short_tmp, "agent_thawed")
    assert frozen["job_state"] in ("QUEUED", "RUNNING") and thawed["job_state"] == "SUCCEEDED"
    assert frozen["how"] == "freezer"
    assert frozen["cpu_s"] > 0.05  # it was spinning before the job ...
    assert thawed["frozen_s"] > 0.3  # ... the job took a while ...
    assert thawed["cpu_s"] - frozen["cpu_s"] < 0.01, (frozen, thawed)  # ... and it got none
    assert doc["agent_frozen_s"] == pytest.approx(thawed["frozen_s"], abs=0.01)


ESCAPER = (
    WHERE
    + """
import subprocess
loop = "for i in $(seq 600); do echo beat >> beat; sleep 0.05; done"
subprocess.Popen(["/bin/sh", "-c", loop], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
import os, time
deadline = time.monotonic() + 10
while not os.path.exists("beat") and time.monotonic() < deadline:  # it is running: exit
    time.sleep(0.01)
"""
)


@needs_cgroups
def test_a_process_that_left_the_group_dies_and_the_cgroup_is_removed(short_tmp: Path) -> None:
    _, doc = _run(short_tmp, _agent(short_tmp, ESCAPER))
    beat = short_tmp / "run" / "scratch" / "beat"
    assert beat.exists()
    size = beat.stat().st_size
    time.sleep(0.5)
    assert beat.stat().st_size == size, "a process the agent started (setsid) is still running"
    dirs = _agent_cgroup_dirs(short_tmp)
    assert dirs and all(d.name == f"ale-robotics-{doc['run_id']}" for d in dirs), _log(short_tmp)
    assert not [d for d in dirs if d.exists()], "the run's cgroup outlived the run"


def _unshare() -> str | None:
    exe = shutil.which("unshare")
    if exe is None or os.geteuid() != 0:
        return None
    ok = subprocess.run([exe, "-m", "true"], capture_output=True, check=False).returncode == 0
    return exe if ok else None


UNSHARE = _unshare()


@pytest.mark.skipif(UNSHARE is None, reason="needs root and unshare(1) for a mount namespace")
def test_without_cgroups_the_run_warns_and_completes(short_tmp: Path) -> None:
    # A private mount namespace whose /sys/fs/cgroup is an empty tmpfs: no hierarchy.
    assert UNSHARE is not None
    cmd = 'mount -t tmpfs none /sys/fs/cgroup && exec "$@"'
    wrapper = [UNSHARE, "-m", "--propagation", "private", "sh", "-c", cmd, "sh"]
    agent = _agent(short_tmp, "print('hello', flush=True)")
    proc = subprocess.run(
        [
            *wrapper,
            *CLI,
            "run",
            PENDULUM,
            "--agent",
            agent,
            "--sandbox",
            "none",
            "--run-dir",
            str(short_tmp / "run"),
            "--state-dir",
            str(short_tmp / "state"),
            "--workspace",
            str(short_tmp),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=short_tmp,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "warning: the agent's CPU, memory and processes are neither capped nor measured" in (
        " ".join(proc.stderr.split())
    )
    doc = json.loads((short_tmp / "run" / "result.json").read_text())
    assert doc["agent_cgroup"] == "none" and "cgroups cannot be used" in doc["agent_cgroup_warning"]
    assert doc["agent_cpu_s"] is None and doc["agent_peak_memory_bytes"] is None
    assert proc.stdout.strip().splitlines()[-1].startswith("score: 0.000 (no submission")
    assert "hello" in _log(short_tmp)


# ------------------------------------------------------- the module on its own ---

V2_HOST = """\
24 30 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw
"""
DOCKER_V1 = """\
610 600 0:31 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup rw,cpu,cpuacct
611 600 0:35 /docker/abc /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory
612 600 0:40 /docker/abc /sys/fs/cgroup/systemd ro - cgroup cgroup rw,name=systemd
"""


def test_mounts_and_own_cgroups_are_parsed() -> None:
    from ale_robotics.sandboxes.cgroup_setup import own_cgroups, parse_mounts

    (v2,) = parse_mounts(V2_HOST)
    assert (v2.version, v2.mountpoint, v2.controllers) == (2, Path("/sys/fs/cgroup"), frozenset())
    cpu, mem, systemd = parse_mounts(DOCKER_V1)
    assert cpu.controllers == {"cpu", "cpuacct"} and cpu.root == "/docker/abc"
    assert mem.controllers == {"memory"} and not systemd.controllers
    own = own_cgroups("12:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n0::/user.slice\n")
    assert own == {
        "cpu": "/docker/abc",
        "cpuacct": "/docker/abc",
        "memory": "/docker/abc",
        "": "/user.slice",
    }


def test_no_cgroup_mount_is_unavailable_with_the_reason() -> None:
    from ale_robotics.sandboxes.cgroup_setup import CgroupsUnavailable, create_run_cgroup
    from ale_robotics.sandboxes.cgroups import Limits

    with pytest.raises(CgroupsUnavailable, match="no cgroup hierarchy is mounted"):
        create_run_cgroup("x", Limits(), mountinfo="", proc_cgroup="")


def test_the_task_budget_sets_limits_and_the_command_line_overrides_them() -> None:
    from ale_robotics.harness.agent.proc import agent_limits as _agent_limits
    from ale_robotics.harness.run import RunOptions
    from ale_robotics.sandboxes.cgroups import Limits
    from ale_robotics.tasks.manifest import ComputeBudget, ManifestEntry

    entry = ManifestEntry.model_construct(
        compute_budget=ComputeBudget(wall_clock_s=60, cpus=2.0, memory_bytes=2**30)
    )
    opts = RunOptions(task_id=PENDULUM, agent_cmd="x")
    assert _agent_limits(opts, entry) == Limits(2.0, 2**30, 4096)
    opts = RunOptions(task_id=PENDULUM, agent_cmd="x", cpus=0.5, memory_bytes=2**28, pids_max=9)
    assert _agent_limits(opts, entry) == Limits(0.5, 2**28, 9)
    assert _agent_limits(RunOptions(task_id=PENDULUM, agent_cmd="x"), None) == Limits(
        None, None, 4096
    )


V2_MOUNT = _cgroup_mounts().get("")
V1_MOUNTED = "cpuacct" in _cgroup_mounts()


def _until_cpu(cg: Any, at_least: float, timeout_s: float = 60.0) -> None:
    """Wait until the cgroup's processes used ``at_least`` seconds of CPU."""
    deadline = time.monotonic() + timeout_s
    while (cg.cpu_s() or 0) <= at_least:
        assert time.monotonic() < deadline, f"CPU time stayed at {cg.cpu_s()} s"
        time.sleep(0.02)


@pytest.mark.parametrize(
    "version",
    [
        pytest.param(
            1,
            marks=pytest.mark.skipif(
                not V1_MOUNTED or REASON is not None, reason=f"no usable cgroup v1 here ({REASON})"
            ),
        ),
        pytest.param(
            2,
            marks=pytest.mark.skipif(
                V2_MOUNT is None or not os.access(V2_MOUNT, os.W_OK),
                reason="no writable cgroup v2 hierarchy here",
            ),
        ),
    ],
)
def test_a_run_cgroup_counts_freezes_kills_and_goes(version: Literal[1, 2]) -> None:
    """Both hierarchies where this host has them (a hybrid host: v1 controllers, and a v2
    hierarchy without controllers, which still counts CPU time, freezes and kills)."""
    from ale_robotics.harness.agent.io import limited_argv
    from ale_robotics.sandboxes.cgroup_setup import create_run_cgroup
    from ale_robotics.sandboxes.cgroups import Limits

    cg = create_run_cgroup(f"unit-{os.getpid()}", Limits(pids_max=64), version=version)
    try:
        busy = "import os\nos.fork()\nwhile True: pass"  # two spinning processes
        proc = subprocess.Popen(limited_argv([sys.executable, "-c", busy], 2**20, cg.procs_files))
        deadline = time.monotonic() + 10
        while len(cg.pids()) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(cg.pids()) == 2 and proc.pid in cg.pids()
        # CPU time as the spinners get it (a busy host gives them less a second): waited for
        _until_cpu(cg, 0.1)
        assert cg.freeze() in ("freezer", "SIGSTOP")
        before = cg.cpu_s()
        assert before is not None and before > 0.1
        time.sleep(0.3)
        assert cg.cpu_s() == pytest.approx(before, abs=0.005)
        cg.thaw()
        _until_cpu(cg, before + 0.05)  # running again: its CPU time grows
        usage = cg.close()
        assert usage.cpu_s is not None and usage.cpu_s > before
        assert proc.wait(timeout=5) == -9 and not cg.pids()
        assert not [d for d in cg.paths if d.exists()]
    finally:
        with contextlib.suppress(Exception):
            cg.close()
