"""What a session's envs are: how they are built, and the null action abandoned episodes get.

Split from :mod:`.vector_session` (which re-exports both) so that the session's
step logic stays one readable module.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ale_robotics.envs.make import make_env
from ale_robotics.evaluator import rendering
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["make_envs", "null_action"]


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
