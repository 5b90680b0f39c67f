"""The mujoco_rollout backend must reproduce Gymnasium's episodes, and serve its tasks.

Per family and per engine against the ``gymnasium`` kind:
tests/rollouts/mujoco_rollout/test_vectorized.py. Here: the bundled tasks that use
the kind, through the evaluator's pipeline and worker pool.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import random_weights
from safetensors.numpy import load_file

from ale_robotics.evaluator.batch.pipeline import rollout_episodes
from ale_robotics.evaluator.execution.local import LocalExecutor
from ale_robotics.rollouts.mlp import MLPPolicy
from ale_robotics.rollouts.mujoco_rollout import FAMILIES, rollout_vectorized
from ale_robotics.tasks import EnvSpec, Registry, TaskSpec

ROOT = Path(__file__).resolve().parents[3]
CHECKPOINT = ROOT / "examples/agents/checkpoints/td3-inverted-pendulum-v1/policy.safetensors"


def _backend(task: TaskSpec, name: str) -> TaskSpec:
    return task.model_copy(update={"eval": task.eval.model_copy(update={"rollout": name})})


@pytest.fixture(scope="module")
def cheetah(registry: Registry) -> TaskSpec:
    task = registry.get("td3-halfcheetah-vec-v1")
    short = task.env.model_copy(update={"max_episode_steps": 20})
    return task.model_copy(update={"env": EnvSpec.model_validate(short.model_dump())})


@pytest.mark.parametrize("nthread", [1, 2])
def test_matches_gymnasium_step_for_step(cheetah: TaskSpec, nthread: int) -> None:
    """Same episodes through Gymnasium envs (backend 'gymnasium') and through mujoco.rollout.

    Both batch the policy over the same rows, so actions agree given equal
    observations. Over 20 steps the only difference (a cold solver start per
    control step, see the module docs) stays at rounding level; random gaits are
    chaotic enough that longer episodes drift apart, which is why this is short.
    """
    assert cheetah.policy is not None
    w = random_weights(cheetah, seed=7, scale=0.2)
    policy = MLPPolicy(cheetah.policy, w, np.ones(6, np.float32))
    seeds = [(0, 31), (1, 32), (2, 33)]
    got = rollout_vectorized(cheetah, policy, seeds, nthread)
    reference = rollout_episodes(_backend(cheetah, "gymnasium"), w, seeds)
    assert [g.index for g in got] == [r.index for r in reference] == [0, 1, 2]
    for g, ref in zip(got, reference, strict=True):
        assert g.length == ref.length == 20 and not g.terminated
        assert g.ret == pytest.approx(ref.ret, rel=1e-9, abs=1e-9)


def test_results_do_not_depend_on_thread_count(cheetah: TaskSpec) -> None:
    assert cheetah.policy is not None
    long = cheetah.model_copy(
        update={"env": cheetah.env.model_copy(update={"max_episode_steps": 200})}
    )
    w = random_weights(long, seed=9, scale=0.2)
    policy = MLPPolicy(cheetah.policy, w, np.ones(6, np.float32))
    seeds = [(i, 40 + i) for i in range(6)]
    assert rollout_vectorized(long, policy, seeds, 1) == rollout_vectorized(long, policy, seeds, 2)


def test_unknown_family_is_refused(registry: Registry) -> None:
    dmc = registry.get("tdmpc2-cheetah-run-v1")  # a dm_control env, not Gymnasium's MuJoCo
    assert dmc.env.gym_id not in FAMILIES
    with pytest.raises(ValueError, match="no vectorized backend"):
        rollout_vectorized(dmc, lambda o: o, [(0, 1)])


@pytest.mark.parametrize("task_id", ["td3-inverted-pendulum-v2", "td3-walker2d-repro-v2"])
def test_bundled_pendulum_and_walker_tasks_use_the_native_kind(
    registry: Registry, task_id: str
) -> None:
    task = registry.get(task_id)
    assert task.eval.rollout == "mujoco_rollout" and task.env.gym_id in FAMILIES
    assert task.eval.envs_per_shard >= task.eval.episodes  # one shard: all envs together


def test_pendulum_task_is_the_gymnasium_kinds_to_the_bit(registry: Registry) -> None:
    """The shipped checkpoint on the task's real protocol (1000 steps): the pendulum never
    touches a joint limit, so the native kind's episodes are Gymnasium's exactly, and the
    task's score did not change when it moved to this kind."""
    task = registry.get("td3-inverted-pendulum-v2")
    weights = load_file(str(CHECKPOINT))
    seeds = [(i, 500 + i) for i in range(4)]
    native = rollout_episodes(task, weights, seeds)
    gym = rollout_episodes(_backend(task, "gymnasium"), weights, seeds)
    assert native == gym and all(o.ret == 1000.0 and o.length == 1000 for o in native)


def test_pool_results_do_not_depend_on_the_worker_count(registry: Registry) -> None:
    """Walker episodes that end at different steps (small random weights: most fall just
    before the step limit), in shards of 2 (a fixed layout), run by one worker and by two:
    identical outcomes."""
    task = registry.get("td3-walker2d-repro-v2")
    small = task.model_copy(
        update={
            "env": task.env.model_copy(update={"max_episode_steps": 57}),
            "eval": task.eval.model_copy(update={"envs_per_shard": 2, "threads": 1}),
        }
    )
    w = random_weights(small, seed=8, scale=0.02)
    seeds = list(range(60, 65))
    runs = []
    for workers in (1, 2):
        pool = LocalExecutor(workers=workers)
        try:
            runs.append(pool.run(small, w, seeds))
        finally:
            pool.shutdown()
    assert runs[0] == runs[1]
    assert [o.index for o in runs[0]] == list(range(5))
    lengths = {o.length for o in runs[0]}
    assert len(lengths) > 1 and any(o.terminated for o in runs[0]), lengths
