"""A session call's inputs checked before anything touches an env: every client mistake
is a precise INVALID_ARGUMENT, never INTERNAL and never a half-stepped session.

Split from :mod:`.vector`, whose :class:`~.vector.Session` calls these first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ale_robotics.errors import FailedPreconditionError, InvalidArgumentError

__all__ = ["ActionCheck", "check_action", "practice_seeds", "reset_targets"]


def check_action(
    action: npt.NDArray[Any],
    *,
    dtype: np.dtype[Any],
    shape: tuple[int, ...],
    low: npt.NDArray[Any],
    high: npt.NDArray[Any],
    float64_ok: bool,
) -> None:
    """INVALID_ARGUMENT unless ``action`` has ``dtype`` (or float64 when ``float64_ok``),
    ``shape`` ([num_envs, *action shape]) and is finite and within [low, high]."""
    wide = float64_ok and action.dtype == np.float64
    if action.dtype != dtype and not wide:
        raise InvalidArgumentError(
            f"action dtype is {action.dtype.name}; the action spec is "
            f"{dtype.name}: cast the action before sending it"
        )
    if action.shape != shape:
        raise InvalidArgumentError(
            f"action shape is {list(action.shape)}; this session needs "
            f"[num_envs, *action_shape] = {list(shape)}"
        )
    if action.dtype.kind == "f" and not np.isfinite(action).all():
        env = int(np.argwhere(~np.isfinite(action))[0][0])
        raise InvalidArgumentError(f"action for env {env} is NaN or infinite")
    out = (action < low) | (action > high)
    if out.any():
        where = tuple(int(k) for k in np.argwhere(out)[0])
        raise InvalidArgumentError(
            f"action for env {where[0]} is out of bounds: element {list(where[1:])} is "
            f"{action[where]!r}, allowed [{low[where]!r}, {high[where]!r}]"
        )


class ActionCheck:
    """:func:`check_action` for one session's action spec, with a fast path for small actions.

    A one-env Step's action is a few numbers, and numpy's five calls on them (~11 µs here)
    cost more than the rest of the session's bookkeeping: compared in Python, element by
    element against bounds converted once, a good action passes in ~1 µs. Any action that
    fails that comparison (or is not a small array of an accepted dtype and the shape) goes
    through :func:`check_action`, whose message says what is wrong, so the answer to a bad
    action is the same either way. The comparisons are of the exact values, as numpy's are:
    ``tolist`` gives each float32 as the float64 it equals (float64 actions, where the
    session takes them, are compared as they are).
    """

    SMALL = 32
    """Actions of up to this many numbers take the fast path."""

    def __init__(
        self,
        dtype: np.dtype[Any],
        shape: tuple[int, ...],
        low: npt.NDArray[Any],
        high: npt.NDArray[Any],
        float64_ok: bool,
    ) -> None:
        self.dtype, self.shape, self.low, self.high = dtype, shape, low, high
        self.float64_ok = float64_ok
        size = math.prod(shape)
        self._fast = size <= self.SMALL
        self._bounds: list[tuple[Any, Any]] = []
        self._finite = True
        if self._fast:
            self._bounds = list(zip(low.ravel().tolist(), high.ravel().tolist(), strict=True))
            # unbounded elements let infinity through the comparison: check finiteness too
            self._finite = bool(np.isfinite(low).all() and np.isfinite(high).all())

    def __call__(self, action: npt.NDArray[Any]) -> None:
        dtype_ok = action.dtype == self.dtype or (self.float64_ok and action.dtype == np.float64)
        if self._fast and dtype_ok and action.shape == self.shape:
            values = action.ravel().tolist()
            # NaN fails every comparison; infinity fails finite bounds
            if all(lo <= v <= hi for v, (lo, hi) in zip(values, self._bounds, strict=True)) and (
                self._finite or all(math.isfinite(v) for v in values)
            ):
                return
        check_action(
            action,
            dtype=self.dtype,
            shape=self.shape,
            low=self.low,
            high=self.high,
            float64_ok=self.float64_ok,
        )


def practice_seeds(num_envs: int, seeds: Sequence[int]) -> list[int | None]:
    """Gymnasium's vector convention: one seed s gives env i seed s+i; or one per env,
    -1 for an env left unseeded (Gymnasium's ``seed=[1, None, ...]``)."""
    if any(s < 0 for s in seeds) and (len(seeds) != num_envs or min(seeds) < -1):
        raise InvalidArgumentError(
            "seeds must be non-negative integers (-1, in a list of one seed per env, "
            "leaves that env unseeded)"
        )
    if not seeds:
        return [None] * num_envs
    if len(seeds) == num_envs:
        return [None if s == -1 else s for s in seeds]
    if len(seeds) == 1:
        return [seeds[0] + i for i in range(num_envs)]
    raise InvalidArgumentError(
        f"{len(seeds)} seeds for {num_envs} envs: send none, one (env i gets "
        "seed+i) or exactly one per env"
    )


def reset_targets(mask: Sequence[bool], num_envs: int, *, started: bool, session: str) -> list[int]:
    """The envs a Reset restarts: all (no mask), or those ``mask`` selects, once the
    session's first Reset started every env."""
    if not mask:
        return list(range(num_envs))
    if len(mask) != num_envs or not any(mask):
        raise InvalidArgumentError(
            f"reset_mask has {len(mask)} entries ({sum(mask)} true) for {num_envs} "
            "envs: send one per env, at least one true (or none to reset all)"
        )
    if not started:
        raise FailedPreconditionError(
            f"session {session}: the first Reset starts every env; reset_mask only after it"
        )
    return [i for i, m in enumerate(mask) if m]
