"""Non-finite policy output is caught where it is produced, and named precisely.

Unit level, with real MuJoCo envs: the gymnasium rollout and the native
``mujoco.rollout`` backend check every action before it is stepped and every
reward after; the fault names the episode and step, pickles through the worker
pool unchanged, and leaves the pool's workers alive. Also the quota and retry
counts of the job store, and the metric backstop.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from ale_robotics.evaluator.batch.pipeline import rollout_episodes
from ale_robotics.evaluator.execution.local import LocalExecutor
from ale_robotics.evaluator.results.metrics import NonFiniteMetric, compute
from ale_robotics.evaluator.store import SqliteJobStore
from ale_robotics.model.episode import EpisodeOutcome, PolicyFault, check_finite
from ale_robotics.model.states import FailureSource, JobState
from ale_robotics.rollouts.gymnasium.kind import _envs
from ale_robotics.rollouts.mujoco_rollout import rollout_vectorized
from ale_robotics.tasks import Registry, TaskSpec

CHEETAH_VEC = "td3-halfcheetah-vec-v1"


def _overflow(task: TaskSpec) -> dict[str, np.ndarray]:
    """Finite weights, NaN actions: ReLU(3e38) * 3e38 = inf in two l2 units, inf - inf out."""
    assert task.contract is not None
    w = {r.key: np.zeros(r.shape, np.float32) for r in task.contract.tensors}
    w["l1.bias"][0] = 3e38
    w["l2.weight"][0, 0] = 3e38
    w["l2.weight"][1, 0] = 3e38
    w["l3.weight"][0, 0] = 1.0
    w["l3.weight"][0, 1] = -1.0
    return w


def test_check_finite_names_the_first_bad_row() -> None:
    check_finite("action", np.zeros((3, 2), np.float32), [4, 5, 6], 9)  # all finite: no fault
    batch = np.array([[0.0, 1.0], [0.5, np.inf], [np.nan, 0.0]], np.float32)
    with pytest.raises(PolicyFault) as info:
        check_finite("action", batch, [4, 5, 6], 9)
    assert (info.value.episode, info.value.step, info.value.value) == (5, 9, "inf")
    with pytest.raises(PolicyFault, match=r"reward non-finite \(-inf\) in episode 2 at step 1"):
        check_finite("reward", np.array([0.0, 1.0, -np.inf]), [0, 1, 2], 1)


def test_policy_fault_pickles_and_keeps_the_where_out_of_the_public_reason() -> None:
    fault = PolicyFault("action", "nan", 3, 17)
    assert fault.reason == (
        "the policy produced a non-finite action (nan) in episode 3 at step 17: "
        "the submission must output finite actions"
    )
    assert "episode 3" not in fault.public_reason and "step 17" not in fault.public_reason
    again = pickle.loads(pickle.dumps(fault))
    assert (again.reason, again.public_reason) == (fault.reason, fault.public_reason)


def test_gymnasium_rollout_stops_before_stepping_a_nan_action(task: TaskSpec) -> None:
    gym_task = task.model_copy(
        update={"eval": task.eval.model_copy(update={"rollout": "gymnasium"})}
    )  # the pendulum task itself runs on the mujoco_rollout kind
    with pytest.raises(PolicyFault) as info:
        rollout_episodes(gym_task, _overflow(gym_task), [(2, 11), (3, 12)])
    assert (info.value.what, info.value.episode, info.value.step) == ("action", 2, 1)
    # the NaN never reached the simulator: the envs were reset and not stepped
    assert [env._elapsed_steps for env in _envs(gym_task, 2)] == [0, 0]


def test_process_pool_passes_the_fault_on_and_keeps_its_workers(task: TaskSpec) -> None:
    pool = LocalExecutor(1)
    try:
        with pytest.raises(PolicyFault, match="in episode 0 at step 1"):
            pool.run(task, _overflow(task), [1, 2, 3])
        before = pool.worker_pids()
        assert len(before) == 1  # not treated as a crash: the worker was not replaced
        zero = {k: np.zeros_like(v) for k, v in _overflow(task).items()}
        assert len(pool.run(task, zero, [1, 2])) == 2
        assert pool.worker_pids() == before
    finally:
        pool.shutdown()


def _nan_at(row: int, step: int) -> Callable[[npt.NDArray[np.floating]], npt.NDArray[np.float32]]:
    """A zero policy except for one NaN action (the backend's policy is any callable)."""
    calls = 0

    def policy(obs: npt.NDArray[np.floating]) -> npt.NDArray[np.float32]:
        nonlocal calls
        calls += 1
        out = np.zeros((len(obs), 6), np.float32)
        if calls == step:
            out[row, 2] = np.nan
        return out

    return policy


def test_vectorized_backend_names_the_episode_and_step(registry: Registry) -> None:
    cheetah = registry.get(CHEETAH_VEC)
    with pytest.raises(PolicyFault) as info:
        rollout_vectorized(cheetah, _nan_at(1, 3), [(5, 100), (7, 101)])
    assert (info.value.what, info.value.value, info.value.episode, info.value.step) == (
        "action",
        "nan",
        7,
        3,
    )


def test_vectorized_backend_refuses_a_non_finite_reward(
    registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finite but huge actions: MuJoCo clamps the control, the control cost overflows."""
    monkeypatch.chdir(tmp_path)  # MuJoCo logs its "huge value in CTRL" warning to ./MUJOCO_LOG.TXT
    cheetah = registry.get(CHEETAH_VEC)

    def huge(obs: npt.NDArray[np.floating]) -> npt.NDArray[np.float32]:
        return np.full((len(obs), 6), 3e38, np.float32)

    with pytest.raises(PolicyFault) as info:
        rollout_vectorized(cheetah, huge, [(0, 100)])
    assert (info.value.what, info.value.value, info.value.step) == ("reward", "-inf", 1)


def test_non_finite_metric_names_the_metric() -> None:
    with pytest.raises(NonFiniteMetric) as info:
        compute([EpisodeOutcome(0, float("inf"), 1, True)])
    assert info.value.name == "mean_return" and math.isinf(info.value.value)


def test_quota_counts_infrastructure_failures_beyond_the_allowance(tmp_path: Path) -> None:
    store = SqliteJobStore(tmp_path / "jobs.sqlite3")
    try:
        ids = []
        for token in ("a", "b", "c", "d"):
            job, _ = store.create(
                run_id="r1", task_id="t", client_token=token, episodes_total=1, files={}
            )
            ids.append(job.job_id)
        for job_id in ids[:3]:
            store.finish(job_id, JobState.FAILED, failure_source=FailureSource.INFRASTRUCTURE)
        store.finish(ids[3], JobState.FAILED, failure_source=FailureSource.SUBMISSION)
        assert store.quota_used("r1", 1) == 1 + 2  # the submission's failure + 2 beyond 1 free
        assert store.quota_used("r1", 0) == 4
        assert store.quota_used("r1", 5) == 1
        assert store.quota_used("other", 1) == 0
    finally:
        store.close()


def test_retries_used_sums_every_attempt_after_the_first(tmp_path: Path) -> None:
    store = SqliteJobStore(tmp_path / "jobs.sqlite3")
    try:
        for token in ("a", "b"):
            store.create(run_id="r1", task_id="t", client_token=token, episodes_total=1, files={})
        assert store.retries_used("r1") == 0  # never attempted
        first = store.claim_next()
        assert first is not None
        store.requeue(first.job_id, "crash")
        store.claim_next()  # attempt 2 of the first job
        assert store.retries_used("r1") == 1
        store.claim_next()  # attempt 1 of the second: not a re-run
        assert store.retries_used("r1") == 1
    finally:
        store.close()
