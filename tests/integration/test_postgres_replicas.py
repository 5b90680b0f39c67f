"""Two ``evaluator serve`` replicas on one PostgreSQL job store (issue 16, point 3).

Real processes, real sockets, a real (throwaway) PostgreSQL cluster: replicas A and
B are shared evaluators (no ``--run-id``) on one database (``--store``), one state
dir (the same secret, so the same hidden seeds; the same signing key; one snapshots
dir) and one submission volume. They start at the same moment on the fresh state
dir, so both race to create its secret, tokens and key, and must end up with the
same ones. The harness opens ten runs, five on each, and each run's agent submits
two jobs through the *other* replica (the run registry is in the store, so a run
opened on A is served by B): 20 jobs, which either replica may claim. A run opened
on A and closed on B has its token refused by A at once.

Once each replica has finished some jobs, while A is in the middle of another, A is
killed with SIGKILL (its rollout worker paused first, so the kill surely lands
mid-job, as in ``test_concurrent_runs.py``). Then:

* B takes the killed job over only once A's lease has run out (``--job-lease-s 3``),
  runs it (attempt 2) and gets exactly the result a reference evaluation of the
  same submission on the same run gets;
* every other job ran exactly once (attempt 1, one ``evaluation_started``), none is
  lost: 20 jobs SUCCEEDED;
* every run's signed events are numbered 0, 1, 2 ... without gap or duplicate,
  with one key and one seed commitment at the start, though two processes wrote
  them, and all verify with the state dir's key.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import child_pids
from pg import PgCluster, pg_cluster

from ale_robotics.client import AleClient
from ale_robotics.errors import AleError, UnauthenticatedError
from ale_robotics.evaluator import Evaluator, EvaluatorConfig
from ale_robotics.model.result import EvalResult
from ale_robotics.tasks import Registry
from ale_robotics.trajectory import EvaluatorSigner
from ale_robotics.trajectory.signing import SignedEvaluatorEvent
from ale_robotics.v1 import ale_env_pb2 as pb

__all__ = ["pg_cluster"]

CLI = [sys.executable, "-m", "ale_robotics"]
TASK_ID = "td3-inverted-pendulum-v1"
CHECKPOINT = (
    Path(__file__).resolve().parents[2]
    / "examples"
    / "agents"
    / "checkpoints"
    / TASK_ID
    / "policy.safetensors"
)
"""Balances every episode to the full 1000 steps: a job takes a moment to run."""
LEASE_S = 3.0
RUNS_PER_REPLICA = 5
JOBS_PER_RUN = 2
SAME = ("state", "task_config_sha256", "submission_files", "secret_sha256", "metrics")
"""EvalResult fields that depend only on the submission and the run (besides the
episodes and outcomes): not on which process ran it, when, or how many times."""


class Replica:
    """``evaluator serve`` in a session of its own, all output in one log file."""

    def __init__(self, tmp: Path, name: str, state: Path, volume: Path, store: str) -> None:
        self.name = name
        self.state = state
        self.log = tmp / f"{name}.log"
        self.agent_address = f"unix://{tmp}/{name}-a.sock"
        self.harness_address = f"unix://{tmp}/{name}-h.sock"
        cmd = [
            *CLI,
            "evaluator",
            "serve",
            "--state-dir",
            str(state),
            "--submission-dir",
            str(volume),
            "--agent-listen",
            self.agent_address,
            "--harness-listen",
            self.harness_address,
            "--task",
            TASK_ID,
            "--workers",
            "1",
            "--job-lease-s",
            str(LEASE_S),
            "--store",
            store,
        ]
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
        with open(self.log, "ab") as fh:
            self.proc = subprocess.Popen(
                cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    @property
    def owner_mark(self) -> str:
        """What this process's owner ids contain (``host:PID:random``)."""
        return f":{self.proc.pid}:"

    def ready(self) -> None:
        deadline = time.monotonic() + 90
        token_file = self.state / "agent.token"
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.output()
            if token_file.exists():
                token = token_file.read_text().strip()
                with (
                    contextlib.suppress(AleError),
                    AleClient(self.agent_address, token, timeout_s=5) as c,
                ):
                    c.get_spec()
                    return
            time.sleep(0.05)
        raise TimeoutError(f"replica {self.name} did not become ready:\n{self.output()}")

    def harness(self) -> AleClient:
        return AleClient(self.harness_address, (self.state / "harness.token").read_text().strip())

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def reap(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


@pytest.fixture
def replicas() -> Iterator[list[Replica]]:
    started: list[Replica] = []
    yield started
    for r in started:
        r.reap()


def _jobs(url: str) -> dict[str, dict[str, Any]]:
    """job id -> its row, read as another process would; plus the server's time."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT job_id, run_id, client_token, state, attempts, owner, lease_until, "
            "date_part('epoch', clock_timestamp()) FROM jobs"
        ).fetchall()
    keys = ("job_id", "run_id", "token", "state", "attempts", "owner", "lease_until", "now")
    return {r[0]: dict(zip(keys, r, strict=True)) for r in rows}


def _workers(pid: int) -> list[int]:
    """The rollout worker processes of evaluator ``pid``."""
    return child_pids(pid, marker=b"spawn_main")


def _until(what: str, check: Callable[[], object], timeout_s: float, poll_s: float = 0.01) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (value := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(poll_s)
    return value


def _pause_mid_job(a: Replica, url: str) -> tuple[str, list[int]]:
    """Pause A's rollout worker while A runs a job; returns the job and the paused pids.

    The job must still be A's, RUNNING, a moment after the pause: then it cannot
    finish (its rollouts are stopped) and A's lease thread keeps renewing it."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert a.proc.poll() is None, a.output()
        mine = [
            j for j in _jobs(url).values() if j["state"] == "RUNNING" and a.owner_mark in j["owner"]
        ]
        workers = _workers(a.proc.pid)
        if not mine or not workers:
            time.sleep(0.005)
            continue
        for pid in workers:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(0.5)
        job = _jobs(url)[mine[0]["job_id"]]
        if job["state"] == "RUNNING" and a.owner_mark in job["owner"] and job["attempts"] == 1:
            return job["job_id"], workers
        for pid in workers:  # it finished just before the pause: try the next one
            os.kill(pid, signal.SIGCONT)
    raise TimeoutError(f"never caught replica A in the middle of a job:\n{a.output()}")


def _result(h: AleClient, job_id: str) -> EvalResult:
    r = h._call(h.stub.GetEvalResult, pb.GetEvalResultRequest(job_id=job_id))
    return EvalResult.model_validate_json(r.eval_result_json)


def _same(result: EvalResult) -> dict[str, Any]:
    """What two evaluations of one submission on one run must share."""
    doc = result.model_dump(mode="json", include=set(SAME))
    doc["episodes"] = [e.model_dump(mode="json") for e in result.episodes]
    doc["outcomes"] = None if result.outcomes is None else result.outcomes.model_dump(mode="json")
    return doc


def _result_payload(result: EvalResult) -> dict[str, Any]:
    """The payload of the job's signed ``result`` event."""
    return next(
        e["payload"]
        for e in result.events
        if e["kind"] == "result" and e["payload"]["job_id"] == result.job_id
    )


def _reference(tmp: Path, state: Path, run_id: str, registry: Registry) -> EvalResult:
    """The same submission evaluated on the same run by a lone embedded evaluator
    (its own SQLite store), with the replicas' secret and signing key."""
    ref_state, ref_vol = tmp / "ref-state", tmp / "ref-vol"
    ref_state.mkdir(mode=0o700)
    ref_vol.mkdir()
    for name in ("secret", "signing_key.pem"):
        shutil.copy2(state / name, ref_state / name)
    shutil.copy(CHECKPOINT, ref_vol / "policy.safetensors")
    ev = Evaluator(
        EvaluatorConfig(ref_state, ref_vol, task_id=TASK_ID, run_id=run_id, workers=1), registry
    )
    ev.start()
    try:
        job, _ = ev.submit(TASK_ID, run_id, "", "reference")
        _until("the reference job", lambda: (j := ev.store.get(job.job_id)) and j.terminal, 120)
        return ev.result(job.job_id, run_id)
    finally:
        ev.stop()


def test_two_replicas_share_one_postgresql_store_and_survive_a_sigkill(
    short_tmp: Path, pg_cluster: PgCluster, replicas: list[Replica], registry: Registry
) -> None:
    url = pg_cluster.create_database("replicas")
    state, volume = short_tmp / "state", short_tmp / "vol"
    volume.mkdir()
    # at the same moment, on the fresh state dir: both race to create its secret, tokens
    # and key, and must end up with the same ones (the same seeds, the same signatures)
    a = Replica(short_tmp, "a", state, volume, url)
    replicas.append(a)
    b = Replica(short_tmp, "b", state, volume, url)
    replicas.append(b)
    a.ready()
    b.ready()

    # a run opened on A is served by B, and closed on B is refused by A at once
    with a.harness() as h:
        closing = h._call(
            h.stub.OpenRun, pb.OpenRunRequest(run_id="run-pg-closed", task_id=TASK_ID)
        )
    with AleClient(b.agent_address, closing.agent_token) as agent:
        assert agent.get_spec() is not None
    with b.harness() as h:
        h._call(h.stub.CloseRun, pb.CloseRunRequest(run_id="run-pg-closed"))
    with (
        AleClient(a.agent_address, closing.agent_token) as agent,
        pytest.raises(UnauthenticatedError),
    ):
        agent.get_spec()

    # the harness opens five runs on each replica; each run's agent submits through the
    # other one
    grants: list[tuple[Replica, Any]] = []
    for n in range(2 * RUNS_PER_REPLICA):
        opener, other = (a, b) if n % 2 == 0 else (b, a)
        with opener.harness() as h:
            r = h._call(h.stub.OpenRun, pb.OpenRunRequest(run_id=f"run-pg-{n}", task_id=TASK_ID))
        shutil.copy(CHECKPOINT, Path(r.submission_dir) / "policy.safetensors")
        grants.append((other, r))
    submitted: dict[str, tuple[str, str]] = {}  # job id -> (run id, client token)
    for k in range(JOBS_PER_RUN):
        for replica, r in grants:
            with AleClient(
                replica.agent_address, r.agent_token, submission_dir=r.submission_dir
            ) as agent:
                token = f"{r.run_id}-{k}"
                submitted[agent.submit(client_token=token)] = (r.run_id, token)
    assert len(submitted) == 2 * RUNS_PER_REPLICA * JOBS_PER_RUN == 20

    # both replicas take jobs from the one queue; then A dies in the middle of one
    def finished_by(replica: Replica) -> int:
        return sum(
            j["state"] == "SUCCEEDED" and replica.owner_mark in j["owner"]
            for j in _jobs(url).values()
        )

    _until("both replicas to finish jobs", lambda: min(finished_by(a), finished_by(b)) >= 2, 120)
    killed, _ = _pause_mid_job(a, url)
    before_kill = _jobs(url)[killed]
    os.killpg(a.proc.pid, signal.SIGKILL)  # the evaluator and its workers
    a.proc.wait(timeout=10)
    assert before_kill["state"] == "RUNNING" and before_kill["attempts"] == 1
    lease_until = float(before_kill["lease_until"])

    # B finishes everything; the killed job only after A's lease ran out (server clock)
    seen: list[dict[str, Any]] = []

    def all_done() -> bool:
        jobs = _jobs(url)
        seen.append(jobs[killed])
        return len(jobs) == 20 and all(j["state"] == "SUCCEEDED" for j in jobs.values())

    _until("every job to succeed", all_done, timeout_s=180, poll_s=0.05)
    taken = [s for s in seen if (s["state"], s["attempts"]) != ("RUNNING", 1)]
    assert taken and min(s["now"] for s in taken) >= lease_until, "taken over inside A's lease"

    jobs = _jobs(url)
    assert set(jobs) == set(submitted)  # nothing lost, nothing extra
    for job_id, job in jobs.items():
        assert (job["run_id"], job["token"]) == submitted[job_id]
        assert job["attempts"] == (2 if job_id == killed else 1), (job_id, job)
    assert b.owner_mark in jobs[killed]["owner"]
    owners = Counter("a" if a.owner_mark in j["owner"] else "b" for j in jobs.values())
    assert owners["a"] >= 2 and owners["b"] >= 2 and owners.total() == 20, owners
    assert "requeued 1 job" in b.output()
    banner = b.output().replace("\n", "")  # the console wraps a long URL
    assert "job store:" in banner and "postgresql:///replicas_" in banner

    # every run's events: one chain, numbered without gaps, one key, verifying
    public_key = EvaluatorSigner.load_or_create(state / "signing_key.pem").public_key_hex
    results: dict[str, EvalResult] = {}
    with b.harness() as h:  # the trusted harness reads every run's jobs, A's runs too
        for job_id in jobs:
            results[job_id] = _result(h, job_id)
    by_run: dict[str, list[EvalResult]] = {}
    for job_id, result in results.items():
        assert result.state == "SUCCEEDED" and result.attempts == jobs[job_id]["attempts"]
        by_run.setdefault(result.run_id, []).append(result)
    for run_id, run_results in by_run.items():
        events = run_results[0].events
        assert [e["sig"]["eval_seq"] for e in events] == list(range(len(events))), run_id
        kinds = [e["kind"] for e in events]
        assert kinds[:2] == ["evaluator_key", "seed_commitment"], kinds
        assert kinds.count("evaluator_key") == 1 and kinds.count("seed_commitment") == 1
        for e in events:
            SignedEvaluatorEvent.model_validate(e).verify(public_key)
        for result in run_results:
            mine = [e for e in events if e["payload"].get("job_id") == result.job_id]
            per_kind = Counter(e["kind"] for e in mine)
            starts = [e["payload"]["attempt"] for e in mine if e["kind"] == "evaluation_started"]
            assert starts == ([1, 2] if result.job_id == killed else [1]), (result.job_id, mine)
            assert per_kind["submission_received"] == 1 and per_kind["result"] == 1
            assert per_kind["validation"] == len(starts)
        # the run's two jobs evaluated the same files on the same seeds: the same result
        assert _same(run_results[0]) == _same(run_results[1]), run_id

    # the killed job's result is the one a lone evaluator gets for that submission and run
    reference = _reference(short_tmp, state, jobs[killed]["run_id"], registry)
    assert reference.state == "SUCCEEDED" and reference.attempts == 1
    assert _same(results[killed]) == _same(reference)
    signed = [_result_payload(reference), _result_payload(results[killed])]
    for key in ("metrics", "episode_returns", "outcomes"):
        assert signed[0][key] == signed[1][key], key
