"""``ale-robotics evaluator`` as real processes: quiet stops, lease takeover, state dirs.

* A terminal's Ctrl-C reaches the whole foreground process group, rollout
  workers included; SIGTERM comes from a service manager. The first drains
  (``test_evaluator_drain.py``); a second must stop ``evaluator serve`` at once and
  quietly: one "evaluator stopped" line, exit 0, no traceback from the process or its
  workers, and the running job left RUNNING for its lease to run out (not failed, not
  requeued).
* An evaluator SIGKILLed mid-job: a shared evaluator started on the same state
  dir leaves the job alone while the dead process's lease still runs, then
  requeues and finishes it once (attempt 2).
* ``--state-dir`` defaults to the dir ``ale-robotics run`` uses;
  ``public-key --json`` prints one JSON document; a state dir that cannot be one
  is one clear error line (exit 2).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import child_pids

from ale_robotics.client import AleClient
from ale_robotics.errors import AleError
from ale_robotics.model.result import EvalResult
from ale_robotics.paths import state_home
from ale_robotics.v1 import ale_env_pb2 as pb

CLI = [sys.executable, "-m", "ale_robotics"]
TASK_ID = "td3-inverted-pendulum-v1"
RUN = "run-serve-1"
CHECKPOINT = (
    Path(__file__).resolve().parents[2]
    / "examples"
    / "agents"
    / "checkpoints"
    / TASK_ID
    / "policy.safetensors"
)
"""Balances every episode to the full 1000 steps: a job takes a moment to run."""


class Served:
    """``evaluator serve`` in a session of its own, all output in one log file."""

    def __init__(self, tmp: Path, *extra: str, log: str = "serve.log") -> None:
        self.tmp = tmp
        self.state = tmp / "state"
        self.log = tmp / log
        self.run_id = extra[extra.index("--run-id") + 1] if "--run-id" in extra else None
        self.agent_address = f"unix://{tmp}/a.sock"
        self.harness_address = f"unix://{tmp}/h.sock"
        cmd = [
            *CLI,
            "evaluator",
            "serve",
            "--state-dir",
            str(self.state),
            "--submission-dir",
            str(tmp / "vol"),
            "--agent-listen",
            self.agent_address,
            "--harness-listen",
            self.harness_address,
            "--task",
            TASK_ID,
            "--workers",
            "1",
            *extra,
        ]
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
        with open(self.log, "ab") as fh:
            self.proc = subprocess.Popen(
                cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    def ready(self) -> str:
        """Wait until the process answers GetSpec; returns the agent token."""
        deadline = time.monotonic() + 90
        # a bound evaluator's own token (never the shared agent.token, issue 26)
        token_file = (
            self.state / "run-tokens" / f"{self.run_id}.agent.token"
            if self.run_id is not None
            else self.state / "agent.token"
        )
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.output()
            if token_file.exists():
                token = token_file.read_text().strip()
                with contextlib.suppress(AleError):
                    with AleClient(self.agent_address, token, timeout_s=5) as c:
                        c.get_spec()
                    return token
            time.sleep(0.05)
        raise TimeoutError("the evaluator did not become ready")

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def reap(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


@pytest.fixture
def served() -> Iterator[list[Served]]:
    started: list[Served] = []
    yield started
    for s in started:
        s.reap()


def _volume(tmp: Path) -> Path:
    vol = tmp / "vol"
    vol.mkdir(exist_ok=True)
    shutil.copy(CHECKPOINT, vol / "policy.safetensors")
    return vol


def _query(state: Path, sql: str) -> list[tuple[object, ...]]:
    """Read the job store as another process would."""
    con = sqlite3.connect(state / "jobs.sqlite3")
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _jobs(state: Path) -> dict[str, tuple[str, int]]:
    """client token -> (state, attempts)."""
    rows = _query(state, "SELECT client_token, state, attempts FROM jobs")
    return {str(r[0]): (str(r[1]), int(r[2])) for r in rows}  # type: ignore[call-overload]


def _lease_until(state: Path, token: str) -> float:
    rows = _query(state, f"SELECT lease_until FROM jobs WHERE client_token = '{token}'")
    return float(rows[0][0])  # type: ignore[arg-type]


def _until(what: str, check: object, timeout_s: float = 60.0, poll_s: float = 0.01) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(poll_s)


def _workers(pid: int) -> list[int]:
    """The rollout worker processes of evaluator ``pid``."""
    return child_pids(pid, marker=b"spawn_main")


# ----------------------------------------------------------------- stopping --


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_serve_quietly_while_a_job_runs(
    short_tmp: Path, served: list[Served], sig: signal.Signals
) -> None:
    vol = _volume(short_tmp)
    ev = Served(short_tmp, "--run-id", RUN)
    served.append(ev)
    token = ev.ready()
    with AleClient(ev.agent_address, token, run_id=RUN, submission_dir=vol) as c:
        for n in range(3):
            c.submit(client_token=f"job-{n}")

    # the second job rolling out: the first is done, so the worker is warm and busy
    def second_running() -> bool:
        jobs = _jobs(ev.state)
        assert jobs["job-1"][0] != "SUCCEEDED", "missed the second job's run"
        return jobs["job-0"][0] == "SUCCEEDED" and jobs["job-1"][0] == "RUNNING"

    _until("the second job to run", second_running)
    workers = _workers(ev.proc.pid)
    assert workers
    os.killpg(ev.proc.pid, sig)  # as a terminal's Ctrl-C does: the whole process group
    _until("the drain to start", lambda: "draining:" in ev.output())
    os.killpg(ev.proc.pid, sig)  # the second signal: stop at once, the job not waited for
    assert ev.proc.wait(timeout=30) == 0, ev.output()
    assert "drain cut short by a second signal" in ev.output()

    out = ev.output()
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    assert " ERROR " not in out and "WARNING" not in out, out
    assert out.rstrip().splitlines()[-1] == "evaluator stopped"
    for pid in workers:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
    jobs = _jobs(ev.state)
    # Left to its lease: neither failed nor requeued. Or done: the job's last part (its
    # result, signed in the evaluator's process) can end between the drain's start and the
    # second signal however the test times them (seen on a fast host: SUCCEEDED).
    assert jobs["job-1"] in (("RUNNING", 1), ("SUCCEEDED", 1)), jobs
    assert jobs["job-2"] == ("QUEUED", 0)


def test_an_idle_serve_stops_quietly_on_sigint(short_tmp: Path, served: list[Served]) -> None:
    _volume(short_tmp)
    ev = Served(short_tmp)  # shared
    served.append(ev)
    ev.ready()
    ev.proc.send_signal(signal.SIGINT)
    assert ev.proc.wait(timeout=30) == 0, ev.output()
    assert "Traceback" not in ev.output()
    assert ev.output().rstrip().splitlines()[-1] == "evaluator stopped"


def test_a_bound_serve_gives_its_run_a_token_of_its_own(
    short_tmp: Path, served: list[Served]
) -> None:
    """``serve --run-id``: the run's token is a file of that run, never the shared
    agent.token, which every evaluator on the state dir accepts (issue 26)."""
    _volume(short_tmp)
    ev = Served(short_tmp, "--run-id", RUN)
    served.append(ev)
    token = ev.ready()
    token_file = ev.state / "run-tokens" / f"{RUN}.agent.token"
    assert token_file.read_text().strip() == token
    assert os.stat(token_file).st_mode & 0o777 == 0o600
    assert not (ev.state / "agent.token").exists()
    assert str(token_file) in ev.output()
    ev.proc.send_signal(signal.SIGINT)
    assert ev.proc.wait(timeout=30) == 0, ev.output()


def test_practice_without_run_is_refused_on_a_bound_serve(short_tmp: Path) -> None:
    proc = subprocess.run(
        [*CLI, "evaluator", "serve", "--state-dir", str(short_tmp / "s"), "--run-id", RUN,
         "--allow-practice-without-run"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "for a shared evaluator" in proc.stderr + proc.stdout


# ----------------------------------------------------------------- takeover --


def test_a_killed_evaluators_job_is_taken_over_only_after_its_lease(
    short_tmp: Path, served: list[Served]
) -> None:
    lease = 6.0
    vol = _volume(short_tmp)
    first = Served(short_tmp, "--run-id", RUN, "--job-lease-s", str(lease), log="first.log")
    served.append(first)
    token = first.ready()
    with AleClient(first.agent_address, token, run_id=RUN, submission_dir=vol) as c:
        job_id = c.submit(client_token="crash")
    _until(
        "the job to run",
        lambda: _jobs(first.state)["crash"][0] == "RUNNING" and _workers(first.proc.pid),
    )
    os.killpg(first.proc.pid, signal.SIGKILL)  # the evaluator and its workers
    first.proc.wait(timeout=10)
    assert _jobs(first.state)["crash"] == ("RUNNING", 1)
    lease_until = _lease_until(first.state, "crash")
    assert lease_until > time.time()

    shared = Served(short_tmp, "--job-lease-s", str(lease), log="shared.log")
    served.append(shared)
    shared.ready()
    ready_at = time.time()
    assert ready_at < lease_until, "the new evaluator took longer to start than the lease"
    seen: list[tuple[float, str, int]] = []

    def finished() -> bool:
        state, n = _jobs(shared.state)["crash"]
        seen.append((time.time(), state, n))
        return state == "SUCCEEDED"

    _until("the job to be taken over and finished", finished, timeout_s=90, poll_s=0.05)
    before = [(s, n) for t, s, n in seen if t < lease_until]
    assert before and set(before) == {("RUNNING", 1)}  # the dead process's lease still ran
    taken_at = min(t for t, s, n in seen if (s, n) != ("RUNNING", 1))
    assert taken_at >= lease_until

    harness_token = (shared.state / "harness.token").read_text().strip()
    with AleClient(shared.harness_address, harness_token) as h:
        r = h._call(h.stub.GetEvalResult, pb.GetEvalResultRequest(job_id=job_id))
    result = EvalResult.model_validate_json(r.eval_result_json)
    assert result.state == "SUCCEEDED" and result.attempts == 2
    mine = [e for e in result.events if e["payload"].get("job_id") == job_id]
    starts = [e["payload"]["attempt"] for e in mine if e["kind"] == "evaluation_started"]
    assert starts == [1, 2]
    assert [e["kind"] for e in mine].count("result") == 1  # finished once
    assert "requeued 1 job" in shared.output()


# --------------------------------------------------------------- state dirs --


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "evaluator", *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )


def test_public_key_json_defaults_to_the_state_dir_runs_use(tmp_path: Path) -> None:
    from ale_robotics.harness.run import default_state_dir

    proc = _cli("public-key", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)  # one JSON document, nothing else on stdout
    expected = state_home() / "evaluator"
    assert expected == default_state_dir()
    assert Path(doc["state_dir"]) == expected
    assert len(doc["public_key"]) == 64 and int(doc["public_key"], 16) >= 0
    assert (expected / "signing_key.pem").is_file()
    plain = _cli("public-key")
    assert plain.stdout.strip() == doc["public_key"]


def test_public_key_json_is_never_wrapped(tmp_path: Path) -> None:
    deep = tmp_path / ("a-long-directory-name-" * 6) / "state"
    proc = _cli("public-key", "--json", "--state-dir", str(deep))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("\n") == 1 and len(proc.stdout) > 160
    assert json.loads(proc.stdout)["state_dir"] == str(deep)


@pytest.mark.parametrize("command", ["serve", "public-key"])
@pytest.mark.parametrize("kind", ["a file", "under a file"])
def test_an_unusable_state_dir_is_one_clear_error(tmp_path: Path, command: str, kind: str) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    path = blocker if kind == "a file" else blocker / "state"
    proc = _cli(command, "--state-dir", str(path))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "--state-dir" in lines[0]
