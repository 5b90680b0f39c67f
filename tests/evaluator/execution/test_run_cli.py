"""``ale-robotics run --executor ray`` end to end: the same episodes as the local executor,
and a Ctrl-C during the evaluation that stops Ray with the run."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from safetensors.numpy import load_file

from ale_robotics.evaluator.batch.pipeline import summarize
from ale_robotics.evaluator.batch.plan import episode_plan
from ale_robotics.evaluator.execution import LocalExecutor
from ale_robotics.harness.report import StoppedRunReport, load_run_report
from ale_robotics.seeds import derive_seeds
from ale_robotics.tasks import Registry

ROOT = Path(__file__).resolve().parents[3]
CLI = [sys.executable, "-m", "ale_robotics"]
TASK_ID = "td3-inverted-pendulum-v1"
CHECKPOINT = ROOT / "examples/agents/checkpoints" / TASK_ID / "policy.safetensors"


def test_run_on_ray_scores_the_local_executors_episodes(
    short_tmp: Path, registry: Registry
) -> None:
    agent = f"{sys.executable} {ROOT / 'examples/agents/submit_checkpoint.py'}"
    run_dir, state = short_tmp / "run", short_tmp / "state"
    proc = subprocess.run(
        [
            *CLI,
            "run",
            TASK_ID,
            "--agent",
            agent,
            "--sandbox",
            "none",
            "--executor",
            "ray",
            "--workers",
            "2",
            "--run-dir",
            str(run_dir),
            "--state-dir",
            str(state),
        ],
        env={**os.environ, "XDG_STATE_HOME": str(short_tmp / "xdg")},
        capture_output=True,
        text=True,
        timeout=240,
        cwd=short_tmp,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1].startswith("score: ")
    result = json.loads((run_dir / "result.json").read_text())
    ev = result["eval_result"]
    assert ev["state"] == "SUCCEEDED" and ev["official"] is True
    assert ev["timings"]["workers"] == 2
    events = [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    (started,) = [e["payload"] for e in events if e["kind"] == "evaluation_started"]
    assert started["executor"] == "ray"  # signed: where the episodes ran

    # the run's hidden episodes again, on the local executor in this process
    task = registry.get(TASK_ID)
    seeds = derive_seeds(task.eval.base_seeds, result["run_id"], (state / "secret").read_bytes())
    runs = episode_plan(task, seeds)
    with LocalExecutor(2) as local:
        outcomes = local.run(
            task, load_file(str(CHECKPOINT)), [s for _, s in runs], indices=[i for i, _ in runs]
        )
    assert [(e["index"], e["episode_return"], e["length"]) for e in ev["episodes"]] == [
        (o.index, o.ret, o.length) for o in outcomes
    ]
    assert ev["metrics"] == summarize(outcomes, (m.name for m in task.metrics))

    # and the audit, which re-runs the job on the local executor, finds it exact
    audit = subprocess.run(
        [*CLI, "audit", str(run_dir), "--secret", str(state / "secret"), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    doc = json.loads(audit.stdout)
    assert doc["ok"] is True, doc["failed_checks"]


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


def _session_pids(sid: int) -> set[int]:
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            out.add(int(stat.parent.name))
    return out


def test_ctrl_c_during_the_evaluation_on_ray_cancels_the_job_and_stops_ray(
    short_tmp: Path,
) -> None:
    """SIGINT to the run's process group (a terminal's Ctrl-C) while the shards run on
    Ray: the job is CANCELLED, the run says interrupted, and no Ray process outlives it."""
    agent = short_tmp / "agent.py"
    agent.write_text(SUBMIT_RANDOM)
    run_dir = short_tmp / "run"
    proc = subprocess.Popen(
        [*CLI, "run", "td3-halfcheetah-vec-v1", "--agent", f"{sys.executable} {agent}",
         "--sandbox", "none", "--executor", "ray", "--workers", "1",
         "--state-dir", str(short_tmp / "state"), "--run-dir", str(run_dir)],
        cwd=short_tmp,
        env={**os.environ, "XDG_STATE_HOME": str(short_tmp / "xdg")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group: killpg plays the terminal's Ctrl-C
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr or ()), daemon=True)
    reader.start()
    deadline = time.monotonic() + 120
    while not any("evaluating on hidden seeds" in line for line in lines):
        assert time.monotonic() < deadline and proc.poll() is None, "".join(lines)
        time.sleep(0.05)
    time.sleep(0.5)  # the shards are on Ray now
    ray_procs = _session_pids(proc.pid) - {proc.pid}
    assert ray_procs  # gcs_server, raylet, workers: all in the run's session
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    reader.join(timeout=5)
    err = "".join(lines)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "score:" not in out
    report = load_run_report(run_dir / "result.json")
    assert isinstance(report, StoppedRunReport) and report.phase == "evaluating"
    with sqlite3.connect(short_tmp / "state" / "jobs.sqlite3") as db:
        (job_state,) = db.execute(
            "SELECT state FROM jobs WHERE job_id = ?", (report.cancelled_jobs[0],)
        ).fetchone()
    assert job_state == "CANCELLED"
    deadline = time.monotonic() + 30  # killed processes take their time on a busy host
    while ray_procs & _session_pids(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not ray_procs & _session_pids(proc.pid), "Ray processes outlived the run"


def test_executor_options_that_cannot_work_are_refused() -> None:
    from typer.testing import CliRunner

    from ale_robotics.cli.main import app

    cases = [
        (["--executor", "spark"], "use 'local' or 'ray'"),
        (["--ray-address", "10.0.0.1:6379"], "goes with --executor ray"),
        (["--executor", "ray", "--evaluator", "unix:///nowhere.sock"], "has its own executor"),
    ]
    for extra, message in cases:
        r = CliRunner().invoke(app, ["run", TASK_ID, "--agent", "true", *extra])
        assert r.exit_code == 2, r.output
        text = " ".join(r.output.translate({ord(c): " " for c in "│╭╮╰╯─"}).split())
        assert message in text, r.output


def test_serve_refuses_executor_options_that_cannot_work(tmp_path: Path) -> None:
    """`evaluator serve` checks --executor/--ray-address before it starts anything."""
    from typer.testing import CliRunner

    from ale_robotics.cli.main import app

    cases = [
        (["--executor", "spark"], "unknown executor 'spark'"),
        (["--ray-address", "10.0.0.1:6379"], "--executor ray"),
    ]
    for extra, message in cases:
        state = tmp_path / extra[0].strip("-")
        r = CliRunner().invoke(app, ["evaluator", "serve", "--state-dir", str(state), *extra])
        assert r.exit_code == 2, r.output
        assert message in " ".join(r.output.split()), r.output
        assert not (state / "agent" / "agent.sock").exists()
