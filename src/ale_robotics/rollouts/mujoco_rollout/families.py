"""Gymnasium's MuJoCo envs' step semantics, batched over envs with numpy: the *families*.

A family re-implements what one Gymnasium MuJoCo env (``HalfCheetah-v5``,
``Hopper-v5``, ``Walker2d-v5``, ``InvertedPendulum-v5``,
``InvertedDoublePendulum-v5``, ``Reacher-v5``) computes in ``step`` around its
physics: observation, reward, termination and info, for ``n`` envs at once, from
what the envs' ``MjData`` held before and after the physics (:class:`StepView`).
The physics itself is not here: the batch kind steps it with ``mujoco.rollout``
or per-env ``mj_step`` (:mod:`.vectorized`), interactive sessions with per-env
``mj_step`` (:mod:`.stepper`); both compute everything else with these formulas.

**Exact, not close.** Fed the views of a Gymnasium env's own ``MjData`` around its
``env.step(a)``, :meth:`Family.step` returns an observation, reward, termination and
info values equal to Gymnasium's to the bit (pinned by
``tests/rollouts/mujoco_rollout/test_families.py``, many steps per family with
random actions, through terminations). That is why the formulas below copy
Gymnasium's float operations in Gymnasium's order, and why some look odd:

* a square of a numpy scalar (``x**2`` on an ``np.float64``) is libm's ``pow``,
  which differs from ``x * x`` (numpy's array ``**2``) in the last bit for some x:
  :func:`_scalar_pow2` calls the scalar power per element;
* ``np.linalg.norm`` of a 3-vector is ``sqrt(x.dot(x))``, a BLAS dot (FMA): the
  batch uses ``np.vecdot``, which calls the same dot routine per row;
* ``np.sum(np.square(action))`` of a float32 action is a float32 sum, and the
  control cost a float32 (``weight * np.float32`` stays float32 under NumPy 2's
  promotion): the columns keep the action's dtype.

**Stale reads.** All six models but HalfCheetah integrate with RK4. After
``mj_step`` the state is the integrated one, but ``data.xpos``,
``data.site_xpos`` and ``data.qfrc_constraint`` hold what the last RK4 stage of
the last substep computed (MuJoCo restores ``qpos``/``qvel`` after its stages, not
the quantities derived from them); with Euler (HalfCheetah) they are those of the
last substep's start. Reacher's ``get_body_com`` and InvertedDoublePendulum's tip
and constraint force read those values, so a :class:`StepView` carries them *as
the data holds them*; they cannot be recomputed from the state (nor read from
``mujoco.rollout``'s sensors, which are evaluated at each substep's start only).
:attr:`Family.bodies` and :attr:`Family.fields` say which of them a family reads.

**Info types.** Gymnasium's info dicts mix numpy and Python scalars, and a
remote env must give the same types (a vector env's info arrays take their
dtype from them). Each family's docstring lists them; :attr:`StepOut.python_keys`
names the keys whose value is a Python scalar, and :meth:`StepOut.infos` rebuilds
the per-env dicts with Gymnasium's keys, order and types.

Weights, ranges, ``dt`` and flags come from the *unwrapped* Gymnasium env built with
the task's kwargs (``env._ctrl_cost_weight``, ``env.dt``...), so env kwargs in a task
config are honoured.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

__all__ = ["FAMILIES", "Family", "FamilyEnv", "StepOut", "StepView"]

Array = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


class FamilyEnv:
    """An unwrapped env as the families read it, its ``dt`` read once.

    ``MujocoEnv.dt`` is a property (``model.opt.timestep * frame_skip`` through MuJoCo's
    bindings, ~7 µs), read by three families on every step; a per-step loop hands the
    families this instead. Every other attribute is the env's own, read through."""

    def __init__(self, env: Any) -> None:
        self.unwrapped = env
        self.dt = float(env.dt)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.unwrapped, name)


@dataclass(frozen=True)
class StepView:
    """What ``n`` envs' ``MjData`` hold at one moment (before or after a control step).

    Only ``qpos`` and ``qvel`` are always given; the other fields are filled for a
    family that reads them (:attr:`Family.bodies`, :attr:`Family.fields`), each with
    the value ``MjData`` holds *then*: after ``mj_step`` that is the stale value
    described in the module docstring, which is the one Gymnasium reads.
    """

    qpos: Array
    """``[n, nq]``: ``data.qpos``."""
    qvel: Array
    """``[n, nv]``: ``data.qvel``."""
    xpos: Mapping[str, Array] = field(default_factory=dict)
    """Body name -> ``[n, 3]``: ``data.xpos`` of each body in :attr:`Family.bodies`."""
    site_xpos: Array | None = None
    """``[n, nsite, 3]``: ``data.site_xpos``, when ``"site_xpos"`` is in :attr:`Family.fields`."""
    qfrc_constraint: Array | None = None
    """``[n, nv]``: ``data.qfrc_constraint``, when in :attr:`Family.fields`."""


@dataclass(frozen=True)
class StepOut:
    """One control step's results for ``n`` envs, Gymnasium's values row by row."""

    obs: Array
    """``[n, obs_dim]`` float64: the observation after the step."""
    reward: Array
    """``[n]`` float64 (Gymnasium's reward is an ``np.float64``, a Python ``int`` for
    InvertedPendulum; the values are equal)."""
    terminated: BoolArray
    """``[n]``: Gymnasium's ``terminated`` (a Python ``bool`` there)."""
    info: dict[str, npt.NDArray[Any]]
    """Gymnasium's step info keys, in Gymnasium's order, one ``[n]`` column each. A column
    of a numpy-scalar key has the scalar's dtype (``reward_ctrl`` is float32 for a float32
    action); a column of a :attr:`python_keys` key converts with ``.tolist()``."""
    python_keys: frozenset[str] = frozenset()
    """Info keys whose Gymnasium value is a Python scalar (``float``, ``int``), not numpy's."""

    def infos(self) -> list[dict[str, Any]]:
        """The ``n`` per-env info dicts exactly as Gymnasium's ``step`` returns them:
        same keys, order, values and scalar types."""
        columns = [
            (key, col.tolist() if key in self.python_keys else list(col))
            for key, col in self.info.items()
        ]
        return [{key: values[i] for key, values in columns} for i in range(len(self.reward))]


class Family(abc.ABC):
    """How one Gymnasium MuJoCo env computes observation, reward, termination and info.

    Stateless: everything an env's kwargs change is read from ``env`` (the *unwrapped*
    Gymnasium env of the task) on each call.
    """

    gym_id: ClassVar[str]
    """The Gymnasium id whose ``step`` this family re-implements."""
    bodies: ClassVar[tuple[str, ...]] = ()
    """Bodies whose ``data.xpos`` the family reads (:attr:`StepView.xpos`)."""
    fields: ClassVar[tuple[str, ...]] = ()
    """Other :class:`StepView` fields the family reads (``"site_xpos"``, ``"qfrc_constraint"``)."""
    before_fields: ClassVar[tuple[str, ...]] = ()
    """Which of ``"qpos"``, ``"qvel"`` :meth:`step` reads of its ``before`` view (the rest may
    be left empty there: an interactive Step then copies only these out of 64 envs' data)."""

    @property
    def reads_derived(self) -> bool:
        """Whether the family reads ``MjData`` beyond the state (``qpos``, ``qvel``): such a
        family cannot be stepped by ``mujoco.rollout``, which returns only states."""
        return bool(self.bodies or self.fields)

    @abc.abstractmethod
    def observe(self, env: Any, view: StepView) -> Array:
        """``[n, obs_dim]``: Gymnasium's ``_get_obs()`` at ``view`` (also its reset observation,
        given the view of the data right after ``reset``)."""

    @abc.abstractmethod
    def step(
        self, env: Any, before: StepView, after: StepView, action: npt.NDArray[Any]
    ) -> StepOut:
        """One control step: ``before`` and ``after`` the physics, ``action`` ``[n, nu]`` as
        given to ``env.step`` (its dtype matters: see the module docstring)."""

    def reset_state(self, env: Any, rng: np.random.Generator) -> tuple[Array, Array] | None:
        """``(qpos, qvel)`` that ``env.reset`` sets when its ``np_random`` is ``rng`` (the same
        draws, in the same order, the same float operations), or None where the family does
        not re-do the env's ``reset_model`` (the caller then calls ``env.reset``).

        A short episode's reset through Gymnasium (seeding, wrappers, ``set_state``,
        ``mj_forward``, the observation) cost about 40 µs, as much as five of its steps;
        the batch kind needs only the state, drawn here in a third of that."""
        return None

    def reset_infos(self, env: Any, view: StepView) -> list[dict[str, Any]]:
        """The info dicts ``env.reset`` returns (``_get_reset_info``) for envs whose data is
        ``view`` right after their reset: same keys, values and scalar types. None of the
        v5 envs here puts anything but ``np.float64`` values of the state in them."""
        return [{} for _ in range(len(view.qpos))]

    def __repr__(self) -> str:
        return f"<family {self.gym_id}>"


def _ctrl_cost(weight: Any, action: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``weight * np.sum(np.square(action))`` per row, in the action's dtype (Gymnasium's
    ``control_cost``; a row sum over <= 8 elements is numpy's 1-D sum, pinned by a test)."""
    out: npt.NDArray[Any] = weight * np.sum(np.square(action), axis=1)
    return out


def _scalar_pow2(a: Array) -> Array:
    """``v ** 2`` of each element as an ``np.float64`` scalar (libm ``pow``), which is what
    Gymnasium computes on unpacked scalars; ``a ** 2`` on the array (``a * a``) differs in
    the last bit for some values."""
    return np.fromiter((v**2 for v in a), dtype=np.float64, count=len(a))


def _uniform_noise(env: Any, rng: np.random.Generator, normal_qvel: bool) -> tuple[Array, Array]:
    """``init_qpos + U(±scale)`` and ``init_qvel + U(±scale)`` (or ``+ scale * N(0, 1)``),
    exactly as the v5 envs' ``reset_model`` draw them."""
    scale, model = env._reset_noise_scale, env.model
    qpos = env.init_qpos + rng.uniform(low=-scale, high=scale, size=model.nq)
    if normal_qvel:
        return qpos, env.init_qvel + scale * rng.standard_normal(model.nv)
    return qpos, env.init_qvel + rng.uniform(low=-scale, high=scale, size=model.nv)


def _start(env: Any) -> int:
    return 1 if env._exclude_current_positions_from_observation else 0


class HalfCheetah(Family):
    """``HalfCheetah-v5`` (Euler). Info types: ``x_position``, ``x_velocity``,
    ``reward_forward``: ``np.float64``; ``reward_ctrl``: numpy scalar of the action's
    dtype (``np.float32`` for a float32 action). Never terminates."""

    gym_id = "HalfCheetah-v5"
    before_fields = ("qpos",)

    def observe(self, env: Any, view: StepView) -> Array:
        return np.concatenate([view.qpos[:, _start(env) :], view.qvel], axis=1)

    def reset_state(self, env: Any, rng: np.random.Generator) -> tuple[Array, Array]:
        return _uniform_noise(env, rng, normal_qvel=True)

    def reset_infos(self, env: Any, view: StepView) -> list[dict[str, Any]]:
        return [{"x_position": x} for x in view.qpos[:, 0]]

    def step(
        self, env: Any, before: StepView, after: StepView, action: npt.NDArray[Any]
    ) -> StepOut:
        x_after = after.qpos[:, 0]
        x_velocity = (x_after - before.qpos[:, 0]) / env.dt
        forward_reward = env._forward_reward_weight * x_velocity
        ctrl_cost = _ctrl_cost(env._ctrl_cost_weight, action)
        reward = forward_reward - ctrl_cost
        info = {
            "x_position": x_after.copy(),
            "x_velocity": x_velocity,
            "reward_forward": forward_reward,
            "reward_ctrl": -ctrl_cost,
        }
        return StepOut(
            self.observe(env, after), reward, np.zeros(len(reward), dtype=np.bool_), info
        )


class _Hopping(Family):
    """What Hopper and Walker2d share: forward reward, healthy reward, termination."""

    before_fields = ("qpos",)

    healthy_python: ClassVar[bool]
    """Whether Gymnasium's ``is_healthy`` is a Python ``bool`` (Hopper: ``all(...)``) or an
    ``np.bool_`` (Walker2d: ``a and b`` of numpy comparisons), which makes
    ``reward_survive`` a Python or a numpy scalar."""

    @abc.abstractmethod
    def healthy(self, env: Any, view: StepView) -> BoolArray:
        """Gymnasium's ``is_healthy`` at ``view``."""

    def observe(self, env: Any, view: StepView) -> Array:
        return np.concatenate([view.qpos[:, _start(env) :], np.clip(view.qvel, -10, 10)], axis=1)

    def reset_state(self, env: Any, rng: np.random.Generator) -> tuple[Array, Array]:
        return _uniform_noise(env, rng, normal_qvel=False)

    def reset_infos(self, env: Any, view: StepView) -> list[dict[str, Any]]:
        x, z = view.qpos[:, 0], view.qpos[:, 1] - env.init_qpos[1]
        return [{"x_position": a, "z_distance_from_origin": b} for a, b in zip(x, z, strict=True)]

    def step(
        self, env: Any, before: StepView, after: StepView, action: npt.NDArray[Any]
    ) -> StepOut:
        x_after = after.qpos[:, 0]
        x_velocity = (x_after - before.qpos[:, 0]) / env.dt
        forward_reward = env._forward_reward_weight * x_velocity
        healthy = self.healthy(env, after)
        healthy_reward = healthy * env._healthy_reward  # bool * weight, as Gymnasium's
        ctrl_cost = _ctrl_cost(env._ctrl_cost_weight, action)
        reward = (forward_reward + healthy_reward) - ctrl_cost
        terminated = ~healthy & bool(env._terminate_when_unhealthy)
        info = {
            "x_position": x_after.copy(),
            "z_distance_from_origin": after.qpos[:, 1] - env.init_qpos[1],
            "x_velocity": x_velocity,
            "reward_forward": forward_reward,
            "reward_ctrl": -ctrl_cost,
            "reward_survive": healthy_reward,
        }
        python = frozenset({"reward_survive"}) if self.healthy_python else frozenset()
        return StepOut(self.observe(env, after), reward, terminated, info, python)


class Hopper(_Hopping):
    """``Hopper-v5`` (RK4): observation velocities clipped to [-10, 10]; healthy while every
    state entry past the first two (``state_vector()[2:]``, velocities unclipped) is inside
    ``healthy_state_range`` and z and the angle inside theirs, all bounds strict.
    Info types: ``x_position``, ``z_distance_from_origin``, ``x_velocity``,
    ``reward_forward``: ``np.float64``; ``reward_ctrl``: the action's dtype;
    ``reward_survive``: Python ``float`` (``bool * healthy_reward``)."""

    gym_id = "Hopper-v5"
    healthy_python = True

    def healthy(self, env: Any, view: StepView) -> BoolArray:
        z, angle = view.qpos[:, 1], view.qpos[:, 2]
        state = np.concatenate([view.qpos, view.qvel], axis=1)[:, 2:]
        min_state, max_state = env._healthy_state_range
        min_z, max_z = env._healthy_z_range
        min_angle, max_angle = env._healthy_angle_range
        healthy_state = np.all((min_state < state) & (state < max_state), axis=1)
        healthy_z = (min_z < z) & (z < max_z)
        healthy_angle = (min_angle < angle) & (angle < max_angle)
        out: BoolArray = healthy_state & healthy_z & healthy_angle
        return out


class Walker2d(_Hopping):
    """``Walker2d-v5`` (RK4): as Hopper without the state range. Info types: all
    ``np.float64`` (``reward_survive`` is ``np.bool_ * healthy_reward``) but ``reward_ctrl``,
    in the action's dtype."""

    gym_id = "Walker2d-v5"
    healthy_python = False

    def healthy(self, env: Any, view: StepView) -> BoolArray:
        z, angle = view.qpos[:, 1], view.qpos[:, 2]
        min_z, max_z = env._healthy_z_range
        min_angle, max_angle = env._healthy_angle_range
        out: BoolArray = (min_z < z) & (z < max_z) & (min_angle < angle) & (angle < max_angle)
        return out


class InvertedPendulum(Family):
    """``InvertedPendulum-v5`` (RK4): terminated when the observation is not finite or the
    pole angle exceeds 0.2 rad; reward 1 per step while not terminated. Info types:
    ``reward_survive``: Python ``int`` (as is Gymnasium's reward itself)."""

    gym_id = "InvertedPendulum-v5"

    def observe(self, env: Any, view: StepView) -> Array:
        return np.concatenate([view.qpos, view.qvel], axis=1)

    def reset_state(self, env: Any, rng: np.random.Generator) -> tuple[Array, Array]:
        return _uniform_noise(env, rng, normal_qvel=False)

    def step(
        self, env: Any, before: StepView, after: StepView, action: npt.NDArray[Any]
    ) -> StepOut:
        obs = self.observe(env, after)
        terminated = ~np.isfinite(obs).all(axis=1) | (np.abs(obs[:, 1]) > 0.2)
        survive = (~terminated).astype(np.int64)
        info = {"reward_survive": survive}
        return StepOut(
            obs, survive.astype(np.float64), terminated, info, frozenset({"reward_survive"})
        )


class InvertedDoublePendulum(Family):
    """``InvertedDoublePendulum-v5`` (RK4): reads the tip site's position and the slider's
    constraint force as ``MjData`` holds them after the step (stale: see the module
    docstring). Info types: ``reward_survive``: Python ``float`` (``healthy_reward *
    int``; a Python ``int`` for an int ``healthy_reward``); ``distance_penalty``,
    ``velocity_penalty``: ``np.float64``."""

    gym_id = "InvertedDoublePendulum-v5"
    fields = ("site_xpos", "qfrc_constraint")

    def observe(self, env: Any, view: StepView) -> Array:
        assert view.qfrc_constraint is not None, "InvertedDoublePendulum reads qfrc_constraint"
        angles = np.ascontiguousarray(view.qpos[:, 1:])
        return np.concatenate(
            [
                view.qpos[:, :1],
                np.sin(angles),
                np.cos(angles),
                np.clip(view.qvel, -10, 10),
                np.clip(view.qfrc_constraint, -10, 10)[:, :1],
            ],
            axis=1,
        )

    def reset_state(self, env: Any, rng: np.random.Generator) -> tuple[Array, Array]:
        return _uniform_noise(env, rng, normal_qvel=True)  # N(0,1) * scale: the same product

    def step(
        self, env: Any, before: StepView, after: StepView, action: npt.NDArray[Any]
    ) -> StepOut:
        assert after.site_xpos is not None, "InvertedDoublePendulum reads site_xpos"
        x, y = after.site_xpos[:, 0, 0], after.site_xpos[:, 0, 2]
        obs = self.observe(env, after)
        terminated = y <= 1
        v1, v2 = after.qvel[:, 1], after.qvel[:, 2]
        dist_penalty = 0.01 * _scalar_pow2(x) + _scalar_pow2(y - 2)
        vel_penalty = 1e-3 * _scalar_pow2(v1) + 5e-3 * _scalar_pow2(v2)
        alive_bonus = env._healthy_reward * (~terminated).astype(np.int64)
        reward = alive_bonus - dist_penalty - vel_penalty
        info = {
            "reward_survive": alive_bonus,
            "distance_penalty": -dist_penalty,
            "velocity_penalty": -vel_penalty,
        }
        return StepOut(obs, reward, terminated, info, frozenset({"reward_survive"}))


class Reacher(Family):
    """``Reacher-v5`` (RK4): reads the fingertip's and the target's ``data.xpos`` as the data
    holds them after the step (``get_body_com``, stale: see the module docstring). Never
    terminates. Info types: ``reward_dist``: ``np.float64``; ``reward_ctrl``: the action's
    dtype."""

    gym_id = "Reacher-v5"
    bodies = ("fingertip", "target")

    def observe(self, env: Any, view: StepView) -> Array:
        theta = np.ascontiguousarray(view.qpos[:, :2])
        tip = view.xpos["fingertip"] - view.xpos["target"]
        return np.concatenate(
            [np.cos(theta), np.sin(theta), view.qpos[:, 2:], view.qvel[:, :2], tip[:, :2]],
            axis=1,
        )

    def step(
        self, env: Any, before: StepView, after: StepView, action: npt.NDArray[Any]
    ) -> StepOut:
        vec = np.ascontiguousarray(after.xpos["fingertip"] - after.xpos["target"])
        reward_dist = -np.sqrt(np.vecdot(vec, vec)) * env._reward_dist_weight
        reward_ctrl = -np.sum(np.square(action), axis=1) * env._reward_control_weight
        reward = reward_dist + reward_ctrl
        info = {"reward_dist": reward_dist, "reward_ctrl": reward_ctrl}
        return StepOut(
            self.observe(env, after), reward, np.zeros(len(reward), dtype=np.bool_), info
        )


FAMILIES: dict[str, Family] = {
    f.gym_id: f
    for f in (
        HalfCheetah(),
        Hopper(),
        Walker2d(),
        InvertedPendulum(),
        InvertedDoublePendulum(),
        Reacher(),
    )
}
"""Gymnasium id -> its family: every Gymnasium MuJoCo env a task here uses."""
