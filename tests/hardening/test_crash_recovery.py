"""kill -9 the evaluator process while a job runs; the restarted process finishes it exactly.

The evaluator runs as a real ``python -m ale_robotics evaluator serve`` process.
A balancing policy (every episode the full 1000 steps) is submitted, and the
process is SIGKILLed once the job is RUNNING. After a restart on the same state
dir the job must finish SUCCEEDED with the result of an uninterrupted run of
the same submission (same run id, same secret), the SQLite store must pass
``PRAGMA integrity_check``, the run's signed events must still form a chain that
verifies, a SubmitBatchEval retried with the same client token must return the
same job, and neither process's output may show the secret, a token or a seed.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path

from hardening_helpers import (
    RUN,
    TASK_ID,
    children_of,
    forbidden_strings,
    official,
    reap,
    serve_command,
    stable_weights,
    start_evaluator,
    wait,
    wait_ready,
    write_policy,
)

from ale_robotics.client import AleClient
from ale_robotics.evaluator import EvaluatorConfig, serve
from ale_robotics.evaluator.state.directory import write_private
from ale_robotics.seeds import new_secret
from ale_robotics.tasks import Registry, TaskSpec
from ale_robotics.trajectory import SignedEvaluatorEvent, TrajectoryWriter, verify_file
from ale_robotics.v1 import ale_env_pb2 as pb


def _integrity(db: Path) -> str:
    con = sqlite3.connect(db)
    try:
        return str(con.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        con.close()


def _row(db: Path, token: str) -> tuple[str, str, int]:
    con = sqlite3.connect(db)
    try:
        row = con.execute(
            "SELECT job_id, state, attempts FROM jobs WHERE client_token = ?", (token,)
        ).fetchone()
    finally:
        con.close()
    return str(row[0]), str(row[1]), int(row[2])


def _baseline(tmp: Path, secret: bytes, registry: Registry, task: TaskSpec) -> dict:
    """The same submission, same run id and secret, never interrupted (in-process)."""
    state = tmp / "base-state"
    write_private(state / "secret", secret)
    volume = tmp / "base-vol"
    write_policy(volume, stable_weights(task))
    ev = serve(
        EvaluatorConfig(state, volume, task_id=TASK_ID, run_id=RUN, workers=1),
        agent_listen=f"unix://{tmp}/ba.sock",
        harness_listen=f"unix://{tmp}/bh.sock",
        registry=registry,
    )
    try:
        with AleClient(ev.agent_address, ev.agent_token, run_id=RUN) as c:
            job = c.submit("", client_token="baseline")
            assert wait(c, job).state == "SUCCEEDED"
        res = official(ev.harness_address, ev.harness_token, job)
    finally:
        ev.stop(grace=0.5)
    assert res.attempts == 1
    return res.model_dump(include={"metrics", "episodes", "submission_files", "secret_sha256"})


def test_kill_9_mid_job_then_restart_finishes_identically(
    short_tmp: Path, registry: Registry, task: TaskSpec
) -> None:
    secret = new_secret()
    state = short_tmp / "state"
    write_private(state / "secret", secret)
    volume = short_tmp / "vol"
    write_policy(volume, stable_weights(task))
    log = short_tmp / "evaluator.log"
    cmd = serve_command(short_tmp, state, volume, RUN)
    agent_addr = f"unix://{short_tmp}/agent/a.sock"
    groups: list[int] = []
    try:
        first = start_evaluator(cmd, log)
        groups.append(first.pid)
        token = wait_ready(agent_addr, state / "run-tokens" / f"{RUN}.agent.token", first)
        with AleClient(agent_addr, token, run_id=RUN) as c:
            job = c.submit("", client_token="crash-token")
            while c.status(job).state == "QUEUED":
                time.sleep(0.01)
            assert c.status(job).state == "RUNNING"
            deadline = time.monotonic() + 30  # until the rollout worker exists
            while not children_of(first.pid) and time.monotonic() < deadline:
                time.sleep(0.01)
            os.kill(first.pid, signal.SIGKILL)
            first.wait(timeout=10)
        # the kill landed mid-job: the store says RUNNING, attempt 1, and is intact
        assert _row(state / "jobs.sqlite3", "crash-token") == (job, "RUNNING", 1)
        assert _integrity(state / "jobs.sqlite3") == "ok"

        second = start_evaluator(cmd, log)
        groups.append(second.pid)
        token = wait_ready(agent_addr, state / "run-tokens" / f"{RUN}.agent.token", second)
        with AleClient(agent_addr, token, run_id=RUN) as c:
            req = pb.SubmitBatchEvalRequest(run_id=RUN, client_token="crash-token")
            again = c._call(c.stub.SubmitBatchEval, req)
            assert (again.job_id, again.deduplicated) == (job, True)
            assert wait(c, job, timeout_s=120).state == "SUCCEEDED"
        harness_token = (state / "harness.token").read_text().strip()
        res = official(f"unix://{short_tmp}/h.sock", harness_token, job)
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=30)
    finally:
        for pgid in groups:
            reap(pgid)  # the first process's orphaned workers too

    assert res.state == "SUCCEEDED" and res.attempts == 2
    assert res.metrics["mean_return"] == 1000.0
    assert res.model_dump(
        include={"metrics", "episodes", "submission_files", "secret_sha256"}
    ) == _baseline(short_tmp, secret, registry, task)
    assert _integrity(state / "jobs.sqlite3") == "ok"

    # the signed events: gap-free, both attempts recorded, and the chain verifies
    kinds = [e["kind"] for e in res.events]
    assert kinds[:3] == ["evaluator_key", "seed_commitment", "submission_received"]
    starts = [e["payload"]["attempt"] for e in res.events if e["kind"] == "evaluation_started"]
    assert starts == [1, 2]
    assert kinds[-1] == "result"
    assert [e["sig"]["eval_seq"] for e in res.events] == list(range(len(res.events)))
    writer = TrajectoryWriter(short_tmp / "trajectory.jsonl", RUN)
    for event in res.events:
        writer.append_signed(SignedEvaluatorEvent.model_validate(event))
    report = verify_file(short_tmp / "trajectory.jsonl", expected_run_id=RUN)
    assert report.ok, report.reason
    assert report.eval_events == len(res.events)

    # nothing either process printed shows the secret, a token or a raw seed
    output = log.read_bytes().decode("utf-8", "replace")
    assert "requeued 1 job" in output
    for value in forbidden_strings(task, RUN, secret):
        assert value not in output
    assert token not in output and harness_token not in output
