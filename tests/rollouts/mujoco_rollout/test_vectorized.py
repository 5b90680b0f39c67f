"""The native batch rollout against the ``gymnasium`` kind, for every family and both engines.

The reference is the real ``gymnasium`` kind (``GymnasiumKind.run_shard``) with
the same policy callable. The ``mjdata`` engine must give its outcomes to the bit
(and show the policy the very same observation batches, as episodes leave the
batch); the ``rollout`` engine too wherever no constraint is active (the
pendulum with the shipped TD3 checkpoint), and otherwise the same episode
lengths with returns within the cold-solver difference the module documents.
Both must give identical results for any thread count.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from safetensors.numpy import load_file

import ale_robotics.rollouts.gymnasium.kind as gym_kind
from ale_robotics.envs.make import make_env
from ale_robotics.evaluator.batch.pipeline import rollout_episodes
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.rollouts.mlp import MLPPolicy
from ale_robotics.rollouts.mujoco_rollout.families import FAMILIES
from ale_robotics.rollouts.mujoco_rollout.vectorized import (
    _RolloutEngine,
    engine_for,
    rollout_on,
    rollout_vectorized,
)
from ale_robotics.tasks import EnvSpec, Registry, TaskSpec

ROOT = Path(__file__).resolve().parents[3]
CHECKPOINT = ROOT / "examples/agents/checkpoints/td3-inverted-pendulum-v1/policy.safetensors"
SEEDS = [(0, 101), (1, 102), (2, 103), (3, 104), (4, 105)]
HORIZON = {"Reacher-v5": 50}

Policy = Callable[[npt.NDArray[np.floating]], npt.NDArray[np.float32]]


class Recorder:
    """A small random tanh MLP that records every observation batch it is shown."""

    def __init__(self, obs_dim: int, act_dim: int, high: npt.ArrayLike, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.w1 = (rng.standard_normal((obs_dim, 32)) * 0.3).astype(np.float32)
        self.w2 = (rng.standard_normal((32, act_dim)) * 0.3).astype(np.float32)
        self.high = np.asarray(high, dtype=np.float32)
        self.seen: list[npt.NDArray[np.floating]] = []

    def __call__(self, obs: npt.NDArray[np.floating]) -> npt.NDArray[np.float32]:
        self.seen.append(np.array(obs))
        out: npt.NDArray[np.float32] = np.tanh(np.tanh(obs.astype(np.float32) @ self.w1) @ self.w2)
        return out * self.high


def task_for(registry: Registry, gym_id: str, steps: int | None = None) -> TaskSpec:
    """A batch task on ``gym_id`` (the walker task's protocol, the env swapped)."""
    base = registry.get("td3-walker2d-repro-v2")
    env = EnvSpec(gym_id=gym_id, max_episode_steps=steps or HORIZON.get(gym_id, 120))
    return base.model_copy(update={"env": env})


def recorder_for(task: TaskSpec, seed: int = 0) -> Recorder:
    env = make_env(task.env)
    try:
        return Recorder(
            env.observation_space.shape[0], env.action_space.shape[0], env.action_space.high, seed
        )
    finally:
        env.close()


def gymnasium_kind(
    task: TaskSpec, policy: Policy, seeds: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch
) -> list[EpisodeOutcome]:
    """The ``gymnasium`` kind's shard with ``policy`` (any callable) instead of the MLP."""
    with monkeypatch.context() as m:
        m.setattr(gym_kind, "policy_for", lambda task, artifact, high: policy)
        return gym_kind.GymnasiumKind().run_shard(task, {}, seeds)


def key(outcomes: list[EpisodeOutcome]) -> list[tuple[int, float, int, bool]]:
    return [(o.index, o.ret, o.length, o.terminated) for o in outcomes]


@pytest.mark.parametrize("gym_id", sorted(FAMILIES))
def test_mjdata_engine_is_the_gymnasium_kind_to_the_bit(
    registry: Registry, gym_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = task_for(registry, gym_id)
    ours, theirs = recorder_for(task), recorder_for(task)
    got = rollout_vectorized(task, ours, SEEDS, engine="mjdata")
    want = gymnasium_kind(task, theirs, SEEDS, monkeypatch)
    assert key(got) == key(want)
    # the same observation batches, shrinking the same way as episodes end
    assert [o.shape for o in ours.seen] == [o.shape for o in theirs.seen]
    assert all(np.array_equal(a, b) for a, b in zip(ours.seen, theirs.seen, strict=True))
    if gym_id in {"Hopper-v5", "Walker2d-v5", "InvertedDoublePendulum-v5"}:
        assert any(o.terminated for o in got), "random weights end these episodes early"


@pytest.mark.parametrize("gym_id", sorted(g for g, f in FAMILIES.items() if not f.reads_derived))
def test_rollout_engine_matches_the_gymnasium_kind(
    registry: Registry, gym_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same lengths and terminations; returns within the cold-solver difference. A random
    cheetah gait is chaotic enough to amplify it to percents after ~100 steps (measured:
    1e-12 at 20 steps, 1e-8 at 50, 0.25 at 120), so its episodes are cut at 40 here; the
    hopper and walker fall (terminate) long before."""
    task = task_for(registry, gym_id, steps=40 if gym_id == "HalfCheetah-v5" else None)
    assert engine_for(FAMILIES[gym_id]) == "rollout"
    got = rollout_vectorized(task, recorder_for(task), SEEDS)
    want = gymnasium_kind(task, recorder_for(task), SEEDS, monkeypatch)
    assert [(o.index, o.length, o.terminated) for o in got] == [
        (o.index, o.length, o.terminated) for o in want
    ]
    for g, w in zip(got, want, strict=True):
        assert g.ret == pytest.approx(w.ret, rel=1e-6, abs=1e-6)


def test_rollout_engine_is_exact_while_no_constraint_is_active(registry: Registry) -> None:
    """The shipped TD3 checkpoint balances the pendulum for the full 1000 steps, never at a
    joint limit: the solver never runs, so the cold start changes nothing."""
    task = registry.get("td3-inverted-pendulum-v2")
    weights = load_file(str(CHECKPOINT))
    assert task.policy is not None
    policy = MLPPolicy(task.policy, weights, np.full(1, 3.0, np.float32))
    seeds = [(0, 7), (1, 8), (2, 9)]
    got = rollout_vectorized(task, policy, seeds)
    want = rollout_episodes(task, weights, seeds)
    assert key(got) == key(want) == [(i, 1000.0, 1000, False) for i in range(3)]


@pytest.mark.parametrize(
    ("gym_id", "engine"), [("Walker2d-v5", "rollout"), ("Reacher-v5", "mjdata")]
)
def test_results_do_not_depend_on_the_thread_count(
    registry: Registry, gym_id: str, engine: Any
) -> None:
    task = task_for(registry, gym_id, steps=150)
    seeds = [(i, 40 + i) for i in range(7)]
    runs = [
        key(rollout_vectorized(task, recorder_for(task, seed=3), seeds, t, engine=engine))
        for t in (1, 2, 3)
    ]
    assert runs[0] == runs[1] == runs[2]


def test_episodes_are_reported_as_they_end(registry: Registry) -> None:
    task = task_for(registry, "Hopper-v5")
    env = make_env(task.env, time_limit=False).unwrapped
    ended: list[EpisodeOutcome] = []
    try:
        out = rollout_on(
            env, FAMILIES["Hopper-v5"], task, recorder_for(task), SEEDS, on_episode=ended.append
        )
    finally:
        env.close()
    assert [o.index for o in out] == [0, 1, 2, 3, 4]  # in the order of the seeds
    assert sorted(ended, key=lambda o: o.index) == out
    assert [o.length for o in ended] == sorted(o.length for o in out)  # in the order they ended


def test_a_diverging_env_is_restepped_as_mj_step_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mujoco.rollout freezes an env at a MuJoCo warning; Gymnasium's mj_step resets its data
    and goes on. The engine redoes such a step with mj_step, leaving the other envs alone."""
    import mujoco

    monkeypatch.chdir(tmp_path)  # MuJoCo logs its warning to ./MUJOCO_LOG.TXT

    env = make_env(EnvSpec(gym_id="Hopper-v5", max_episode_steps=10), time_limit=False).unwrapped
    engine = _RolloutEngine(env, 2, 1, [])
    try:
        env.reset(seed=1)
        engine.load(1, env.data)
        env.data.qvel[3] = 1e11  # beyond mjMAXVAL: mj_checkVel warns and resets
        engine.load(0, env.data)
        start = engine.state.copy()
        action = np.full((2, 3), 0.3, np.float32)
        after = engine.step(action, FAMILIES["Hopper-v5"])
        for row in (0, 1):
            d = mujoco.MjData(env.model)
            mujoco.mj_setState(env.model, d, start[row], engine.spec)
            d.ctrl[:] = action[row]
            mujoco.mj_step(env.model, d, nstep=env.frame_skip)
            assert np.array_equal(after.qpos[row], d.qpos)
            assert np.array_equal(after.qvel[row], d.qvel)
        assert engine.state[0, 0] == engine.state[1, 0] > 0  # the diverged env's time went on
    finally:
        engine.close()
        env.close()


def test_the_rollout_engine_refuses_a_family_reading_more_than_the_state(
    registry: Registry,
) -> None:
    task = task_for(registry, "Reacher-v5")
    with pytest.raises(ValueError, match="engine 'mjdata' only"):
        rollout_vectorized(task, recorder_for(task), SEEDS, engine="rollout")


@pytest.mark.parametrize("engine", ["mjdata", "rollout"])
def test_reused_mjdata_change_nothing(registry: Registry, engine: Any) -> None:
    """The kind keeps its MjData objects across shards: whatever a previous shard left in them
    (another episode's contacts, warm start), a shard's results are those of fresh ones."""
    task = task_for(registry, "Hopper-v5")
    env = make_env(task.env, time_limit=False).unwrapped
    family = FAMILIES["Hopper-v5"]
    datas: list[Any] = []
    first, other = SEEDS[:3], [(7, 900), (8, 901), (9, 902), (10, 903)]
    try:
        fresh = rollout_on(env, family, task, recorder_for(task), first, engine=engine)
        rollout_on(env, family, task, recorder_for(task), other, engine=engine, datas=datas)
        again = rollout_on(env, family, task, recorder_for(task), first, engine=engine, datas=datas)
    finally:
        env.close()
    assert len(datas) >= 1 and key(again) == key(fresh)


@pytest.mark.parametrize(
    ("gym_id", "kwargs"),
    [
        (g, kw)
        for g, f in sorted(FAMILIES.items())
        if engine_for(f) == "rollout"
        for kw in ({}, {"reset_noise_scale": 0.3})
    ],
)
def test_a_native_reset_is_gymnasiums_reset_to_the_bit(gym_id: str, kwargs: dict[str, Any]) -> None:
    """The rollout engine's start state drawn without the env equals, to the bit, the
    FULLPHYSICS state ``env.reset(seed=...)`` leaves (qpos, qvel, time, the rest)."""
    family = FAMILIES[gym_id]
    spec = EnvSpec(gym_id=gym_id, kwargs=kwargs, max_episode_steps=1000)
    env = make_env(spec, time_limit=False).unwrapped
    seeds = [0, 1, 7, 2**31 - 1, 123_456_789]
    native = _RolloutEngine(env, len(seeds), 1, [])
    reference = _RolloutEngine(env, len(seeds), 1, [])
    for row, seed in enumerate(seeds):
        start = native.native_start(family, env, seed)
        assert start is not None, f"{gym_id}: the rollout engine should reset natively"
        native.load_state(row, *start)
        env.reset(seed=seed)
        reference.load(row, env.data)
    assert np.array_equal(native.state, reference.state)
    assert np.ptp(native.state[:, native.qpos], axis=0).max() > 0, "seeds must differ"
    native.close()
    reference.close()
    env.close()
