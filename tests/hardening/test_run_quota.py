"""max_submissions holds however the jobs fail: no failure is a free re-draw.

Issue 12, point 4: NaN submissions were infrastructure failures, and those did
not count against the quota, so a 7th submission SUCCEEDED under
``max_submissions 3``. Now a NaN is the submission's failure (it counts), and of
the infrastructure-failed jobs only ``free_infra_failures_per_run`` (1) are free;
re-runs after infrastructure failures are bounded per run
(``max_infra_retries_per_run``, 3) as well as per job (``max_attempts``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hardening_helpers import TASK_ID, official, wait, write_policy
from nonfinite_helpers import overflow_weights

from ale_robotics.client import AleClient
from ale_robotics.errors import ResourceExhaustedError
from ale_robotics.evaluator import EvaluatorConfig, RunningEvaluator, serve
from ale_robotics.evaluator.execution.base import WorkerLimits
from ale_robotics.tasks import Registry, TaskSpec

RUN = "run-quota-1"
CHEETAH_VEC = "td3-halfcheetah-vec-v1"


@contextlib.contextmanager
def _evaluator(
    tmp: Path, registry: Registry, task_id: str, **config: object
) -> Iterator[tuple[RunningEvaluator, AleClient]]:
    volume = tmp / "vol"
    volume.mkdir(exist_ok=True)
    ev = serve(
        EvaluatorConfig(
            tmp / "state",
            volume,
            task_id=task_id,
            run_id=RUN,
            workers=1,
            max_submissions_per_run=3,
            **config,  # type: ignore[arg-type]
        ),
        agent_listen=f"unix://{tmp}/a.sock",
        harness_listen=f"unix://{tmp}/h.sock",
        registry=registry,
    )
    client = AleClient(
        ev.agent_address, ev.agent_token, task_id=task_id, run_id=RUN, submission_dir=volume
    )
    try:
        yield ev, client
    finally:
        client.close()
        ev.stop(grace=0.5)


def test_nan_submissions_use_up_the_quota(short_tmp: Path, registry: Registry) -> None:
    """Three NaN submissions (the native vectorized task), three verdicts; the 4th is refused."""
    cheetah = registry.get(CHEETAH_VEC)
    with _evaluator(short_tmp, registry, CHEETAH_VEC, smoke_episodes=1) as (ev, c):
        write_policy(short_tmp / "vol", overflow_weights(cheetah))
        for i in range(3):
            st = wait(c, c.submit(client_token=f"nan-{i}"), timeout_s=120)
            assert (st.state, st.failure_source) == ("FAILED", "submission"), st
        with pytest.raises(ResourceExhaustedError, match="max_submissions"):
            c.submit(client_token="nan-3")
        jobs = [ev.evaluator.store.by_token(RUN, f"nan-{i}") for i in range(3)]
        assert [j.attempts for j in jobs if j is not None] == [1, 1, 1]  # never retried


def test_infrastructure_failures_cannot_buy_evaluations(
    short_tmp: Path, registry: Registry, task: TaskSpec
) -> None:
    """Workers that cannot start (64 MiB address space) fail every attempt.

    Quota 3 + 1 free infrastructure failure: four jobs are accepted, the fifth is
    RESOURCE_EXHAUSTED; the run's re-runs stop at 3 in all (job attempts 3, 2, 1, 1),
    not 3 per job. Then the workers are repaired: a NaN submission still fails as
    the submission's, and no job at all is left to submit.
    """
    limits = WorkerLimits(address_space_bytes=64 * 1024**2)
    with _evaluator(short_tmp, registry, TASK_ID, max_attempts=3, worker_limits=limits) as (
        ev,
        c,
    ):
        write_policy(short_tmp / "vol", overflow_weights(task))
        states = []
        for i in range(3):
            st = wait(c, c.submit(client_token=f"infra-{i}"), timeout_s=120)
            states.append((st.state, st.failure_source))
        assert states == [("FAILED", "infrastructure")] * 3
        assert "used its 3 infrastructure retries" in st.failure_reason
        # workers that can start again: the 4th (the last the quota allows) is evaluated
        ev.evaluator.pool.limits = WorkerLimits()
        last = wait(c, c.submit(client_token="nan"), timeout_s=120)
        assert (last.state, last.failure_source) == ("FAILED", "submission")
        with pytest.raises(ResourceExhaustedError, match="beyond the first 1"):
            c.submit(client_token="one-more")
        attempts = [
            official(ev.harness_address, ev.harness_token, job.job_id).attempts
            for job in (ev.evaluator.store.by_token(RUN, t) for t in ("infra-0", "infra-1"))
            if job is not None
        ]
        assert attempts == [3, 2]  # 2 + 1 re-runs: the run's 3 retries, then none
        assert ev.evaluator.store.retries_used(RUN) == 3
