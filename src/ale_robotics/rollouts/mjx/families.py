"""Gymnasium's MuJoCo step semantics in JAX, one episode at a time (vmapped by the caller).

Each family re-states what its Gymnasium env computes after ``do_simulation``
(observation, reward, termination), as pure functions of one episode's
``qpos``/``qvel`` before and after a control step, so that they trace into the
jitted rollout. The constants a formula reads (reward weights, healthy ranges,
``dt``, ...) come from the *unwrapped* Gymnasium env built with the task's
kwargs (:meth:`FamilyParams.of`), so env kwargs in a task config are honoured,
and they are hashable: the jitted rollout is cached per distinct set.

The formulas are Gymnasium v5's (``gymnasium/envs/mujoco/*_v5.py``) and are
pinned, with the physics, to the C kind's per-step numbers by
``tests/rollouts/mjx``; they are written again here rather than shared with the
``mujoco_rollout`` kind's numpy families because the kinds do not import each
other (an import-linter contract) and these must be JAX to be jitted.

This module imports JAX at the top: only :mod:`.rollout` imports it, and only
from inside :meth:`~.kind.MjxKind.run_shard`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

__all__ = ["FAMILIES", "FamilyParams", "Locomotion", "Pendulum", "family_params"]


@dataclass(frozen=True)
class FamilyParams:
    """The constants of one family's step, read from the task's unwrapped env."""

    terminates: bool
    """Whether an episode may end before its step limit (then finished episodes are frozen
    and masked out of the returns, as Gymnasium's batch leaves them)."""

    def observe(self, qpos: jax.Array, qvel: jax.Array) -> jax.Array:
        """The observation at a state (after reset, after a step)."""
        raise NotImplementedError

    def step(
        self, qpos_before: jax.Array, qpos: jax.Array, qvel: jax.Array, action: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        """``(reward, terminated)`` of the control step that went from ``qpos_before`` to
        ``(qpos, qvel)`` with ``action``."""
        raise NotImplementedError


@dataclass(frozen=True)
class Locomotion(FamilyParams):
    """HalfCheetah, Hopper and Walker2d (v5): forward velocity, control cost, health.

    ``healthy_*`` are ``None`` for a family without that check (HalfCheetah has none;
    Walker2d no state range); Gymnasium's healthy bounds are strict (``low < x < high``).
    """

    dt: float
    forward_reward_weight: float
    ctrl_cost_weight: float
    exclude_x: bool
    qvel_clip: float | None
    healthy_reward: float
    terminate_when_unhealthy: bool
    healthy_z: tuple[float, float] | None
    healthy_angle: tuple[float, float] | None
    healthy_state: tuple[float, float] | None

    def observe(self, qpos: jax.Array, qvel: jax.Array) -> jax.Array:
        position = qpos[1:] if self.exclude_x else qpos
        velocity = (
            qvel if self.qvel_clip is None else jnp.clip(qvel, -self.qvel_clip, self.qvel_clip)
        )
        return jnp.concatenate([position, velocity])

    def _healthy(self, qpos: jax.Array, qvel: jax.Array) -> jax.Array:
        ok = jnp.asarray(True)
        if self.healthy_state is not None:
            lo, hi = self.healthy_state
            state = jnp.concatenate([qpos, qvel])[2:]
            ok &= jnp.all((lo < state) & (state < hi))
        if self.healthy_z is not None:
            lo, hi = self.healthy_z
            ok &= (lo < qpos[1]) & (qpos[1] < hi)
        if self.healthy_angle is not None:
            lo, hi = self.healthy_angle
            ok &= (lo < qpos[2]) & (qpos[2] < hi)
        return ok

    def step(
        self, qpos_before: jax.Array, qpos: jax.Array, qvel: jax.Array, action: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        x_velocity = (qpos[0] - qpos_before[0]) / self.dt
        forward = self.forward_reward_weight * x_velocity
        # in the action's dtype (float32), as numpy computes it from Gymnasium's float32 action
        ctrl_cost = (self.ctrl_cost_weight * jnp.sum(jnp.square(action))).astype(qpos.dtype)
        if not self.terminates and self.healthy_reward == 0.0:
            return forward - ctrl_cost, jnp.asarray(False)
        healthy = self._healthy(qpos, qvel)
        # Gymnasium's order of operations: (forward + healthy) - ctrl
        reward = (forward + jnp.where(healthy, self.healthy_reward, 0.0)) - ctrl_cost
        return reward, (~healthy) & self.terminate_when_unhealthy


@dataclass(frozen=True)
class Pendulum(FamilyParams):
    """InvertedPendulum-v5: reward 1 per step while the pole stays within 0.2 rad."""

    def observe(self, qpos: jax.Array, qvel: jax.Array) -> jax.Array:
        return jnp.concatenate([qpos, qvel])

    def step(
        self, qpos_before: jax.Array, qpos: jax.Array, qvel: jax.Array, action: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        obs = self.observe(qpos, qvel)
        terminated = ~jnp.all(jnp.isfinite(obs)) | (jnp.abs(obs[1]) > 0.2)
        return jnp.where(terminated, 0.0, 1.0).astype(qpos.dtype), terminated


def _range(env: Any, attr: str) -> tuple[float, float]:
    lo, hi = getattr(env, attr)
    return float(lo), float(hi)


def _cheetah(env: Any) -> FamilyParams:
    return Locomotion(
        terminates=False,
        dt=float(env.dt),
        forward_reward_weight=float(env._forward_reward_weight),
        ctrl_cost_weight=float(env._ctrl_cost_weight),
        exclude_x=bool(env._exclude_current_positions_from_observation),
        qvel_clip=None,
        healthy_reward=0.0,
        terminate_when_unhealthy=False,
        healthy_z=None,
        healthy_angle=None,
        healthy_state=None,
    )


def _hopper(env: Any, with_state_range: bool) -> FamilyParams:
    return Locomotion(
        terminates=bool(env._terminate_when_unhealthy),
        dt=float(env.dt),
        forward_reward_weight=float(env._forward_reward_weight),
        ctrl_cost_weight=float(env._ctrl_cost_weight),
        exclude_x=bool(env._exclude_current_positions_from_observation),
        qvel_clip=10.0,
        healthy_reward=float(env._healthy_reward),
        terminate_when_unhealthy=bool(env._terminate_when_unhealthy),
        healthy_z=_range(env, "_healthy_z_range"),
        healthy_angle=_range(env, "_healthy_angle_range"),
        healthy_state=_range(env, "_healthy_state_range") if with_state_range else None,
    )


def _pendulum(env: Any) -> FamilyParams:
    return Pendulum(terminates=True)


FAMILIES = {
    "HalfCheetah-v5": _cheetah,
    "Hopper-v5": lambda env: _hopper(env, with_state_range=True),
    "Walker2d-v5": lambda env: _hopper(env, with_state_range=False),
    "InvertedPendulum-v5": _pendulum,
}
"""Gym id -> the family's constants from its unwrapped env. Only ids listed here can use
the ``mjx`` kind (its ``check_task`` refuses others)."""


def family_params(gym_id: str, env: Any) -> FamilyParams:
    """The family constants of ``gym_id`` read from its unwrapped ``env``."""
    return FAMILIES[gym_id](env)
