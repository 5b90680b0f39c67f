"""The ``mjx`` kind computes the C kind's episodes, to a tolerance pinned here (needs the extra).

MJX runs in float32 (JAX's default, the GPU's native width); the C kind (``mujoco_rollout``)
in float64. Compared trajectory against trajectory, the two drift apart: a random-weight
HalfCheetah gait is chaotic (contacts), and the float32 difference of a single step
(~1e-4 on an observation) grows about tenfold every three or four steps. So the per-step
comparison is *teacher-forced*: every state of the C kind's episodes (its reset states and
its cold-started solver, ``qacc_warmstart = 0`` per control step) is the start of one MJX
control step, and that step's action, observation and reward must match the C kind's at
every one of 50 steps. Whole episodes are compared where they stay close (short ones), and
in float64 (``x64``, slow) the same per-step check holds to 1e-9, which pins the physics
and the formulas, not just their rounding.

Compile times dominate (XLA on CPU, 10-40 s per program on two cores), so the tests share
programs: one per (family, batch size, recorded or not), cached by the kind for the
process. (Do not cut them with ``XLA_FLAGS=--xla_backend_optimization_level=0
--xla_llvm_disable_expensive_passes=true``: with those, one lane of a vmapped rollout
came out wrong, its solver result dropped, in jaxlib 0.10.2 on this CPU.)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from helpers import random_weights
from mjx_helpers import CHEETAH, PENDULUM, WALKER, hopper_as, task_as

pytest.importorskip(
    "jax", reason="the 'mjx' extra is not installed (pip install -e '.[mjx]'; CI installs it)"
)
pytest.importorskip(
    "mujoco.mjx",
    reason="the 'mjx' extra is not installed (pip install -e '.[mjx]'; CI installs it)",
)

from ale_robotics.envs.make import make_env
from ale_robotics.evaluator.batch.pipeline import rollout_episodes
from ale_robotics.evaluator.execution.local import LocalExecutor
from ale_robotics.model.episode import PolicyFault
from ale_robotics.rollouts.mjx import FAMILY_IDS
from ale_robotics.rollouts.mjx import rollout as mjx_rollout
from ale_robotics.rollouts.mjx.families import FAMILIES
from ale_robotics.rollouts.mlp import MLPPolicy
from ale_robotics.tasks import TaskSpec

STEPS = 50
SEEDS = [100, 101, 102, 103]

# Pinned tolerances of one float32 MJX control step against the C kind's float64 one, from
# the C kind's state (measured: action 1.2e-5, observation 5e-4 absolute / 2.2e-4 relative
# to 1 + |obs|, reward 5.3e-6, over 2 weight draws x 4 episodes x 50 steps; ~10x margin).
ACTION_TOL = 1e-4
OBS_REL_TOL = 2e-3
REWARD_TOL = 5e-5


def _c_kind_steps(task: TaskSpec, weights: dict[str, Any], seeds: list[int]) -> dict[str, Any]:
    """Every step of the C kind's episodes, from Gymnasium envs stepped as the C kind steps
    them: in lockstep, the policy batched over the same rows (a matmul rounds differently
    for another batch size), the solver started cold each control step. Per step: the state
    before, the action, and what ``step`` returned, ``[episode * steps + step]``. (That this
    *is* the C kind is checked by :func:`test_the_reference_is_the_c_kind`.)"""
    assert task.policy is not None
    envs: list[Any] = [make_env(task.env, time_limit=False).unwrapped for _ in seeds]
    policy = MLPPolicy(task.policy, weights, envs[0].action_space.high)
    obs = np.stack([env.reset(seed=seed)[0] for env, seed in zip(envs, seeds, strict=True)])
    steps = task.env.max_episode_steps
    shape = (len(seeds), steps)
    rows = {
        "qpos": np.zeros((*shape, envs[0].model.nq)),
        "qvel": np.zeros((*shape, envs[0].model.nv)),
        "action": np.zeros((*shape, envs[0].model.nu), np.float32),
        "obs": np.zeros((*shape, obs.shape[1])),
        "reward": np.zeros(shape),
    }
    for t in range(steps):
        actions = policy(obs)
        for i, env in enumerate(envs):
            rows["qpos"][i, t] = env.data.qpos
            rows["qvel"][i, t] = env.data.qvel
            env.data.qacc_warmstart[:] = 0
            obs[i], rows["reward"][i, t], *_ = env.step(actions[i])
            rows["action"][i, t] = actions[i]
            rows["obs"][i, t] = obs[i]
    for env in envs:
        env.close()
    return {k: v.reshape(len(seeds) * steps, *v.shape[2:]) for k, v in rows.items()}


def _one_step_each(
    task: TaskSpec, weights: dict[str, Any], ref: dict[str, Any], x64: bool = False
) -> mjx_rollout.MjxBatch:
    """One recorded MJX control step from each of the reference's states, all in one batch."""
    assert task.policy is not None
    env: Any = make_env(task.env, time_limit=False).unwrapped
    try:
        return mjx_rollout.rollout_batch(
            env,
            task.env.gym_id,
            task.policy,
            weights,
            env.action_space.high,
            ref["qpos"],
            ref["qvel"],
            1,
            record=True,
            x64=x64,
        )
    finally:
        env.close()


@pytest.fixture(scope="module")
def cheetah() -> TaskSpec:
    return task_as(CHEETAH, "mjx", steps=STEPS)


def _rel(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> float:
    return float(np.max(np.abs(a - b) / (1.0 + np.abs(b))))


def test_every_family_of_the_kind_has_a_jax_step() -> None:
    assert set(FAMILIES) == FAMILY_IDS


def test_the_reference_is_the_c_kind(cheetah: TaskSpec) -> None:
    """The teacher-forced reference below is the C kind's own episode, step for step."""
    weights = random_weights(cheetah, seed=7, scale=0.2)
    ref = _c_kind_steps(cheetah, weights, SEEDS)
    c_kind = task_as(CHEETAH, "mujoco_rollout", steps=STEPS)
    out = rollout_episodes(c_kind, weights, list(enumerate(SEEDS)))
    returns = ref["reward"].reshape(len(SEEDS), STEPS).sum(axis=1)
    assert [o.ret for o in out] == pytest.approx(returns, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("weight_seed", [7, 8])
def test_each_step_matches_the_c_kind(cheetah: TaskSpec, weight_seed: int) -> None:
    """Action, observation and reward of each of 4 x 50 control steps, float32 vs the C kind."""
    weights = random_weights(cheetah, seed=weight_seed, scale=0.2)
    ref = _c_kind_steps(cheetah, weights, SEEDS)
    got = _one_step_each(cheetah, weights, ref)
    assert got.trace is not None and got.fault is None
    assert got.trace.obs.dtype == np.float32  # the kind's precision, not x64
    assert np.max(np.abs(got.trace.action[:, 0] - ref["action"])) <= ACTION_TOL
    assert _rel(got.trace.obs[:, 0], ref["obs"]) <= OBS_REL_TOL
    assert np.max(np.abs(got.trace.reward[:, 0] - ref["reward"])) <= REWARD_TOL
    # the recorded step is the one the kind returns as the episode's return and length
    assert np.array_equal(got.returns, got.trace.reward[:, 0].astype(np.float64))
    assert np.all(got.lengths == 1) and not got.terminated.any()


@pytest.mark.slow
def test_each_step_is_mujoco_s_in_float64(cheetah: TaskSpec) -> None:
    """Traced in float64 the same steps are MuJoCo's to 1e-9: the physics, the cold warm
    start, the frame skip and the formulas are the C kind's, not just close in float32.

    The policy stays float32 (the contract's) in both, and XLA's dot rounds differently
    from numpy's BLAS (<= 1.2e-5), so each step is replayed in MuJoCo with MJX's action.
    """
    weights = random_weights(cheetah, seed=7, scale=0.2)
    ref = _c_kind_steps(cheetah, weights, SEEDS)
    got = _one_step_each(cheetah, weights, ref, x64=True)
    assert got.trace is not None and got.trace.obs.dtype == np.float64
    assert np.max(np.abs(got.trace.action[:, 0] - ref["action"])) <= ACTION_TOL
    env: Any = make_env(cheetah.env, time_limit=False).unwrapped
    obs_err, reward_err = 0.0, 0.0
    for row in range(len(ref["qpos"])):
        env.set_state(ref["qpos"][row], ref["qvel"][row])
        env.data.qacc_warmstart[:] = 0
        obs, reward, *_ = env.step(got.trace.action[row, 0])
        obs_err = max(obs_err, float(np.max(np.abs(obs - got.trace.obs[row, 0]))))
        reward_err = max(reward_err, abs(float(reward) - float(got.trace.reward[row, 0])))
    env.close()
    assert obs_err <= 1e-9
    # the control cost is a float32 sum on both sides, summed in another order (<= 1 ulp)
    assert reward_err <= 1e-6


@pytest.mark.slow  # MJX against the C kind on whole episodes: about 30 s on two cores
def test_short_episodes_match_the_c_kind(cheetah: TaskSpec) -> None:
    """Whole episodes through the pipeline, as an evaluation runs them: 5-step returns agree
    (measured 2e-4; the gap grows with the horizon, see the module docstring)."""
    mjx_task = task_as(CHEETAH, "mjx", steps=5)
    c_task = task_as(CHEETAH, "mujoco_rollout", steps=5)
    plan = list(enumerate(range(200, 208)))
    for weight_seed in (1, 2, 3):
        weights = random_weights(mjx_task, seed=weight_seed, scale=0.2)
        got = rollout_episodes(mjx_task, weights, plan)
        ref = rollout_episodes(c_task, weights, plan)
        assert [(o.index, o.length, o.terminated) for o in got] == [
            (o.index, o.length, o.terminated) for o in ref
        ]
        assert [o.ret for o in got] == pytest.approx([o.ret for o in ref], abs=2e-3)


def test_results_are_repeatable_and_reported(cheetah: TaskSpec) -> None:
    task = task_as(CHEETAH, "mjx", steps=5)
    weights = random_weights(task, seed=4, scale=0.2)
    plan = list(enumerate(range(200, 208)))
    seen: list[int] = []
    first = rollout_episodes(task, weights, plan, lambda o: seen.append(o.index))
    assert first == rollout_episodes(task, weights, plan)
    assert sorted(seen) == list(range(8))


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_a_non_finite_action_is_the_c_kind_s_policy_fault() -> None:
    """Weights that overflow float32 make NaN actions: the same fault (what, episode, step)
    as the C kind raises, not a NaN return."""
    mjx_task = task_as(CHEETAH, "mjx", steps=5)
    weights = random_weights(mjx_task, seed=5, scale=0.2)
    weights["l1.weight"] = weights["l1.weight"] * np.float32(1e37)  # inf, then inf - inf
    plan = list(enumerate(range(200, 208)))
    with pytest.raises(PolicyFault) as ref:
        rollout_episodes(task_as(CHEETAH, "mujoco_rollout", steps=5), weights, plan)
    with pytest.raises(PolicyFault) as got:
        rollout_episodes(mjx_task, weights, plan)
    assert (got.value.what, got.value.episode, got.value.step) == (
        ref.value.what,
        ref.value.episode,
        ref.value.step,
    )
    assert str(got.value) == str(ref.value)


@pytest.mark.slow  # two MJX batches to their ends: about 45 s on two cores
@pytest.mark.parametrize(("weight_seed", "scale"), [(4, 0.05), (5, 0.01)])
def test_finished_episodes_leave_the_batch_as_in_gymnasium(weight_seed: int, scale: float) -> None:
    """InvertedPendulum terminates: lengths, returns and the terminated flag are Gymnasium's
    (reward 1 per step, so a length off by one would show), for episodes of 13-35 steps."""
    mjx_task = task_as(PENDULUM, "mjx")
    weights = random_weights(mjx_task, seed=weight_seed, scale=scale)
    plan = list(enumerate(range(20, 36)))
    got = rollout_episodes(mjx_task, weights, plan)
    ref = rollout_episodes(task_as(PENDULUM, "gymnasium"), weights, plan)
    assert got == ref
    assert all(o.terminated for o in got) and len({o.length for o in got}) > 1


@pytest.mark.slow
def test_runs_in_the_evaluator_s_worker_pool() -> None:
    """In a spawned, limited, network-isolated worker (the default WorkerLimits) the kind
    returns what it returns in-process. On this CPU that fits the 4 GiB RLIMIT_AS (XLA's
    CPU client peaks near 2.2 GiB of address space on 2 cores, and grows with the cores);
    with CUDA it would not, which is what the kind's ``worker_needs`` declares."""
    task = task_as(CHEETAH, "mjx", steps=5)
    weights = random_weights(task, seed=6, scale=0.2)
    pool = LocalExecutor(workers=1)
    try:
        got = pool.run(task, weights, list(range(300, 304)))
    finally:
        pool.shutdown()
    assert got == rollout_episodes(task, weights, list(enumerate(range(300, 304))))


@pytest.mark.slow
@pytest.mark.parametrize("task_id", [WALKER, "hopper"])
def test_falling_walkers_end_when_the_c_kind_s_do(task_id: str) -> None:
    """Walker2d and Hopper terminate when unhealthy: over random-weight episodes that fall
    (Walker2d: after 69-87 steps) the lengths are the C kind's, and the returns within 0.1
    (measured 7e-2 on Walker2d; float32 contacts drift, see the module docstring)."""
    mjx_task = hopper_as("mjx") if task_id == "hopper" else task_as(task_id, "mjx")
    c_task = (
        hopper_as("mujoco_rollout") if task_id == "hopper" else task_as(task_id, "mujoco_rollout")
    )
    plan = list(enumerate(range(50, 58)))
    for weight_seed, scale in ((1, 0.05), (2, 0.01)):
        weights = random_weights(mjx_task, seed=weight_seed, scale=scale)
        got = rollout_episodes(mjx_task, weights, plan)
        ref = rollout_episodes(c_task, weights, plan)
        assert [(o.index, o.length, o.terminated) for o in got] == [
            (o.index, o.length, o.terminated) for o in ref
        ]
        assert all(o.terminated for o in got)
        assert [o.ret for o in got] == pytest.approx([o.ret for o in ref], abs=0.1)
