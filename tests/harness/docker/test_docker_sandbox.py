"""The agent container from inside, and its lifetime: the bwrap sandbox's probes, in Docker.

One ``ale-robotics run --sandbox docker`` runs a probe agent that reports what it
could and could not do (network, host files, the harness socket and the state dir,
writes, limits); the test checks that against the host. Then the container's
lifetime: killed at the budget even when it ignores SIGTERM, removed on Ctrl-C and
when the harness itself is SIGKILLed (the reaper), and swept when a reaper could not
run. Skipped without Docker and the images (``make images``), failed under
``ALE_REQUIRE_DOCKER=1``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from docker_support import (
    EVALUATOR_IMAGE,
    agent_cmd,
    need_docker,
    run_containers,
    sandbox_args,
    wait_until_gone,
)

from ale_robotics.sandboxes.cgroups import Limits
from ale_robotics.sandboxes.docker.cli import sweep_orphans
from ale_robotics.sandboxes.docker.container import AgentContainer
from ale_robotics.sandboxes.docker.images import require_image
from ale_robotics.sandboxes.errors import HarnessError

CLI = [sys.executable, "-m", "ale_robotics"]
TASK = "td3-inverted-pendulum-v1"

PROBE = r"""
import ctypes, ctypes.util, json, os, resource, socket
out = {"uid": os.getuid(), "gid": os.getgid(), "cwd": os.getcwd(), "home": os.environ["HOME"]}
def connect(family, address):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect(address)
        return "CONNECTED"
    except OSError as exc:
        return type(exc).__name__
    finally:
        s.close()
out["host_tcp"] = connect(socket.AF_INET, ("127.0.0.1", PORT))
out["host_abstract"] = connect(socket.AF_UNIX, "\0" + "ABSTRACT")
out["harness_sock"] = connect(socket.AF_UNIX, "HARNESS_SOCK")
out["interfaces"] = sorted(name for _, name in socket.if_nameindex())
def visible(p):
    try:
        open(p, "rb").read(1)
        return True
    except OSError:
        return os.path.exists(p)
for name, path in {"secret": "STATE/secret", "harness_token": "STATE/harness.token",
                   "other_run": "OTHER/result.json", "outside": "OUTSIDE",
                   "docker_sock": "/var/run/docker.sock", "run_log": "RUN_DIR/agent.log"}.items():
    out[name] = visible(path)
try:  # the image's own (the host's is not there): not readable by the agent either
    open("/etc/shadow", "rb").read(1)
    out["shadow"] = True
except OSError:
    out["shadow"] = False
def write(p):
    try:
        with open(p, "w") as fh:
            fh.write("from the container")
        return True
    except OSError:
        return False
out["wrote_submission"] = write(os.path.join(os.environ["ALE_SUBMISSION_DIR"], "note.txt"))
out["wrote_cwd"] = write("cwd-note.txt")
out["wrote_home"] = write(os.path.join(os.environ["HOME"], ".probe-rc"))
out["wrote_tmp"] = write("/tmp/ale-probe-x")
out["wrote_workspace"] = write(os.path.join(os.environ["ALE_WORKSPACE"], "planted.py"))
out["wrote_etc"] = write("/etc/planted")
out["wrote_venv"] = write(os.path.join(os.path.dirname(os.__file__), "planted.py"))
out["wrote_socket_dir"] = write(os.path.join(os.path.dirname(
    os.environ["ALE_ENDPOINT"].removeprefix("unix://")), "decoy"))
out["socket_dir"] = sorted(os.listdir(os.path.dirname(os.environ["ALE_ENDPOINT"][7:])))
st = os.statvfs("/tmp")
out["tmp_bytes"] = st.f_blocks * st.f_frsize
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
out["nested_userns"] = libc.unshare(0x10000000) == 0
def read(p):
    try:
        return open(p).read().strip()
    except OSError:
        return None
out["memory_limit"] = read("/sys/fs/cgroup/memory/memory.limit_in_bytes") or read(
    "/sys/fs/cgroup/memory.max")
out["cpu_quota"] = read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") or read("/sys/fs/cgroup/cpu.max")
out["pids_max"] = read("/sys/fs/cgroup/pids/pids.max") or read("/sys/fs/cgroup/pids.max")
out["fsize"] = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
from ale_robotics.client import AleClient
out["spec_task"] = AleClient.from_env().get_spec().task.id
print("PROBE " + json.dumps(out))
"""


def _probe(log: Path) -> dict[str, object]:
    text = log.read_text()
    line = next((x for x in text.splitlines() if x.startswith("PROBE ")), None)
    assert line is not None, text[-3000:]
    out: dict[str, object] = json.loads(line[len("PROBE ") :])
    return out


def test_the_agent_container_is_offline_blind_capped_and_reaches_the_evaluator(
    short_tmp: Path,
) -> None:
    need_docker()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    abstract_name = f"ale-test-{uuid.uuid4().hex}"
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind("\0" + abstract_name)
    abstract.listen()
    other = short_tmp / "runs" / "run-older"
    other.mkdir(parents=True)
    (other / "result.json").write_text("{}")
    outside = short_tmp / "outside.txt"
    outside.write_text("host file")
    run_dir = short_tmp / "run"
    script = short_tmp / "probe.py"
    script.write_text(
        PROBE.replace("PORT", str(listener.getsockname()[1]))
        .replace("ABSTRACT", abstract_name)
        .replace("STATE", str(short_tmp / "state"))
        .replace("OTHER", str(other))
        .replace("OUTSIDE", str(outside))
        .replace("RUN_DIR", str(run_dir))
        .replace("HARNESS_SOCK", "/tmp/harness.sock")
    )
    try:
        proc = subprocess.run(
            [*CLI, "run", TASK, "--agent", agent_cmd("docker", script), *sandbox_args("docker"),
             "--run-dir", str(run_dir), "--state-dir", str(short_tmp / "state"),
             "--cpus", "0.5", "--memory-mib", "256", "--pids-max", "64", "--disk-quota-mib", "64"],
            capture_output=True, text=True, timeout=300, cwd=short_tmp,
        )  # fmt: skip
    finally:
        listener.close()
        abstract.close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = _probe(run_dir / "agent.log")
    assert (out["uid"], out["gid"]) == (65534, 65534)  # not root
    # HOME is the scratch's home/ (agent software keeps its config there, within the quota)
    assert out["cwd"] == "/scratch" and out["home"] == "/scratch/home" and out["wrote_home"]
    # No network: only a loopback of its own; the host's TCP port and abstract socket
    # (per network namespace) are unreachable, and so is the harness's socket.
    assert out["interfaces"] == ["lo"]
    assert out["host_tcp"] != "CONNECTED" and out["host_abstract"] != "CONNECTED"
    assert out["harness_sock"] != "CONNECTED"
    # No host file: the state dir, other runs, its own run dir's log, the rest.
    for name in ("secret", "harness_token", "other_run", "outside", "shadow", "run_log"):
        assert out[name] is False, (name, out)
    assert out["docker_sock"] is False  # no exec access to anything
    # Writes: only the submission and scratch dirs (and its private /tmp).
    assert out["wrote_submission"] and out["wrote_cwd"] and out["wrote_tmp"]
    assert (run_dir / "submission" / "note.txt").read_text() == "from the container"
    assert (run_dir / "scratch" / "cwd-note.txt").exists()
    assert not Path("/tmp/ale-probe-x").exists()
    for name in ("wrote_workspace", "wrote_etc", "wrote_venv", "wrote_socket_dir"):
        assert out[name] is False, (name, out)
    # the agent socket's directory: the socket and its shared-memory data plane's, nothing else
    assert out["socket_dir"] == ["agent.sock", "agent.sock.data"]
    assert isinstance(out["tmp_bytes"], int) and out["tmp_bytes"] <= 2 * 1024**3
    assert out["nested_userns"] is False
    # The limits, as the kernel applies them to the container.
    assert out["memory_limit"] in (str(256 * 1024**2),)
    assert out["cpu_quota"] in ("50000", "50000 100000")
    assert out["pids_max"] == "64"
    assert out["fsize"] == 64 * 1024**2
    assert out["spec_task"] == TASK
    doc = json.loads((run_dir / "result.json").read_text())
    assert doc["agent_limits"] == {"cpus": 0.5, "memory_bytes": 256 * 1024**2, "pids_max": 64}
    assert (run_dir / "agent.log").exists() and run_containers(doc["run_id"]) == []


SLEEPER = """
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # only SIGKILL ends it
open("started", "w").close()
time.sleep(600)
"""


def _start(short_tmp: Path, *extra: str) -> tuple[subprocess.Popen[str], Path]:
    script = short_tmp / "sleeper.py"
    script.write_text(SLEEPER)
    run_dir = short_tmp / "run"
    proc = subprocess.Popen(
        [*CLI, "run", TASK, "--agent", agent_cmd("docker", script), *sandbox_args("docker"),
         "--run-dir", str(run_dir), "--state-dir", str(short_tmp / "state"), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=short_tmp,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not (run_dir / "scratch" / "started").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the agent never started"
        time.sleep(0.1)
    return proc, run_dir


def _run_id(run_dir: Path) -> str:
    first = (run_dir / "trajectory.jsonl").read_text().splitlines()[0]
    run_id: str = json.loads(first)["run_id"]
    return run_id


def test_an_agent_that_ignores_sigterm_is_killed_at_its_budget(short_tmp: Path) -> None:
    need_docker()
    script = short_tmp / "sleeper.py"
    script.write_text(SLEEPER)
    proc = subprocess.run(
        [*CLI, "run", TASK, "--agent", agent_cmd("docker", script), *sandbox_args("docker"),
         "--run-dir", str(short_tmp / "run"), "--state-dir", str(short_tmp / "state"),
         "--budget", "4"],
        capture_output=True, text=True, timeout=300, cwd=short_tmp,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((short_tmp / "run" / "result.json").read_text())
    assert doc["agent_budget_exceeded"] is True
    # killed at its budget, not left to sleep out its 600 s: Docker's record of a SIGKILL
    assert doc["agent_exit_code"] == 137
    assert run_containers(doc["run_id"]) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_run_removes_its_container(short_tmp: Path, sig: signal.Signals) -> None:
    need_docker()
    proc, run_dir = _start(short_tmp)
    run_id = _run_id(run_dir)
    assert len(run_containers(run_id)) == 1
    proc.send_signal(sig)
    proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig.value
    doc = json.loads((run_dir / "result.json").read_text())
    assert doc["state"] == "interrupted" and doc["signal"] == sig.name
    assert run_containers(run_id) == []


def test_killing_the_harness_removes_the_agent_and_evaluator_containers(short_tmp: Path) -> None:
    """SIGKILL: no clean-up of the harness runs; the reapers remove both containers."""
    need_docker()
    proc, run_dir = _start(short_tmp, "--evaluator-image", EVALUATOR_IMAGE)
    run_id = _run_id(run_dir)
    assert len(run_containers(run_id)) == 2
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert wait_until_gone(run_id) == []


def test_containers_of_a_harness_that_is_gone_are_swept(short_tmp: Path) -> None:
    """A container whose owner died without its reaper (both killed) goes at the next run."""
    need_docker()
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    name = f"ale-agent-orphan-{uuid.uuid4().hex[:8]}"
    image = require_image(os.environ.get("ALE_TEST_AGENT_IMAGE", "ale-robotics/agent:latest"))
    subprocess.run(
        ["docker", "create", "--name", name, "--label", f"ale-robotics.owner={boot}:999999999:1",
         "--label", "ale-robotics.run=orphan", "--network", "none", image.id, "true"],
        check=True, capture_output=True,
    )  # fmt: skip
    try:
        swept = sweep_orphans()
        assert swept, "the orphan was not swept"
        gone = subprocess.run(["docker", "inspect", name], capture_output=True)
        assert gone.returncode != 0
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def test_a_container_that_cannot_start_is_an_infrastructure_failure(short_tmp: Path) -> None:
    """Docker's own record tells it apart from an agent's exit code (which it could fake)."""
    need_docker()
    scratch, submission, sock_dir = short_tmp / "scratch", short_tmp / "sub", short_tmp / "a"
    for d in (scratch, submission, sock_dir):
        d.mkdir()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_dir / "agent.sock"))
    container = AgentContainer.create(
        run_id=f"t-{uuid.uuid4().hex[:8]}",
        image=require_image(os.environ.get("ALE_TEST_AGENT_IMAGE", "ale-robotics/agent:latest")),
        argv=["/opt/ale/bin/python", "-c", "pass"],
        env={"ALE_TASK_ID": TASK},
        scratch=scratch,
        submission=submission,
        agent_socket=sock_dir / "agent.sock",
        limits=Limits(),
        max_file_bytes=1024**2,
    )
    try:
        scratch.rmdir()  # the bind mount's source is gone: the container cannot start
        start = subprocess.run(container.start_argv(), capture_output=True, text=True)
        assert start.returncode != 0
        container.close()
        with pytest.raises(HarnessError, match="agent container did not start"):
            container.check_started(killed=False, log_tail=start.stderr)
    finally:
        container.remove()
        sock.close()


HIDDEN_PROBE = r"""
import json, os
out = {}
for name in ("mujoco", "gymnasium_robotics", "gymnasium"):
    try:
        __import__(name)
        out[name] = "imported"
    except ImportError as exc:
        out[name] = str(exc)
import site
sp = next(p for p in site.getsitepackages() if os.path.isdir(os.path.join(p, "gymnasium")))
out["mujoco_dir"] = sorted(os.listdir(os.path.join(sp, "mujoco")))
out["planted"] = False
try:
    open(os.path.join(sp, "mujoco", "core.py"), "w").write("x = 1\n")
    out["planted"] = True
except OSError:
    pass
print("PROBE " + json.dumps(out))
"""


def test_a_tasks_hidden_modules_cannot_be_imported_in_the_agent_image(short_tmp: Path) -> None:
    """td3-walker2d-repro-v1's simulator runs only in the evaluator: the MuJoCo family is
    hidden from its agent. An image that ships it (here a stand-in ``mujoco`` package and
    a ``gymnasium_robotics`` module file) gets them blocked as bubblewrap blocks the host's."""
    need_docker()
    base = os.environ.get("ALE_TEST_AGENT_IMAGE", "ale-robotics/agent:latest")
    tag = f"ale-robotics/agent-test-hidden:{uuid.uuid4().hex[:8]}"
    dockerfile = (
        f"FROM {base}\nUSER 0\n"
        "RUN sp=$(python -c 'import gymnasium, os; print(os.path.dirname(os.path.dirname("
        "gymnasium.__file__)))') && mkdir $sp/mujoco && echo 'print(1)' > $sp/mujoco/__init__.py"
        " && echo 'SECRET = 1' > $sp/mujoco/solutions.py"
        " && echo 'x = 1' > $sp/gymnasium_robotics.py\n"
        "USER 65534:65534\n"
    )
    built = subprocess.run(
        ["docker", "build", "--network", "none", "-q", "-t", tag, "-"],
        input=dockerfile, capture_output=True, text=True,
        env={**os.environ, "DOCKER_BUILDKIT": "0"},
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    try:
        script = short_tmp / "probe.py"
        script.write_text(HIDDEN_PROBE)
        run_dir = short_tmp / "run"
        proc = subprocess.run(
            [*CLI, "run", "td3-walker2d-repro-v1", "--agent", agent_cmd("docker", script),
             "--sandbox", "docker", "--agent-image", tag, "--run-dir", str(run_dir),
             "--state-dir", str(short_tmp / "state"), "--budget", "60"],
            capture_output=True, text=True, timeout=300, cwd=short_tmp,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = _probe(run_dir / "agent.log")
        assert "mujoco is hidden from agents" in str(out["mujoco"])
        assert out["gymnasium_robotics"] != "imported"
        assert out["gymnasium"] == "imported"  # what is not hidden still works
        assert out["mujoco_dir"] == ["__init__.py"]  # solutions.py is not even listed
        assert out["planted"] is False
    finally:
        subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True)
