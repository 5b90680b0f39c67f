"""The bubblewrap agent sandbox: offline, blind to the host, but able to reach the evaluator.

One sandboxed Python process runs a probe script and reports what it could and
could not do; the test checks it against the host. Skipped (with the reason)
where bubblewrap is missing or cannot start a sandbox.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hardening_helpers import RUN, TASK_ID, children_of

from ale_robotics.evaluator import EvaluatorConfig, RunningEvaluator, serve
from ale_robotics.sandboxes.bwrap.command import (
    SandboxError,
    bwrap_command,
    read_sandbox_status,
    require_sandbox,
    sandbox_available,
)
from ale_robotics.tasks import Registry

needs_bwrap = pytest.mark.skipif(
    not sandbox_available(),
    reason="bubblewrap is not installed or cannot create namespaces here "
    "(apt-get install bubblewrap; unprivileged user namespaces must be enabled)",
)

PROBE = r"""
import json, os, socket, sys
out = {"uid": os.getuid(), "gid": os.getgid(), "cwd": os.getcwd()}
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3).close()
    out["host_tcp"] = "connected"
except OSError as exc:
    out["host_tcp"] = f"refused: {exc}"
def visible(p):
    try:
        open(p, "rb").read(1)
        return True
    except OSError:
        return os.path.exists(p)
NAMES = ("state_secret", "harness_sock", "run_log", "outside", "shadow")
for i, name in enumerate(NAMES):
    out[name] = visible(sys.argv[2 + i])
def write(p):
    try:
        with open(p, "w") as fh:
            fh.write("from the sandbox")
        return True
    except OSError:
        return False
out["wrote_submission"] = write(os.path.join(os.environ["ALE_SUBMISSION_DIR"], "note.txt"))
out["wrote_workspace"] = write(sys.argv[7])
out["wrote_cwd"] = write("cwd-note.txt")
out["wrote_tmp"] = write("/tmp/x")
out["wrote_venv"] = write(os.path.join(sys.prefix, "planted.py"))
out["home"] = os.environ.get("HOME")
st = os.statvfs("/tmp")
out["tmp_bytes"] = st.f_blocks * st.f_frsize
import ctypes, ctypes.util
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
out["nested_userns"] = libc.unshare(0x10000000) == 0
from ale_robotics.client import AleClient
out["spec_task"] = AleClient.from_env().get_spec().task.id
print("PROBE " + json.dumps(out))
"""


@pytest.fixture
def setup(short_tmp: Path, registry: Registry) -> Iterator[tuple[RunningEvaluator, Path]]:
    """An evaluator whose agent socket sits alone in its directory; a workspace with a run dir."""
    ws = short_tmp / "ws"
    submission = ws / "runs" / RUN / "submission"
    submission.mkdir(parents=True)
    (ws / "runs" / RUN / "scratch").mkdir()
    (ws / "runs" / RUN / "agent.log").write_text("harness-only")
    ev = serve(
        EvaluatorConfig(short_tmp / "state", submission, task_id=TASK_ID, run_id=RUN, workers=1),
        agent_listen=f"unix://{short_tmp}/agent/a.sock",
        harness_listen=f"unix://{short_tmp}/h.sock",
        registry=registry,
    )
    try:
        yield ev, short_tmp
    finally:
        ev.stop(grace=0.5)


def _env(ev: RunningEvaluator, submission: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "ALE_ENDPOINT": ev.agent_address,
        "ALE_TOKEN": ev.agent_token,
        "ALE_TASK_ID": TASK_ID,
        "ALE_RUN_ID": RUN,
        "ALE_SUBMISSION_DIR": str(submission),
    }


@needs_bwrap
def test_sandbox_is_offline_and_blind_but_reaches_the_evaluator(
    setup: tuple[RunningEvaluator, Path],
) -> None:
    ev, tmp = setup
    ws = tmp / "ws"
    submission = ws / "runs" / RUN / "submission"
    outside = tmp / "outside.txt"
    outside.write_text("host file")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    probe = ws / "probe.py"
    probe.write_text(PROBE)
    argv = [
        sys.executable,
        str(probe),
        str(port),
        str(tmp / "state" / "secret"),
        str(tmp / "h.sock"),
        str(ws / "runs" / RUN / "agent.log"),
        str(outside),
        "/etc/shadow",
        str(ws / "workspace-note.txt"),
    ]
    r, w = os.pipe()
    cmd = bwrap_command(
        argv,
        workspace=ws,
        scratch_dir=ws / "runs" / RUN / "scratch",
        submission_dir=submission,
        agent_socket=tmp / "agent" / "a.sock",
        hide=[ws / "runs"],
        status_fd=w,
        tmp_size_bytes=64 * 1024**2,
    )
    try:
        proc = subprocess.run(
            cmd, env=_env(ev, submission), pass_fds=(w,), capture_output=True, timeout=120
        )
    finally:
        os.close(w)
        listener.close()
    status = read_sandbox_status(r)
    assert status.agent_ran and status.exit_code == 0, proc.stderr.decode()
    line = next(x for x in proc.stdout.decode().splitlines() if x.startswith("PROBE "))
    out = json.loads(line[len("PROBE ") :])
    assert (out["uid"], out["gid"]) == (65534, 65534)
    assert out["cwd"] == str(ws / "runs" / RUN / "scratch")  # the run's scratch dir
    assert out["host_tcp"].startswith("refused"), out["host_tcp"]
    assert out["state_secret"] is False  # the evaluator's state dir does not exist inside
    assert out["harness_sock"] is False
    assert out["run_log"] is False  # hidden under a tmpfs, while the submission dir inside shows
    assert out["outside"] is False
    assert out["shadow"] is False
    assert out["wrote_submission"] and (submission / "note.txt").read_text() == "from the sandbox"
    # The workspace is read-only (an agent that could write it could plant a git hook
    # or a Makefile the operator runs next); the scratch dir is its working directory.
    assert out["wrote_workspace"] is False and not (ws / "workspace-note.txt").exists()
    assert out["wrote_cwd"] and (ws / "runs" / RUN / "scratch" / "cwd-note.txt").exists()
    assert out["wrote_tmp"] and not Path("/tmp/x").exists()
    assert out["wrote_venv"] is False and not (Path(sys.prefix) / "planted.py").exists()
    assert out["home"] == "/tmp"
    if "--size" in cmd:
        assert out["tmp_bytes"] <= 64 * 1024**2
    if "--disable-userns" in cmd:
        assert out["nested_userns"] is False
    assert out["spec_task"] == TASK_ID
    assert (ws / "runs" / RUN / "agent.log").read_text() == "harness-only"


@needs_bwrap
def test_killing_the_sandbox_kills_the_agent(setup: tuple[RunningEvaluator, Path]) -> None:
    """The harness kills bwrap (SIGTERM to its group); nothing inside survives it."""
    ev, tmp = setup
    ws = tmp / "ws"
    submission = ws / "runs" / RUN / "submission"
    r, w = os.pipe()
    cmd = bwrap_command(
        [sys.executable, "-c", "import time; time.sleep(120)"],
        workspace=ws,
        scratch_dir=ws / "runs" / RUN / "scratch",
        submission_dir=submission,
        agent_socket=tmp / "agent" / "a.sock",
        status_fd=w,
    )
    proc = subprocess.Popen(cmd, env=_env(ev, submission), pass_fds=(w,), start_new_session=True)
    os.close(w)
    first = b""
    while b"\n" not in first:
        chunk = os.read(r, 4096)
        assert chunk, "bwrap exited before starting the sandbox"
        first += chunk
    child = json.loads(first.split(b"\n")[0])["child-pid"]  # bwrap's init in the sandbox
    deadline = time.monotonic() + 30
    while not (inside := children_of(child)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert inside, "the agent never started"
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=10)
    os.close(r)
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in [child, *inside]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in [child, *inside])


def _alive(pid: int) -> bool:
    """Running, i.e. present in /proc and not a zombie (the container's init may not reap)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@needs_bwrap
def test_sandbox_that_cannot_start_is_detected(setup: tuple[RunningEvaluator, Path]) -> None:
    ev, tmp = setup
    ws = tmp / "ws"
    submission = ws / "runs" / RUN / "submission"
    gone = tmp / "gone"
    gone.mkdir()
    r, w = os.pipe()
    cmd = bwrap_command(
        [sys.executable, "-c", "pass"],
        workspace=ws,
        scratch_dir=ws / "runs" / RUN / "scratch",
        submission_dir=submission,
        agent_socket=tmp / "agent" / "a.sock",
        extra_ro=[gone],
        status_fd=w,
    )
    gone.rmdir()  # the bind source vanishes before launch: bwrap fails to set up
    proc = subprocess.run(cmd, env=_env(ev, submission), pass_fds=(w,), capture_output=True)
    os.close(w)
    status = read_sandbox_status(r)
    assert proc.returncode != 0
    assert not status.agent_ran
    assert b"bwrap: " in proc.stderr


@needs_bwrap
@pytest.mark.parametrize(
    ("argv", "ran", "code"),
    [
        (["/bin/sh", "-c", "exit 3"], True, 3),
        (["/bin/sh", "-c", "kill -9 $$"], True, 137),
        (["/no/such/agent"], False, None),
    ],
    ids=["exit-3", "killed", "not-executable"],
)
def test_agent_exit_is_told_apart_from_sandbox_failure(
    setup: tuple[RunningEvaluator, Path], argv: list[str], ran: bool, code: int | None
) -> None:
    ev, tmp = setup
    ws = tmp / "ws"
    submission = ws / "runs" / RUN / "submission"
    r, w = os.pipe()
    cmd = bwrap_command(
        argv,
        workspace=ws,
        scratch_dir=ws / "runs" / RUN / "scratch",
        submission_dir=submission,
        agent_socket=tmp / "agent" / "a.sock",
        status_fd=w,
    )
    subprocess.run(cmd, env=_env(ev, submission), pass_fds=(w,), capture_output=True)
    os.close(w)
    status = read_sandbox_status(r)
    assert (status.agent_ran, status.exit_code) == (ran, code)


def test_missing_bwrap_is_a_sandbox_error(tmp_path: Path) -> None:
    """An infrastructure error (a HarnessError-like failure), never an agent failure."""
    with pytest.raises(SandboxError, match="not installed"):
        bwrap_command(
            ["x"],
            workspace=tmp_path,
            scratch_dir=tmp_path,
            submission_dir=tmp_path,
            agent_socket=tmp_path / "a.sock",
            bwrap="/no/bwrap",
        )
    with pytest.raises(SandboxError, match="not installed"):
        require_sandbox("/no/bwrap")
    assert not sandbox_available("/no/bwrap")


@needs_bwrap
def test_unusable_configurations_are_sandbox_errors(
    setup: tuple[RunningEvaluator, Path], tmp_path: Path
) -> None:
    """Refused before launch, as infrastructure errors (never an agent failure)."""
    _, tmp = setup
    ws = tmp / "ws"
    sub = ws / "runs" / RUN / "submission"
    sock = tmp / "agent" / "a.sock"
    scr = ws / "runs" / RUN / "scratch"
    with pytest.raises(SandboxError, match="directory of its own"):
        # the harness socket shares a directory with the state dir here
        bwrap_command(
            ["x"], workspace=ws, scratch_dir=scr, submission_dir=sub, agent_socket=tmp / "h.sock"
        )
    with pytest.raises(SandboxError, match="not a Unix socket"):
        (tmp_path / "f").write_text("")
        bwrap_command(
            ["x"], workspace=ws, scratch_dir=scr, submission_dir=sub, agent_socket=tmp_path / "f"
        )
    with pytest.raises(SandboxError, match="cannot be '/'"):
        bwrap_command(
            ["x"], workspace=Path("/"), scratch_dir=scr, submission_dir=sub, agent_socket=sock
        )
    with pytest.raises(SandboxError, match="absolute"):
        bwrap_command(
            ["x"], workspace=Path("ws"), scratch_dir=scr, submission_dir=sub, agent_socket=sock
        )
    with pytest.raises(SandboxError, match="does not exist"):
        bwrap_command(
            ["x"],
            workspace=ws,
            scratch_dir=scr,
            submission_dir=sub,
            agent_socket=sock,
            extra_ro=[tmp / "nope"],
        )
