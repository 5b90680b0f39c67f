"""A batch job's floor: the contract's policy with zero weights, on the job's own hidden seeds.

Real evaluator, real gRPC, real MuJoCo. The floor must be the same measurement of doing
nothing as a plain Gymnasium loop playing the null action on the run's hidden seeds,
signed in the result event, independent of the submission, absent (with a note) for a
kind without a null submission, and never a reason for the job to fail.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from helpers import random_weights
from safetensors.numpy import save_file

from ale_robotics.client import AleClient
from ale_robotics.evaluator import RunningEvaluator
from ale_robotics.evaluator.batch.floor import measure_floor
from ale_robotics.evaluator.execution import WorkerCrashed
from ale_robotics.model.result import EvalResult
from ale_robotics.model.rollout_kind import Artifact
from ale_robotics.seeds import derive_seeds
from ale_robotics.tasks import TaskSpec, default_registry
from ale_robotics.v1 import ale_env_pb2 as pb

RUN = "run-test-1"


def _submit(ev: RunningEvaluator, task: TaskSpec, seed: int) -> EvalResult:
    volume = ev.evaluator.config.submission_volume
    assert volume is not None
    path = volume / "policy.safetensors"
    path.unlink(missing_ok=True)
    save_file(random_weights(task, seed=seed, scale=0.3), str(path))
    with AleClient(
        ev.agent_address, ev.agent_token, task_id=task.id, run_id=RUN, submission_dir=volume
    ) as c:
        job = c.submit()
        c.wait(job, timeout_s=120)
    with AleClient(ev.harness_address, ev.harness_token, run_id=RUN) as h:
        r = h._call(h.stub.GetEvalResult, pb.GetEvalResultRequest(job_id=job))
    return EvalResult.model_validate_json(r.eval_result_json)


def _null_returns(task: TaskSpec, seeds: list[int]) -> list[float]:
    """The reference: one Gymnasium env per episode, the null action (0) every step."""
    out = []
    for seed in seeds:
        env = gym.make(task.env.gym_id, max_episode_steps=task.env.max_episode_steps)
        env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            _, r, term, trunc, _ = env.step(np.zeros(env.action_space.shape, np.float32))
            total += float(r)
            done = term or trunc
        out.append(total)
    return out


def test_batch_floor_is_the_null_action_on_the_hidden_seeds_and_signed(
    evaluator: RunningEvaluator, task: TaskSpec
) -> None:
    first = _submit(evaluator, task, seed=1)
    second = _submit(evaluator, task, seed=2)
    assert first.state == second.state == "SUCCEEDED"
    assert first.floor is not None and first.floor_note == ""
    assert first.floor.policy == "zero_output"
    seeds = [s.value for s in derive_seeds(task.eval.base_seeds, RUN, evaluator.evaluator._secret)]
    assert first.floor.episode_returns == pytest.approx(_null_returns(task, seeds), rel=1e-9)
    assert first.floor.metrics["mean_return"] == pytest.approx(
        float(np.mean(first.floor.episode_returns))
    )
    # the floor is the task's and the run's, not the submission's
    assert second.floor == first.floor
    assert first.metrics != second.metrics
    # signed: the run's result events carry the same floor
    events = evaluator.evaluator.ledger.events(RUN)
    signed = [e["payload"]["floor"] for e in events if e["kind"] == "result"]
    assert signed == [first.floor.model_dump(mode="json")] * 2


def test_no_floor_for_a_kind_without_a_null_submission() -> None:
    planner = default_registry().get("panda-planner-config-v1")
    floor, note = measure_floor(planner, lambda _: pytest.fail("nothing should run"))
    assert floor is None and "no null version" in note


@pytest.mark.parametrize(
    "failure",
    [WorkerCrashed("worker 1 died"), TimeoutError("past the deadline")],
)
def test_a_floor_that_fails_is_a_note_not_a_failure(task: TaskSpec, failure: Exception) -> None:
    def run(_: Artifact) -> list:
        raise failure

    floor, note = measure_floor(task, run)
    assert floor is None and note == f"the floor could not be measured: {failure}"
