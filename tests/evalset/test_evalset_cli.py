"""``ale-robotics eval-set`` end to end: real runs, a real SIGINT, a resume.

Two tasks x two quick agents x three repetitions, as smoke runs of 2 episodes: the
shipped TD3 checkpoint (about 3 s a run on the pendulum; on HalfCheetah the evaluator
rejects it, which scores 0) and an agent that submits random weights for whatever
contract the task has.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ale_robotics.evalset import aggregate, collect_scored_runs, load_spec, plan_slots
from ale_robotics.harness.report import RunReport, StoppedRunReport, load_run_report

CLI = [sys.executable, "-m", "ale_robotics"]
ROOT = Path(__file__).resolve().parents[2]
TASKS = ["td3-inverted-pendulum-v1", "td3-halfcheetah-vec-v1"]
CHECKPOINT = "python examples/agents/submit_checkpoint.py"

SUBMIT_RANDOM = """
import time
import numpy as np
from safetensors.numpy import save_file
from ale_robotics.client import AleClient
c = AleClient.from_env()
rng = np.random.default_rng()
w = {r.key: (rng.standard_normal(r.shape) * 0.1).astype(r.dtype)
     for r in c.get_spec().contract.tensors}
save_file(w, str(c.submission_dir / "policy.safetensors"))
time.sleep(2.0)  # a run of this agent is surely under way for 2 s: where the test interrupts
print("submitted", c.submit())
"""


def write_spec(
    path: Path, state: Path, agents: list[tuple[str, str]], *, tasks: list[str], reps: int
) -> Path:
    spec = {
        "schema_version": 1,
        "tasks": tasks,
        "agents": [{"label": label, "cmd": cmd} for label, cmd in agents],
        "repetitions": reps,
        "episodes": 2,
        "sandbox": "none",
        "run_args": ["--workers", "1", "--state-dir", str(state)],
        "bootstrap": {"reps": 300, "profile_reps": 200, "seed": 3},
    }
    path.write_text(json.dumps(spec))  # JSON is YAML
    return path


class EvalSet:
    """``ale-robotics eval-set`` in its own process group; stderr read as it comes."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [*CLI, "eval-set", *args],
            cwd=ROOT,
            env={**os.environ, "COLUMNS": "80"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # killpg below plays the terminal's Ctrl-C
        )
        self.lines: list[str] = []
        self.out: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(stream, into), daemon=True)
            for stream, into in ((self.proc.stderr, self.lines), (self.proc.stdout, self.out))
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: Any, into: list[str]) -> None:
        for line in stream:
            into.append(line)

    def wait_for(self, pattern: str, count: int = 1, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while sum(1 for ln in self.lines if re.search(pattern, ln)) < count:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"no {count} x {pattern!r} in:\n{''.join(self.lines)}")
            time.sleep(0.05)

    def finish(self, timeout: float = 120) -> tuple[int, str, str]:
        try:
            self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
        for reader in self._readers:
            reader.join(5)
        return self.proc.returncode, "".join(self.out), "".join(self.lines)


def run_set(*args: str, timeout: float = 120) -> tuple[int, str, str]:
    return EvalSet(*args).finish(timeout)


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line mentions ``text`` (the set's directory)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            status = (entry / "stat").read_text().split()[2]
        except OSError:
            continue
        if text in cmdline and status != "Z":
            found.append(int(entry.name))
    return found


def reports(root: Path, spec_path: Path) -> dict[str, RunReport | StoppedRunReport | None]:
    spec = load_spec(spec_path)
    out: dict[str, RunReport | StoppedRunReport | None] = {}
    for slot in plan_slots(spec, root, spec.set_name(spec_path)):
        result = slot.run_dir / "result.json"
        out[slot.key] = load_run_report(result) if result.exists() else None
    return out


@pytest.mark.slow  # an eval set interrupted, resumed and aggregated: about 45 s on two cores
def test_interrupted_set_resumes_skipping_done_runs_and_aggregates_the_same(
    tmp_path: Path, short_tmp: Path
) -> None:
    agent = tmp_path / "random_agent.py"
    agent.write_text(SUBMIT_RANDOM)
    spec_path = write_spec(
        tmp_path / "smoke.yaml",
        short_tmp / "state",
        [("checkpoint", CHECKPOINT), ("random", f"python {agent}")],
        tasks=TASKS,
        reps=3,
    )
    root = tmp_path / "runs"
    common = (str(spec_path), "--runs-root", str(root), "--jobs", "2")

    # 1. Ctrl-C after three runs: the running ones stop cleanly (result.json says
    # interrupted), nothing outlives the set, which exits 130 without an aggregate
    first = EvalSet(*common)
    first.wait_for(r"\] done  ", count=3)
    first.wait_for(r"\] start ", count=5)  # two running; the newest one under way
    # Interrupt while a run of the slow agent is inside its 2 s sleep (its agent log
    # exists, its result.json not yet): that run must end interrupted, not completed.
    deadline = time.monotonic() + 60
    while not any(
        (d / "agent.log").exists() and not (d / "result.json").exists()
        for d in root.glob("*/*/random/rep*")
    ):
        assert time.monotonic() < deadline, "no run of the slow agent got under way"
        time.sleep(0.05)
    os.killpg(first.proc.pid, signal.SIGINT)
    rc, out, err = first.finish(timeout=90)
    assert rc == 130, err
    assert "Traceback" not in err, err
    assert "run the same command again to resume" in err
    assert out == ""  # no tables for a set that did not finish
    assert not processes_mentioning(str(root)), "runs outlived the interrupted set"
    before = reports(root, spec_path)
    done = {k: r.run_id for k, r in before.items() if isinstance(r, RunReport)}
    stopped = {k for k, r in before.items() if isinstance(r, StoppedRunReport)}
    assert 3 <= len(done) < 12, before
    assert stopped, before  # at least the newest run was stopped mid-way
    assert all(before[k].state == "interrupted" for k in stopped)  # type: ignore[union-attr]
    assert not (root / "smoke" / "aggregate").exists()

    # 2. the same command again: completed runs are skipped, the rest (re)done
    rc, out, err = run_set(*common, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    states = {f"{r['task_id']}/{r['label']}/rep{r['rep']}": r for r in doc["runs"]}
    assert {k for k, r in states.items() if r["state"] == "skipped"} == set(done)
    assert all(r["state"] == "completed" for k, r in states.items() if k not in done)
    assert f"{len(done)} run(s) were already completed: skipped" in err
    for key in stopped:
        assert f"start {key} (redo: interrupted)" in err
    after = reports(root, spec_path)
    assert all(isinstance(r, RunReport) for r in after.values()), after
    assert {k: after[k].run_id for k in done} == done  # type: ignore[union-attr]
    labels = {r.label for r in after.values() if isinstance(r, RunReport)}
    assert labels == {"checkpoint", "random"}  # each run got the set's --label

    # the aggregate is the one computed from the 12 runs, whatever order they ran in
    spec = load_spec(spec_path)
    expected = aggregate(spec, "smoke", collect_scored_runs(spec, "smoke", root))
    out_dir = root / "smoke" / "aggregate"
    written = json.loads((out_dir / "aggregate.json").read_text())
    assert written == expected.model_dump(mode="json") == doc["aggregate"]
    assert written["runs_scored"] == written["runs_expected"] == 12
    assert {c["n"] for c in written["cells"]} == {3}
    pendulum = next(
        c for c in written["cells"] if c["task_id"] == TASKS[0] and c["label"] == "checkpoint"
    )
    assert pendulum["scores"] == [pytest.approx(1.0183, abs=1e-3)] * 3
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "aggregate.json",
        "aggregate.md",
        "interval_estimates.png",
        "per_task_iqm.png",
        "performance_profile.png",
    ]

    # 3. an uninterrupted invocation over the finished set: nothing runs, same bytes
    blob = (out_dir / "aggregate.json").read_bytes()
    rc, out, err = run_set(*common)
    assert rc == 0, err
    assert "12 run(s) were already completed: skipped" in err
    assert "start " not in err
    assert (out_dir / "aggregate.json").read_bytes() == blob
    assert "across tasks" in out and max(len(ln) for ln in out.splitlines()) <= 80


KILLS_ITS_HARNESS = (
    'python -c "import os, signal, time; os.kill(os.getppid(), signal.SIGKILL); time.sleep(9)"'
)
"""An agent command that passes every check, whose run then fails: it kills its harness
(the ``run`` process), which so never writes result.json."""


def test_a_failed_run_exits_1_aggregates_the_rest_and_is_redone_next_time(
    tmp_path: Path, short_tmp: Path
) -> None:
    spec_path = write_spec(
        tmp_path / "broken.yaml",
        short_tmp / "state",
        [("checkpoint", CHECKPOINT), ("broken", KILLS_ITS_HARNESS)],
        tasks=TASKS[:1],
        reps=1,
    )
    root = tmp_path / "runs"
    rc, out, err = run_set(str(spec_path), "--runs-root", str(root), "--json")
    assert rc == 1, err
    doc = json.loads(out)
    broken = next(r for r in doc["runs"] if r["label"] == "broken")
    assert broken["state"] == "failed" and broken["exit_code"] == -signal.SIGKILL
    log = root / "broken" / TASKS[0] / "broken" / "rep0.log"
    assert f"(log: {log})" in broken["message"]
    assert "1 of 2 run(s) did not complete" in err and "run the same command again" in err
    cells = {c["label"]: c for c in doc["aggregate"]["cells"]}
    assert cells["checkpoint"]["n"] == 1 and cells["broken"]["missing_reps"] == [0]

    # again: the completed run is skipped, only the failed one is tried
    rc, _, err = run_set(str(spec_path), "--runs-root", str(root))
    assert rc == 1, err
    assert "1 run(s) were already completed: skipped" in err
    assert f"start {TASKS[0]}/broken/rep0" in err and "checkpoint/rep0" not in err

    # a SPEC changed under the set: refused, nothing deleted
    spec_path.write_text(spec_path.read_text().replace(CHECKPOINT, CHECKPOINT + " --x"))
    rc, _, err = run_set(str(spec_path), "--runs-root", str(root))
    assert rc == 2, err
    assert "holds a completed run of agent command" in err and "new name" in err
    assert (root / "broken" / TASKS[0] / "checkpoint" / "rep0" / "result.json").exists()


def test_an_agent_command_that_cannot_start_is_refused_before_any_run(
    tmp_path: Path, short_tmp: Path
) -> None:
    """A typo in one agent's command was N runs that failed (or scored 0) one after the
    other; now the set checks every command as ``run`` does, and nothing starts."""
    spec_path = write_spec(
        tmp_path / "typo.yaml",
        short_tmp / "state",
        [("checkpoint", CHECKPOINT), ("typo", "python examples/agents/submit_chekpoint.py")],
        tasks=TASKS[:1],
        reps=2,
    )
    root = tmp_path / "runs"
    rc, out, err = run_set(str(spec_path), "--runs-root", str(root))
    assert rc == 2, err
    err = " ".join(err.split())
    assert f"{spec_path}: agents.1 (typo): --agent" in err
    assert f"tried {ROOT / 'examples/agents/submit_chekpoint.py'}" in err
    assert "did you mean examples/agents/submit_checkpoint.py?" in err
    assert "Traceback" not in err and out == ""
    assert not root.exists(), "a refused set starts nothing and creates nothing"


def test_strict_exits_1_when_an_agent_failed_without_submitting(
    tmp_path: Path, short_tmp: Path
) -> None:
    """The crashed agent's run is scored (0) and aggregated either way; --strict makes
    the set exit 1 for it, also when that run was completed by an earlier invocation."""
    crash = "python -c \"import sys; print('no checkpoint here'); sys.exit(3)\""
    spec_path = write_spec(
        tmp_path / "crash.yaml", short_tmp / "state", [("crash", crash)], tasks=TASKS[:1], reps=1
    )
    root = tmp_path / "runs"
    rc, out, err = run_set(str(spec_path), "--runs-root", str(root), "--json")
    assert rc == 0, err  # without --strict: the run completed, it has a score
    (run,) = json.loads(out)["runs"]
    assert run["state"] == "completed" and run["score"] == 0.0
    assert run["agent_failure"] == "exited with code 3"
    log = root / "crash" / TASKS[0] / "crash" / "rep0" / "agent.log"
    assert f"the agent exited with code 3 without submitting (log: {log})" in " ".join(err.split())

    rc, out, err = run_set(str(spec_path), "--runs-root", str(root), "--strict", "--json")
    assert rc == 1, err
    assert "1 run(s) were already completed: skipped" in err
    err = " ".join(err.split())
    assert "--strict: in 1 of 1 run(s) the agent ended in error without submitting" in err
    assert f"{TASKS[0]}/crash/rep0" in err
    assert json.loads(out)["exit_code"] == 1


def test_a_set_already_running_is_refused(tmp_path: Path, short_tmp: Path) -> None:
    spec_path = write_spec(
        tmp_path / "busy.yaml", short_tmp / "state", [("checkpoint", CHECKPOINT)],
        tasks=TASKS[:1], reps=1,
    )  # fmt: skip
    root = tmp_path / "runs"
    (root / "busy").mkdir(parents=True)
    with open(root / "busy" / ".eval-set.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.write("4242\n")
        fh.flush()
        rc, _, err = run_set(str(spec_path), "--runs-root", str(root))
    assert rc == 2, err
    assert "another eval-set is running the set" in err and "(pid 4242)" in err
    assert not (root / "busy" / TASKS[0]).exists()
