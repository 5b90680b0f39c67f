"""Cancelling a run's jobs and stopping an evaluator mid-job: prompt, quiet, final.

The harness cancels a run's unfinished jobs when the run ends early (nobody will
read their results), with ``Evaluator.cancel_run`` in-process or ``CloseRun``
over the harness channel. A job the evaluator is running must stop at once (its
workers terminated), end CANCELLED, and never be failed, retried or requeued. A
stopping evaluator must not wait for its job either, and leaves it RUNNING with
its lease to run out, so that a shared evaluator may take it over.

The task here is the inverted pendulum with 400 hidden episodes instead of 10,
and the policy the shipped checkpoint that balances every episode to the end:
a job then runs for several seconds, long enough to be caught running.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ale_robotics.client import AleClient
from ale_robotics.errors import UnauthenticatedError
from ale_robotics.evaluator import Evaluator, EvaluatorConfig, RunningEvaluator, serve
from ale_robotics.model.states import JobState
from ale_robotics.tasks import Registry, default_registry
from ale_robotics.v1 import ale_env_pb2 as pb

TASK_ID = "td3-inverted-pendulum-v1"
RUN = "run-cancel-1"
EPISODES = 400
CHECKPOINT = (
    Path(__file__).resolve().parents[3]
    / "examples"
    / "agents"
    / "checkpoints"
    / TASK_ID
    / "policy.safetensors"
)


@pytest.fixture(scope="module")
def long_registry() -> Registry:
    data = json.loads(default_registry().entry(TASK_ID).raw)
    data["eval"]["episodes"] = EPISODES
    data["eval"]["base_seeds"] = list(range(7101, 7101 + EPISODES))
    return Registry({"ip.json": json.dumps(data).encode()})


def _config(tmp: Path, run_id: str | None = RUN) -> EvaluatorConfig:
    volume = tmp / "vol"
    volume.mkdir(exist_ok=True)
    return EvaluatorConfig(
        tmp / "state",
        volume,
        task_id=TASK_ID,
        run_id=run_id,
        workers=1,
        max_submissions_per_run=10,
        job_lease_s=1.0,
        per_run_tokens=run_id is None,
    )


@pytest.fixture
def make_ev(tmp_path: Path, long_registry: Registry) -> Iterator[Callable[[], Evaluator]]:
    """Started evaluators bound to RUN on one state dir, the policy in the volume."""
    made: list[Evaluator] = []

    def make() -> Evaluator:
        ev = Evaluator(_config(tmp_path), long_registry)
        made.append(ev)
        shutil.copy(CHECKPOINT, tmp_path / "vol" / "policy.safetensors")
        ev.start()
        return ev

    yield make
    for ev in made:
        ev.stop()


def _until(what: str, check: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _rolling_out(ev: Evaluator, job_id: str) -> None:
    """Until the job is RUNNING with episodes done: its workers are busy with it."""

    def busy() -> bool:
        job = ev.store.get(job_id)
        assert job is not None and not job.terminal, job
        return job.state is JobState.RUNNING and job.episodes_done > 0

    _until("the job to be rolling out", busy)


def _episodes_done(ev: Evaluator, job_id: str) -> int:
    job = ev.store.get(job_id)
    assert job is not None
    return job.episodes_done


def _alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        # a terminated worker may linger as a zombie until reaped: that is not running
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:  # it exited between the two looks
            continue
        if state != "Z":
            alive.append(pid)
    return alive


def _kinds(ev: Evaluator, job_id: str) -> list[str]:
    events = [json.loads(e) for e in ev.store.events(RUN)]
    return [e["kind"] for e in events if e["payload"].get("job_id") == job_id]


def test_cancel_run_stops_the_running_job_and_cancels_the_queued_one(
    make_ev: Callable[[], Evaluator], caplog: pytest.LogCaptureFixture
) -> None:
    ev = make_ev()
    running, _ = ev.submit("", "", "", "first")
    queued, _ = ev.submit("", "", "", "second")
    _rolling_out(ev, running.job_id)
    workers = ev.pool.worker_pids()
    assert workers
    caplog.set_level(logging.INFO, logger="ale_robotics")

    cancelled = ev.cancel_run(RUN, "the run was interrupted")
    assert cancelled == [running.job_id, queued.job_id]
    _until("the runner to drop the job", lambda: ev.runner.current_job() is None)
    _until("the workers to stop", lambda: not _alive(workers))
    # Stopped mid-job, not left to finish it (whatever this host's pace): its episodes
    # are not all done (the job had hundreds left when it was cancelled).
    assert _episodes_done(ev, running.job_id) < EPISODES

    time.sleep(2.5)  # over two leases: nothing is requeued or retried meanwhile
    for job_id, attempts in ((running.job_id, 1), (queued.job_id, 0)):
        job = ev.store.get(job_id)
        assert job is not None and job.state is JobState.CANCELLED
        assert job.failure_reason == "the run was interrupted"
        assert job.failure_source.value == "" and job.attempts == attempts
        assert not (ev.state.snapshots / job_id).exists()
        assert _kinds(ev, job_id)[-1] == "result"
    assert _kinds(ev, running.job_id).count("evaluation_started") == 1
    assert "evaluation_started" not in _kinds(ev, queued.job_id)
    result = [json.loads(e) for e in ev.store.events(RUN)][-1]["payload"]
    assert result["state"] == "CANCELLED" and result["reason"] == "the run was interrupted"
    assert ev.result(running.job_id, RUN).state == "CANCELLED"
    # quietly: no error, no traceback, no infrastructure failure
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert "infrastructure" not in caplog.text

    # and the runner goes on with the next job
    later, _ = ev.submit("", "", "", "third")
    _rolling_out(ev, later.job_id)


def test_stop_mid_job_does_not_wait_and_leaves_the_job_to_its_lease(
    make_ev: Callable[[], Evaluator], caplog: pytest.LogCaptureFixture
) -> None:
    ev = make_ev()
    job, _ = ev.submit("", "", "", "first")
    _rolling_out(ev, job.job_id)
    workers = ev.pool.worker_pids()
    caplog.set_level(logging.DEBUG, logger="ale_robotics")
    ev.stop()
    # not waited for: the job is still RUNNING with episodes left (checked below), which
    # it would not be had stop() waited for it, however fast or slow this host
    _until("the workers to stop", lambda: not _alive(workers))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]

    again = make_ev()  # same state dir, same run: its lease must run out first
    left = again.store.get(job.job_id)
    assert left is not None and left.state is JobState.RUNNING and left.attempts == 1
    assert left.episodes_done < EPISODES
    assert left.lease_until > time.time()

    def rerun() -> bool:
        now = again.store.get(job.job_id)
        assert now is not None
        return now.attempts == 2

    _until("the lease to run out and the job to be re-run", rerun)


def _long_job(ev: RunningEvaluator, client: AleClient, token: str) -> str:
    job_id = client.submit(client_token=token)
    _rolling_out(ev.evaluator, job_id)
    return job_id


def test_close_run_on_a_shared_evaluator_cancels_the_runs_jobs(
    short_tmp: Path, long_registry: Registry
) -> None:
    running = serve(
        _config(short_tmp, run_id=None),
        agent_listen=f"unix://{short_tmp}/a.sock",
        harness_listen=f"unix://{short_tmp}/h.sock",
        registry=long_registry,
    )
    try:
        with AleClient(running.harness_address, running.harness_token) as h:
            grant = h.open_run(RUN, TASK_ID)
            shutil.copy(CHECKPOINT, Path(grant.submission_dir) / "policy.safetensors")
            with AleClient(
                running.agent_address, grant.agent_token, submission_dir=grant.submission_dir
            ) as agent:
                first = _long_job(running, agent, "first")
                second = agent.submit(client_token="second")
                closed = h._call(h.stub.CloseRun, pb.CloseRunRequest(run_id=RUN))
                assert (closed.jobs_cancelled, closed.sessions_closed) == (2, 0)
                with pytest.raises(UnauthenticatedError):
                    agent.status(first)
            _until(
                "the runner to drop the job",
                lambda: running.evaluator.runner.current_job() is None,
            )
            # cut short, not finished: episodes were left (whatever this host's pace)
            assert _episodes_done(running.evaluator, first) < EPISODES
            time.sleep(1.5)
            for job_id in (first, second):
                assert h.status(job_id).state == "CANCELLED"
            again = h._call(h.stub.CloseRun, pb.CloseRunRequest(run_id=RUN))
            assert again.jobs_cancelled == 0  # idempotent: nothing left to cancel
    finally:
        running.stop(grace=0.5)


def test_close_run_on_a_single_run_evaluator_cancels_and_revokes_the_token(
    short_tmp: Path, long_registry: Registry
) -> None:
    running = serve(
        _config(short_tmp),
        agent_listen=f"unix://{short_tmp}/a.sock",
        harness_listen=f"unix://{short_tmp}/h.sock",
        registry=long_registry,
    )
    try:
        shutil.copy(CHECKPOINT, short_tmp / "vol" / "policy.safetensors")
        with (
            AleClient(running.harness_address, running.harness_token, run_id=RUN) as h,
            AleClient(
                running.agent_address,
                running.agent_token,
                run_id=RUN,
                submission_dir=short_tmp / "vol",
            ) as agent,
        ):
            job = _long_job(running, agent, "first")
            closed = h._call(h.stub.CloseRun, pb.CloseRunRequest(run_id=RUN))
            assert closed.jobs_cancelled == 1
            assert h.status(job).state == "CANCELLED"
            # the run's own token (minted for it, issue 26) died with CloseRun
            with pytest.raises(UnauthenticatedError):
                agent.status(job)
            _until(
                "the runner to drop the job",
                lambda: running.evaluator.runner.current_job() is None,
                5,
            )
    finally:
        running.stop(grace=0.5)
