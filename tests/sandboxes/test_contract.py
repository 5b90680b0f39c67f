"""The sandbox contract: one suite, run against every sandbox installed (and available here).

Every :class:`~ale_robotics.sandboxes.Sandbox` the registry knows is driven the way the
harness drives it (:func:`ale_robotics.harness.agent.proc.run_agent`): ``prepare`` a
launch, start the command it wraps with its environment, ``attach``, wait, ``kill_all``,
``close``, the exit code through it, ``check_started``. A probe agent (``python -c``,
so that it runs the same on the host and in an image) reports what it sees; what it
must see follows from what the sandbox says of itself (``isolates``), never from its
name. ``bwrap`` is skipped where bubblewrap cannot start, ``docker`` without a daemon and
the images (``make docker-deps images``; failed under ``ALE_REQUIRE_DOCKER=1``).
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from docker_support import AGENT_IMAGE, need_docker

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.harness.agent.io import limited_argv
from ale_robotics.harness.options import RunOptions
from ale_robotics.harness.preflight import check_agent_command
from ale_robotics.sandboxes import (
    AgentLaunch,
    Confinement,
    Sandbox,
    resolve_sandbox,
    sandbox_class,
    sandbox_names,
)
from ale_robotics.sandboxes.cgroups import Limits
from ale_robotics.sandboxes.live import live_sandboxes
from ale_robotics.tasks.packet import build_task_packet, remove_task_packet
from ale_robotics.tasks.registry import default_registry

_NEEDS: dict[str, Callable[[], None]] = {"docker": need_docker}
"""What a sandbox's tests need beyond :meth:`Sandbox.unavailable` (docker: the images)."""


@pytest.fixture(params=sandbox_names())
def sandbox(request: pytest.FixtureRequest) -> Sandbox:
    """Each installed sandbox, made as a run makes it; skipped where it cannot start."""
    name: str = request.param
    _NEEDS.get(name, lambda: None)()
    reason = sandbox_class(name).unavailable()
    if reason is not None:
        pytest.skip(f"the {name!r} sandbox cannot start here: {reason}")
    return resolve_sandbox(name, agent_image=AGENT_IMAGE)


PROBE = r"""
import json, os, socket, sys
env = {k: os.environ.get(k) for k in
       ("ALE_ENDPOINT", "ALE_TOKEN", "ALE_RUN_ID", "ALE_TASK_ID", "ALE_SUBMISSION_DIR")}
with open(os.path.join(os.environ["ALE_SUBMISSION_DIR"], "from-agent.txt"), "w") as fh:
    fh.write("written inside")
out = {"env": env, "private": os.path.exists(sys.argv[1])}
s = socket.socket()
s.settimeout(3)
try:
    s.connect(("127.0.0.1", int(sys.argv[2])))
    out["network"] = True
except OSError:
    out["network"] = False
try:
    import xml
    out["imports_hidden"] = True
except ImportError:
    out["imports_hidden"] = False
print("PROBE " + json.dumps(out), flush=True)
sys.exit(3)
"""

COUNTER = r"""
import os, time
scratch = os.environ["ALE_SCRATCH_DIR"]
n = 0
while not os.path.exists(os.path.join(scratch, "stop")):
    n += 1
    with open(os.path.join(scratch, ".count"), "w") as fh:
        fh.write(str(n))
    os.replace(os.path.join(scratch, ".count"), os.path.join(scratch, "count"))
    time.sleep(0.02)
"""


@dataclass
class Dirs:
    root: Path
    workspace: Path
    scratch: Path
    submission: Path
    private: Path
    socket: Path


@pytest.fixture
def dirs(short_tmp: Path) -> Iterator[Dirs]:
    """A run's directories, a private one inside the workspace, and a real agent socket
    in a directory of its own (what bubblewrap and a container bind)."""
    d = Dirs(
        root=short_tmp,
        workspace=short_tmp / "ws",
        scratch=short_tmp / "run" / "scratch",
        submission=short_tmp / "run" / "submission",
        private=short_tmp / "ws" / "runs",
        socket=short_tmp / "sock" / "agent.sock",
    )
    for p in (d.workspace, d.scratch, d.submission, d.private, d.socket.parent):
        p.mkdir(parents=True)
    (d.private / "secret").write_text("no agent reads this")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(d.socket))
    listener.listen(1)
    try:
        yield d
    finally:
        listener.close()


def _launch(d: Dirs, cmd: str, **extra: object) -> AgentLaunch:
    fields: dict[str, object] = {
        "run_id": f"run-contract-{uuid.uuid4().hex[:6]}",
        "task_id": "td3-inverted-pendulum-v2",
        "agent_cmd": cmd,
        "endpoint": f"unix://{d.socket}",
        "token": "agent-token-of-the-run",
        "workspace": d.workspace,
        "scratch": d.scratch,
        "submission": d.submission,
        "limits": Limits(pids_max=512),
        "disk_quota_bytes": 64 * 1024**2,
        "private_dirs": (d.private,),
        **extra,
    }
    return AgentLaunch(**fields)  # type: ignore[arg-type]


def _start(box: Confinement, d: Dirs, log: Path) -> subprocess.Popen[bytes]:
    """Started as the harness starts it (the launcher enters the cgroup before exec)."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            limited_argv(box.argv, 64 * 1024**2, box.procs_files),
            cwd=d.scratch,
            env=box.env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=box.pass_fds,
        )
    box.attach(proc)
    return proc


def _probe(log: Path) -> dict[str, object]:
    lines = [ln for ln in log.read_text().splitlines() if ln.startswith("PROBE ")]
    assert lines, log.read_text()
    result: dict[str, object] = json.loads(lines[-1].removeprefix("PROBE "))
    return result


def test_the_agent_runs_inside_and_what_it_sees_follows_from_isolates(
    sandbox: Sandbox, dirs: Dirs
) -> None:
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(4)
    port = tcp.getsockname()[1]
    cmd = shlex.join(["python", "-c", PROBE, str(dirs.private / "secret"), str(port)])
    launch = _launch(dirs, cmd, hidden_modules=("xml",))
    log = dirs.root / "agent.log"
    try:
        with sandbox.prepare(launch) as box:
            registered = [s for s in live_sandboxes() if s.run_id == launch.run_id]
            # A sandbox that shows less than the host is registered while it runs (no run
            # dir is made where it could see it); one that shows everything is not.
            assert bool(registered) == sandbox.isolates
            assert box.cgroup in ("v1", "v2", "docker", "none")
            assert isinstance(box.describe(), dict)
            proc = _start(box, dirs, log)
            proc.wait(timeout=120)
            box.kill_all()
            usage = box.close()
            assert box.close() is usage  # closing twice is harmless
            assert box.exit_code(proc.returncode) == 3, log.read_text()
            box.check_started(killed=False, log_path=log, oom=None)  # it did start
    finally:
        tcp.close()
    assert not [s for s in live_sandboxes() if s.run_id == launch.run_id]
    seen = _probe(log)
    env = seen["env"]
    assert isinstance(env, dict)
    assert env["ALE_TOKEN"] == launch.token and env["ALE_RUN_ID"] == launch.run_id
    assert env["ALE_TASK_ID"] == launch.task_id
    assert env["ALE_ENDPOINT"] is not None and env["ALE_ENDPOINT"].startswith("unix://")
    assert (dirs.submission / "from-agent.txt").read_text() == "written inside"
    assert seen["private"] is not sandbox.isolates, seen  # a harness directory
    assert seen["network"] is not sandbox.isolates, seen
    assert seen["imports_hidden"] is not sandbox.isolates, seen


def _count(scratch: Path) -> int:
    try:
        return int((scratch / "count").read_text() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def _wait_for(predicate: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_freeze_stops_the_agent_and_thaw_lets_it_go_on(sandbox: Sandbox, dirs: Dirs) -> None:
    launch = _launch(dirs, shlex.join(["python", "-c", COUNTER]))
    log = dirs.root / "agent.log"
    with sandbox.prepare(launch) as box:
        proc = _start(box, dirs, log)
        try:
            _wait_for(lambda: _count(dirs.scratch) > 0)
            how = box.freeze()
            assert isinstance(how, str) and how
            time.sleep(0.3)  # what was under way when it froze lands
            frozen = _count(dirs.scratch)
            time.sleep(0.6)
            assert _count(dirs.scratch) == frozen, f"it went on while frozen ({how})"
            cpu = box.cpu_s()
            assert cpu is None or cpu >= 0
            box.thaw()
            _wait_for(lambda: _count(dirs.scratch) > frozen)
            (dirs.scratch / "stop").write_text("")
            proc.wait(timeout=60)
        finally:
            box.thaw()
            box.kill_all()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        box.close()
        assert box.exit_code(proc.returncode) == 0, log.read_text()


def test_a_host_script_the_sandbox_does_not_show_is_refused_before_the_run(
    sandbox: Sandbox, dirs: Dirs
) -> None:
    """A script outside the workspace: a sandbox that isolates the agent does not show
    it (bubblewrap) or mounts no host file at all (a container), so the run would fail
    inside; one that does not isolate runs it."""
    outside = dirs.root / "elsewhere" / "agent.py"
    outside.parent.mkdir()
    outside.write_text("print('hi')\n")
    opts = RunOptions(task_id="td3-inverted-pendulum-v2", agent_cmd=f"python {outside}")
    if sandbox.isolates:
        with pytest.raises(InvalidArgumentError, match="exists on this host but not"):
            check_agent_command(opts, dirs.workspace, sandbox)
    else:
        check_agent_command(opts, dirs.workspace, sandbox)


def test_every_installed_sandbox_is_reached_by_its_name() -> None:
    assert {"bwrap", "docker", "none"} <= set(sandbox_names())
    for name in sandbox_names():
        cls = sandbox_class(name)
        assert issubclass(cls, Sandbox) and cls.name == name
        made = resolve_sandbox(name, check=False, agent_image="some/image")
        assert isinstance(made, cls)


TASK_PROBE = r"""
import json, os
d = os.environ["ALE_TASK_DIR"]
brief = open(os.path.join(d, "brief.md"), encoding="utf-8").read()
try:
    with open(os.path.join(d, "brief.md"), "a") as fh:
        fh.write("changed by the agent")
    writable = True
except OSError:
    writable = False
try:
    open(os.path.join(d, "new.txt"), "w").close()
    creatable = True
except OSError:
    creatable = False
print("PROBE " + json.dumps({
    "task_dir": d, "brief_head": brief[:200], "writable": writable, "creatable": creatable,
    "papers": sorted(os.listdir(os.path.join(d, "paper"))),
    "task_json": json.load(open(os.path.join(d, "task.json")))["id"],
}), flush=True)
"""


def test_every_sandbox_shows_the_packet_at_ale_task_dir(sandbox: Sandbox, dirs: Dirs) -> None:
    spec = default_registry().entry("td3-inverted-pendulum-v2").spec
    packet = build_task_packet(spec, dirs.root / "state", dirs.root / "run" / "task")
    log = dirs.root / "agent.log"
    launch = _launch(dirs, shlex.join(["python", "-c", TASK_PROBE]), task_dir=packet)
    try:
        with sandbox.prepare(launch) as box:
            proc = _start(box, dirs, log)
            proc.wait(timeout=120)
            box.kill_all()
            box.close()
        seen = _probe(log)
    finally:
        brief = (packet / "brief.md").read_text()
        remove_task_packet(packet)
    assert seen["task_json"] == launch.task_id and seen["papers"] == ["index.json"], seen
    assert os.path.isabs(str(seen["task_dir"]))
    if sandbox.isolates:  # bound read-only (root or not)
        assert seen["writable"] is False and seen["creatable"] is False, seen
        assert "changed by the agent" not in brief
