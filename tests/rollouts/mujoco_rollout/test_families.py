"""Every family's step is Gymnasium's to the bit: obs, reward, termination, info values and types.

The contract the native batch kind and the interactive native stepper both build
on (:mod:`ale_robotics.rollouts.mujoco_rollout.families`): fed the views of
Gymnasium envs' own ``MjData`` around their ``env.step(a)``, a family returns
exactly what Gymnasium returned. Several envs step side by side so that every
computation runs batched (n > 1), with random actions beyond the action bounds
(MuJoCo clamps them; the control cost does not), and envs that terminate are
reset and go on, so terminations are among the steps checked.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from ale_robotics.envs.make import make_env
from ale_robotics.rollouts.mujoco_rollout.families import FAMILIES, Family, StepView
from ale_robotics.rollouts.mujoco_rollout.vectorized import engine_for
from ale_robotics.tasks import EnvSpec, Registry

TERMINATING = {"Hopper-v5", "Walker2d-v5", "InvertedPendulum-v5", "InvertedDoublePendulum-v5"}


def view_of(family: Family, datas: list[Any], model: Any) -> StepView:
    """The view of ``datas`` as they are now (what a caller gathers around a step)."""
    import mujoco

    ids = {b: mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, b) for b in family.bodies}
    return StepView(
        qpos=np.array([d.qpos for d in datas]),
        qvel=np.array([d.qvel for d in datas]),
        xpos={b: np.array([d.xpos[i] for d in datas]) for b, i in ids.items()},
        site_xpos=np.array([d.site_xpos for d in datas]) if "site_xpos" in family.fields else None,
        qfrc_constraint=np.array([d.qfrc_constraint for d in datas])
        if "qfrc_constraint" in family.fields
        else None,
    )


def before_view_of(family: Family, datas: list[Any]) -> StepView:
    """The view before the physics as the interactive stepper gathers it: only the family's
    ``before_fields``, the rest empty, so a family reading more fails here."""
    empty = np.empty((len(datas), 0))
    kept = {f: np.array([getattr(d, f) for d in datas]) for f in family.before_fields}
    return StepView(**{"qpos": empty, "qvel": empty, **kept})


def same(got: Any, want: Any) -> bool:
    """Equal value and exact type (Python vs numpy scalar, dtype); NaN equals NaN."""
    if type(got) is not type(want):
        return False
    if isinstance(want, np.ndarray):
        return got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)
    if isinstance(want, float | np.floating) and math.isnan(want):
        return math.isnan(got)
    return bool(got == want)


def check_lockstep(
    gym_id: str,
    kwargs: dict[str, Any],
    *,
    envs: int = 4,
    steps: int = 150,
    action_dtype: type = np.float32,
    seed: int = 0,
    episode_cap: int = 200,
) -> dict[str, int]:
    """Step ``envs`` Gymnasium envs side by side; the family must reproduce every step.
    Returns counts of what was covered (steps, terminations, active constraint forces)."""
    family = FAMILIES[gym_id]
    spec = EnvSpec(gym_id=gym_id, kwargs=kwargs, max_episode_steps=1000)
    wrapped = [make_env(spec) for _ in range(envs)]
    bases = [w.unwrapped for w in wrapped]
    model = bases[0].model
    rng = np.random.default_rng(seed)
    high = wrapped[0].action_space.high
    counts = {"steps": 0, "terminated": 0, "constraint": 0}
    ages = [0] * envs
    for i, w in enumerate(wrapped):
        obs0, _ = w.reset(seed=seed * 100 + i)
        got0 = family.observe(bases[i], view_of(family, [bases[i].data], model))
        assert same(got0[0], obs0), f"{gym_id} reset observation"
    for _ in range(steps):
        action = (rng.uniform(-1.5, 1.5, (envs, len(high))) * high).astype(action_dtype)
        before = before_view_of(family, [b.data for b in bases])
        results = [w.step(action[i]) for i, w in enumerate(wrapped)]
        after = view_of(family, [b.data for b in bases], model)
        out = family.step(bases[0], before, after, action)
        infos = out.infos()
        assert out.obs.dtype == np.float64 and out.obs.shape == (envs, len(results[0][0]))
        for i, (obs, reward, terminated, _, info) in enumerate(results):
            where = f"{gym_id} env {i} step {counts['steps']}"
            assert same(out.obs[i], obs), f"{where}: observation"
            assert out.reward[i] == reward or (math.isnan(reward) and math.isnan(out.reward[i])), (
                f"{where}: reward {out.reward[i]!r} != {reward!r}"
            )
            assert bool(out.terminated[i]) is terminated, f"{where}: terminated"
            assert list(infos[i]) == list(info), f"{where}: info keys"
            for key, want in info.items():
                got = infos[i][key]
                assert same(got, want), (
                    f"{where}: info[{key!r}] {got!r} ({type(got).__name__}) != "
                    f"{want!r} ({type(want).__name__})"
                )
        counts["steps"] += 1
        if after.qfrc_constraint is not None:
            counts["constraint"] += int(np.count_nonzero(after.qfrc_constraint[:, 0]))
        for i, (*_, terminated, _, _) in enumerate(results):
            ages[i] += 1
            if terminated or ages[i] >= episode_cap:
                counts["terminated"] += int(terminated)
                ages[i] = 0
                wrapped[i].reset(seed=int(rng.integers(1 << 30)))
    for w in wrapped:
        w.close()
    return counts


@pytest.mark.parametrize("gym_id", sorted(FAMILIES))
def test_family_step_is_gymnasiums_to_the_bit(gym_id: str) -> None:
    counts = check_lockstep(gym_id, {})
    assert counts["steps"] == 150
    if gym_id in TERMINATING:
        assert counts["terminated"] >= 3, f"{gym_id}: the steps checked must include terminations"


def test_inverted_double_pendulum_with_the_slider_at_its_limit() -> None:
    """The constraint force in the observation is nonzero only at the slider's limit (random
    actions seldom get there before the poles fall): started next to it and pushed into it,
    the cart hits it, and the stale force (RK4's last stage) must still match."""
    family = FAMILIES["InvertedDoublePendulum-v5"]
    env = make_env(EnvSpec(gym_id="InvertedDoublePendulum-v5", max_episode_steps=1000))
    base = env.unwrapped
    active = 0
    for start in range(5):
        env.reset(seed=start)
        base.set_state(np.array([0.97, 0.01 * start, 0.0]), np.array([1.0, 0.0, 0.0]))
        for _ in range(6):
            action = np.ones((1, 1), np.float32)
            before = view_of(family, [base.data], base.model)
            obs, reward, terminated, _, info = env.step(action[0])
            after = view_of(family, [base.data], base.model)
            out = family.step(base, before, after, action)
            assert same(out.obs[0], obs) and out.reward[0] == reward
            assert bool(out.terminated[0]) is terminated
            assert all(same(out.infos()[0][k], v) for k, v in info.items())
            assert after.qfrc_constraint is not None
            active += int(after.qfrc_constraint[0, 0] != 0)
            if terminated:
                break
    env.close()
    assert active >= 5


@pytest.mark.parametrize(
    ("gym_id", "kwargs"),
    [
        ("HalfCheetah-v5", {"ctrl_cost_weight": 0.3, "forward_reward_weight": 2.0}),
        (
            "Hopper-v5",
            {
                "healthy_reward": 2,  # an int: reward_survive becomes a Python int
                "terminate_when_unhealthy": False,
                "exclude_current_positions_from_observation": False,
                "healthy_state_range": [-2.0, 2.0],
            },
        ),
        ("Walker2d-v5", {"healthy_reward": 3, "healthy_z_range": [1.0, 1.5]}),
        ("InvertedDoublePendulum-v5", {"healthy_reward": 5}),
        ("Reacher-v5", {"reward_dist_weight": 0.5, "reward_control_weight": 2.0}),
    ],
)
def test_env_kwargs_are_honoured(gym_id: str, kwargs: dict[str, Any]) -> None:
    check_lockstep(gym_id, kwargs, steps=60, seed=1)


@pytest.mark.parametrize("gym_id", ["HalfCheetah-v5", "Hopper-v5", "Reacher-v5"])
def test_float64_actions_keep_gymnasiums_types(gym_id: str) -> None:
    """The control cost's dtype follows the action's (float64 here, float32 above)."""
    check_lockstep(gym_id, {}, steps=30, action_dtype=np.float64, seed=2)


def test_info_types_of_a_step_out() -> None:
    """``infos()`` gives Python scalars for the python keys, numpy scalars for the rest."""
    env = make_env(EnvSpec(gym_id="Hopper-v5", max_episode_steps=1000))
    base, family = env.unwrapped, FAMILIES["Hopper-v5"]
    env.reset(seed=0)
    before = view_of(family, [base.data], base.model)
    env.step(np.zeros(3, np.float32))
    out = family.step(
        base, before, view_of(family, [base.data], base.model), np.zeros((1, 3), np.float32)
    )
    info = out.infos()[0]
    assert type(info["reward_survive"]) is float and type(info["x_position"]) is np.float64
    assert type(info["reward_ctrl"]) is np.float32


def test_engines_by_what_a_family_reads() -> None:
    """``mujoco.rollout`` returns states only: families reading more take per-env MjData."""
    derived = {g for g, f in FAMILIES.items() if f.reads_derived}
    assert derived == {"Reacher-v5", "InvertedDoublePendulum-v5"}
    assert {g: engine_for(f) for g, f in FAMILIES.items()} == {
        g: "mjdata" if g in derived else "rollout" for g in FAMILIES
    }


def _is_gymnasium_mujoco(gym_id: str) -> bool:
    if ":" in gym_id:
        return False  # a module-qualified id: ours (DMC, Meta-World), not Gymnasium's MuJoCo
    return str(gym.spec(gym_id).entry_point).startswith("gymnasium.envs.mujoco.")


def test_every_registered_mujoco_task_has_an_exact_family(registry: Registry) -> None:
    """Invariant over the registry: every task on a Gymnasium MuJoCo env has a family, and
    the family is exact on that task's env (its kwargs) and gives its observation shape."""
    mujoco_tasks = [
        registry.get(i) for i in registry.ids() if _is_gymnasium_mujoco(registry.get(i).env.gym_id)
    ]
    assert len(mujoco_tasks) >= 6
    for task in mujoco_tasks:
        assert task.env.gym_id in FAMILIES, f"{task.id}: {task.env.gym_id} has no family"
        env = make_env(task.env)
        try:
            family = FAMILIES[task.env.gym_id]
            env.reset(seed=0)
            obs = family.observe(
                env.unwrapped, view_of(family, [env.unwrapped.data], env.unwrapped.model)
            )
            assert obs.shape[1:] == env.observation_space.shape, task.id
        finally:
            env.close()
        check_lockstep(task.env.gym_id, dict(task.env.kwargs), envs=2, steps=25, seed=4)


def test_a_family_env_reads_dt_once_and_everything_else_through() -> None:
    from ale_robotics.rollouts.mujoco_rollout.families import FamilyEnv

    env = make_env(EnvSpec(gym_id="Hopper-v5", kwargs={"frame_skip": 5}, max_episode_steps=10))
    base = env.unwrapped
    consts = FamilyEnv(base)
    assert consts.dt == base.dt == base.model.opt.timestep * 5
    assert consts._healthy_reward == base._healthy_reward
    assert consts.init_qpos is base.init_qpos and consts.model is base.model
    env.close()
