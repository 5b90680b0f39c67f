"""What a session's envs are: how they are built, how they step, and the null action.

Split from :mod:`.vector` so that the session's
step logic stays one readable module.

A session steps its envs through a :class:`VectorStepper` (:func:`make_stepper`):
all the envs that move in one Step, in one call. Where a rollout kind steps the
task's simulator natively (:data:`NATIVE_STEPPERS`: MuJoCo's envs by the
``mujoco_rollout`` kind, ``mj_step`` on each env's own ``MjData`` and the
observation, reward and info computed for all envs at once), that is its stepper,
bit-exact to Gymnasium's ``env.step``; otherwise (dm_control, Meta-World,
PyBullet, a MuJoCo env without a vectorized family) it is :class:`EnvLoop`, each
env's own ``env.step``. The evaluator reaches the kind through the rollout-kind
registry, never by importing it (the import contracts in ``.importlinter``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from ale_robotics.envs.make import make_env
from ale_robotics.evaluator.sessions import rendering
from ale_robotics.model.kind_registry import get_kind
from ale_robotics.tasks.spec import TaskSpec

__all__ = [
    "NATIVE_STEPPERS",
    "EnvLoop",
    "ResetBatch",
    "StepBatch",
    "VectorStepper",
    "make_envs",
    "make_stepper",
    "null_action",
]

StepBatch = tuple[
    Sequence[Any], Sequence[Any], Sequence[Any], Sequence[Any], Sequence[dict[str, Any]]
]
"""``(observations, rewards, terminated, truncated, infos)`` of the envs a stepper stepped,
one entry each in the order they were named (Gymnasium's ``step`` results, transposed)."""

ResetBatch = tuple[Sequence[Any], Sequence[dict[str, Any]]]
"""``(observations, infos)`` of the envs a stepper reset, one entry each in the order they
were named (Gymnasium's ``reset`` results, transposed)."""

NATIVE_STEPPERS: dict[str, str] = {"mujoco": "mujoco_rollout"}
"""Simulator name (a task's ``simulator.name``) -> the rollout kind whose ``vector_stepper``
may step that simulator's envs natively; the kind answers None for an env it cannot."""


class VectorStepper(Protocol):
    """Steps (and resets) some of a session's envs at once, exactly as their own
    ``env.step`` (``env.reset``) would."""

    def step(self, which: Sequence[int], action: npt.NDArray[Any]) -> StepBatch:
        """Step env ``which[j]`` with ``action[j]`` for each j; one result row per env."""
        ...

    def reset(self, which: Sequence[int], seeds: Sequence[int | None]) -> ResetBatch:
        """Reset env ``which[j]`` with ``seed=seeds[j]`` for each j; one result row per env."""
        ...


class EnvLoop:
    """Each env's own ``env.step``: the stepper of envs no rollout kind steps natively."""

    def __init__(self, envs: Sequence[Any]) -> None:
        self._envs = list(envs)

    def step(self, which: Sequence[int], action: npt.NDArray[Any]) -> StepBatch:
        results = [self._envs[i].step(a) for i, a in zip(which, action, strict=True)]
        if not results:
            return [], [], [], [], []
        obs, rewards, terminated, truncated, infos = zip(*results, strict=True)
        return obs, rewards, terminated, truncated, infos

    def reset(self, which: Sequence[int], seeds: Sequence[int | None]) -> ResetBatch:
        results = [self._envs[i].reset(seed=seed) for i, seed in zip(which, seeds, strict=True)]
        return [obs for obs, _ in results], [info for _, info in results]


def make_stepper(task: TaskSpec, envs: Sequence[Any]) -> VectorStepper:
    """The native stepper of ``envs`` (a session's envs of ``task``) where a kind offers one,
    else :class:`EnvLoop`.

    A kind offers one through its ``vector_stepper`` (:class:`~ale_robotics.model.rollout_kind.
    RolloutKind`): None where it cannot step these envs (no family for the env, a wrapper
    or render mode it does not re-do); the default offers none.
    """
    name = NATIVE_STEPPERS.get(task.simulator.name)
    if name is not None:
        native: VectorStepper | None = get_kind(name).vector_stepper(task, envs)
        if native is not None:
            return native
    return EnvLoop(envs)


def null_action(low: npt.ArrayLike, high: npt.ArrayLike, dtype: np.dtype[Any]) -> npt.NDArray[Any]:
    """The task's null action: zero where the bounds allow it, else the bounds' centre.

    Per element: 0 when ``low <= 0 <= high``; otherwise the midpoint of a finite
    interval, or its one finite bound when the other is infinite. Derived from
    the action space alone, so an agent can compute the same action from
    GetSpec's bounds and check that abandoning equals playing it.
    """
    lo = np.asarray(low, dtype=np.float64)
    hi = np.asarray(high, dtype=np.float64)
    with np.errstate(invalid="ignore"):  # -inf + inf: that element is 0 anyway
        mid = (lo + hi) / 2
    centre = np.where(np.isfinite(lo) & np.isfinite(hi), mid, np.where(np.isfinite(lo), lo, hi))
    out = np.where((lo <= 0) & (hi >= 0), 0.0, centre)
    if np.dtype(dtype).kind in "iu":
        out = np.clip(np.round(out), lo, hi)
    return np.asarray(out, dtype=dtype)


def make_envs(task: TaskSpec, n: int, render_mode: str | None = None) -> list[Any]:
    """``n`` fresh envs with the task's server-side step limit (Gymnasium's TimeLimit);
    ``render_mode`` one of :func:`.rendering.offered_modes` (checked by the caller)."""
    if render_mode is not None:
        rendering.prepare_headless_gl()
    return [make_env(task.env, render_mode=render_mode) for _ in range(n)]
