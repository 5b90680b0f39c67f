"""``ale-robotics run`` as an operator drives it: real CLI processes, real signals.

Interruption (SIGINT to the whole process group, as a terminal's Ctrl-C sends it,
and SIGTERM) during the agent phase and during the evaluation; refusals of options
that cannot work (before anything is created); the run directory printed at start
and plain progress lines through a pipe; a crashing agent's exit code and log
tail; a mistyped agent command and a file the sandbox cannot show.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import child_pids

from ale_robotics.evaluator.store.sqlite import SqliteJobStore
from ale_robotics.harness.report import StoppedRunReport, load_run_report
from ale_robotics.sandboxes.bwrap.command import sandbox_available
from ale_robotics.trajectory import verify_file

CLI = [sys.executable, "-m", "ale_robotics"]
TASK = "td3-inverted-pendulum-v2"
needs_bwrap = pytest.mark.skipif(not sandbox_available(), reason="bubblewrap cannot start here")

SLEEPER = (
    f"{sys.executable} -c \"import os, time; open('pid', 'w').write(str(os.getpid())); "
    'time.sleep(120)"'
)
"""Writes its pid into its scratch dir (its cwd), then sleeps past any test."""

SUBMIT_RANDOM = """
import numpy as np
from safetensors.numpy import save_file
from ale_robotics.client import AleClient
c = AleClient.from_env()
rng = np.random.default_rng(0)
w = {r.key: (rng.standard_normal(r.shape) * 0.1).astype(r.dtype)
     for r in c.get_spec().contract.tensors}
save_file(w, str(c.submission_dir / "policy.safetensors"))
print("submitted", c.submit())
"""
"""Submits random weights and exits: the run then waits for the evaluation (about 3 s
of HalfCheetah episodes on one worker here)."""
ROOT = Path(__file__).resolve().parents[2]


class Run:
    """A real ``ale-robotics run`` in its own process group, stderr read as it comes."""

    def __init__(self, tmp: Path, *args: str, task: str = TASK) -> None:
        self.proc = subprocess.Popen(
            [*CLI, "run", task, *args],
            cwd=ROOT,
            env={**os.environ, "COLUMNS": "80"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own group: killpg plays the terminal's Ctrl-C
        )
        self.lines: list[str] = []
        self.times: list[float] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.t0 = time.monotonic()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            self.times.append(time.monotonic())

    def wait_for(self, needle: str, timeout: float = 60) -> float:
        """Seconds since start when a stderr line containing ``needle`` appeared."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line, t in zip(self.lines, self.times, strict=False):
                if needle in line:
                    return t - self.t0
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.05)
        raise AssertionError(f"no {needle!r} on stderr:\n" + "\n".join(self.lines))

    def finish(self, timeout: float = 120) -> tuple[int, str, str]:
        # not communicate(): it would read stderr too, racing the reader thread
        assert self.proc.stdout is not None
        out = self.proc.stdout.read()
        self.proc.wait(timeout=timeout)
        self._reader.join(timeout=5)
        return self.proc.returncode, out, "\n".join(self.lines)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


def _dies(pid: int, timeout_s: float = 30.0) -> bool:
    """Whether ``pid`` is gone within ``timeout_s`` (killed processes take their time to
    go on a busy host: waited for, not given a fixed fraction of a second)."""
    deadline = time.monotonic() + timeout_s
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "state"


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"]
)
def test_interrupt_during_the_agent_phase(
    tmp_path: Path, state: Path, sig: signal.Signals, code: int
) -> None:
    run_dir = tmp_path / "run"
    r = Run(tmp_path, "--agent", SLEEPER, "--sandbox", "none", "--state-dir", str(state),
            "--run-dir", str(run_dir))  # fmt: skip
    r.wait_for("agent running")
    pid_file = run_dir / "scratch" / "pid"
    deadline = time.monotonic() + 30
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    agent_pid = int(pid_file.read_text())
    os.killpg(r.proc.pid, sig)
    rc, out, err = r.finish(timeout=60)
    assert rc == code, err
    assert "Traceback" not in err and "Traceback" not in out
    assert "interrupted:" in err and sig.name in err
    assert "score:" not in out  # nothing was scored
    assert _dies(agent_pid), "the agent outlived the interrupted run"
    report = load_run_report(run_dir / "result.json")
    assert isinstance(report, StoppedRunReport)
    assert (report.state, report.signal, report.phase) == ("interrupted", sig.name, "agent")
    events = [json.loads(x) for x in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    assert events[-1]["kind"] == "run_interrupted"
    assert events[-1]["payload"]["signal"] == sig.name
    v = verify_file(run_dir / "trajectory.jsonl", None, expected_head=report.trajectory_head)
    assert v.ok, v.summary()
    assert report.trajectory_events == len(events)


def test_sigint_during_the_evaluation_cancels_the_job(tmp_path: Path, state: Path) -> None:
    """Ctrl-C while the hidden-seed episodes run: workers stop quietly, the job is
    CANCELLED (no later run finishes it), result.json says where it stopped."""
    run_dir = tmp_path / "run"
    agent = tmp_path / "agent.py"
    agent.write_text(SUBMIT_RANDOM)
    r = Run(tmp_path, "--agent", f"{sys.executable} {agent}", "--sandbox", "none",
            "--workers", "1", "--state-dir", str(state), "--run-dir", str(run_dir),
            task="td3-halfcheetah-vec-v1")  # fmt: skip
    r.wait_for("evaluating on hidden seeds", timeout=90)
    workers = child_pids(r.proc.pid)
    os.killpg(r.proc.pid, signal.SIGINT)
    rc, _, err = r.finish(timeout=60)
    assert rc == 130, err
    assert "Traceback" not in err, err
    assert "KeyboardInterrupt" not in err, err
    report = load_run_report(run_dir / "result.json")
    assert isinstance(report, StoppedRunReport)
    assert report.phase == "evaluating"
    assert len(report.cancelled_jobs) == 1
    with sqlite3.connect(state / "jobs.sqlite3") as db:
        (job_state,) = db.execute(
            "SELECT state FROM jobs WHERE job_id = ?", (report.cancelled_jobs[0],)
        ).fetchone()
    assert job_state == "CANCELLED"
    assert all(_dies(p) for p in workers), "rollout workers outlived the run"


def test_run_dir_existing_empty_is_used_non_empty_is_refused(tmp_path: Path, state: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    r = Run(tmp_path, "--agent", f"{sys.executable} -c pass", "--sandbox", "none",
            "--state-dir", str(state), "--run-dir", str(empty))  # fmt: skip
    rc, out, err = r.finish()
    assert rc == 0, err
    assert out.strip().splitlines()[-1].startswith("score:")
    assert (empty / "result.json").is_file()

    r = Run(tmp_path, "--agent", f"{sys.executable} -c pass", "--sandbox", "none",
            "--state-dir", str(state), "--run-dir", str(empty))  # fmt: skip
    rc, out, err = r.finish()
    assert rc == 2
    assert "Traceback" not in err
    assert f"--run-dir {empty} is not empty" in err
    assert len([ln for ln in err.splitlines() if ln.startswith("error:")]) == 1, err
    assert len(err.strip().splitlines()) <= 2, err  # the no-sandbox warning, the error
    assert json.loads((empty / "result.json").read_text())["state"] == "completed"  # untouched


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--budget", "-5"], "--budget -5: the agent's wall-clock budget must be a positive"),
        (["--episodes", "100"], "--episodes 100: td3-inverted-pendulum-v2 evaluates 10 episode"),
        (["--state-dir", "{file}"], "is a file; the evaluator's state dir must be a directory"),
        (
            ["--state-dir", "{damaged}"],
            "its job store jobs.sqlite3 is damaged (database disk image is malformed): restore "
            "it from a backup, or move it aside",
        ),
        (["--agent", "nosuchcmd --flag"], "command not found: 'nosuchcmd'"),
        (
            ["--agent", "python nosuchfile.py"],
            f"the script nosuchfile.py does not exist (tried {ROOT / 'nosuchfile.py'}; "
            "relative paths in --agent start at the workspace",
        ),
        (
            ["--agent", "python -u examples/agents/submit_chekpoint.py"],
            "; did you mean examples/agents/submit_checkpoint.py?",
        ),
    ],
    ids=[
        "budget",
        "episodes",
        "state-dir-file",
        "damaged-store",
        "command-not-found",
        "no-script",
        "typo",
    ],
)
def test_options_that_cannot_work_are_refused_before_anything_starts(
    tmp_path: Path, args: list[str], message: str
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    damaged = tmp_path / "damaged"  # a state dir whose job store's pages past the first are junk
    damaged.mkdir()
    SqliteJobStore(damaged / "jobs.sqlite3").close()
    with open(damaged / "jobs.sqlite3", "r+b") as fh:
        fh.seek(4096)
        fh.write(b"\xff" * 8192)
    args = [x.replace("{file}", str(a_file)).replace("{damaged}", str(damaged)) for x in args]
    base = ["--agent", f"{sys.executable} -c pass", "--sandbox", "none"]
    if "--state-dir" not in args:
        base += ["--state-dir", str(tmp_path / "state")]
    if "--agent" in args:
        base = base[2:]
    runs_root = tmp_path / "cwd"
    runs_root.mkdir()
    proc = subprocess.run(
        [*CLI, "run", TASK, *base, *args, "--workspace", str(ROOT)],
        cwd=runs_root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert message in proc.stderr.replace("\n", " "), proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    assert not (runs_root / "runs").exists(), "a refused run must create no run directory"


def test_run_dir_printed_at_start_and_plain_progress_through_a_pipe(
    tmp_path: Path, state: Path
) -> None:
    """Through a pipe (not a terminal) the operator still sees where the run is: the run
    directory while the agent runs, and a progress line every few seconds."""
    agent = f'{sys.executable} -c "import time; time.sleep(12)"'
    run_dir = tmp_path / "run"
    r = Run(tmp_path, "--agent", agent, "--sandbox", "none", "--state-dir", str(state),
            "--run-dir", str(run_dir))  # fmt: skip
    r.wait_for(f"run dir {run_dir}")
    assert f"tail -f {run_dir / 'agent.log'}" in "\n".join(r.lines)
    rc, _, err = r.finish()
    # printed when the run starts: before the agent's first progress line, not at its end
    first_dir = next(i for i, ln in enumerate(r.lines) if f"run dir {run_dir}" in ln)
    first_progress = next(i for i, ln in enumerate(r.lines) if "agent running (" in ln)
    assert first_dir < first_progress, "the run directory must be printed when the run starts"
    assert rc == 0, err
    progress = [t - r.t0 for ln, t in zip(r.lines, r.times, strict=True) if "agent running (" in ln]
    assert len(progress) >= 3, err  # 12 s of agent: a line at 0, ~5 and ~10 s
    assert progress[-1] - progress[0] >= 8, "progress lines must come during the run"


def test_crashing_agent_says_its_exit_code_and_shows_its_log(tmp_path: Path, state: Path) -> None:
    agent = f"{sys.executable} -c \"import sys; print('loading policy from ckpt/'); sys.exit(3)\""
    run_dir = tmp_path / "run"
    r = Run(tmp_path, "--agent", agent, "--sandbox", "none", "--state-dir", str(state),
            "--run-dir", str(run_dir))  # fmt: skip
    rc, out, err = r.finish()
    assert rc == 0, err
    score = out.strip().splitlines()[-1]
    assert score.startswith("score: 0.000")
    assert "exited with code 3" in score
    assert str(run_dir / "agent.log") in score
    assert "the agent exited with code 3" in err
    assert "| loading policy from ckpt/" in err  # the log's last lines, shown


def test_strict_exits_1_when_the_agent_fails_with_its_log_under_the_score_line(
    tmp_path: Path, state: Path
) -> None:
    """--strict: the crashed agent's run is scored all the same (result.json, score 0),
    but the command exits 1; the log's last lines come after the score line."""
    agent = f"{sys.executable} -c \"import sys; print('loading policy from ckpt/'); sys.exit(3)\""
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [*CLI, "run", TASK, "--agent", agent, "--sandbox", "none", "--state-dir", str(state),
         "--run-dir", str(run_dir), "--strict"],
        cwd=ROOT, env={**os.environ, "COLUMNS": "200"}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout
    lines = proc.stdout.splitlines()
    score = next(i for i, ln in enumerate(lines) if ln.startswith("score: 0.000"))
    tail = next(i for i, ln in enumerate(lines) if "| loading policy from ckpt/" in ln)
    assert score < tail, proc.stdout  # under the score line
    assert "--strict: the agent exited with code 3 without submitting: exit 1" in proc.stdout
    assert "Traceback" not in proc.stdout
    report = load_run_report(run_dir / "result.json")
    assert report.state == "completed" and report.agent_exit_code == 3  # scored all the same


@needs_bwrap
def test_file_outside_the_workspace_is_explained_not_an_infrastructure_failure(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "elsewhere" / "agent.py"
    outside.parent.mkdir()
    outside.write_text("print('hi')\n")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    proc = subprocess.run(
        [*CLI, "run", TASK, "--agent", f"python {outside}", "--sandbox", "bwrap",
         "--workspace", str(workspace), "--state-dir", str(tmp_path / "state")],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.replace("\n", " ")
    assert "Traceback" not in err
    assert f"{outside}" in err and "not inside the agent's sandbox" in err
    assert f"only its workspace {workspace}" in err
    assert "--sandbox none" not in err  # never "turn the sandbox off"
