"""One episode's outcome and the policy fault, shared by every rollout kind.

Plain data in the bottom layer (imports nothing of ours but its sibling
:mod:`.control_loop`), so that the rollout kinds (:mod:`ale_robotics.rollouts`) that
produce outcomes and the evaluator that reads them
(:mod:`ale_robotics.evaluator.batch.pipeline`) do not import each other.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ale_robotics.model.control_loop import ControlLoop

__all__ = ["EpisodeOutcome", "PolicyFault", "check_finite"]


@dataclass(frozen=True)
class EpisodeOutcome:
    index: int
    ret: float
    length: int
    terminated: bool
    success: bool | None = None
    """Goal tasks (replay backend): whether the episode ended solved; None otherwise."""
    final_distance: float | None = None
    """Goal tasks: distance between achieved and desired goal after the last step."""
    collided: bool | None = None
    """Planning tasks: the returned path hit something (self or scene); None otherwise."""
    planning_time_s: float | None = None
    """Planning tasks: seconds the planner took on this problem, measured by the evaluator on
    the task's clock (``planning.clock``: wall-clock or CPU seconds)."""
    planning_wall_time_s: float | None = None
    """Planning tasks timed in CPU seconds: the wall-clock seconds beside them; else None."""
    reason: str | None = None
    """Planning tasks: why the path failed validation ("" on success); None otherwise."""
    control: ControlLoop | None = None
    """Kinds that run the policy as a real-time controller (``ros``): the loop's timing and
    hold schedule (:mod:`.control_loop`); None otherwise."""


class PolicyFault(Exception):
    """The submitted policy output a non-finite action, or its actions made a reward non-finite.

    This is the submission's failure, never the infrastructure's: the inputs are
    frozen and the rollout deterministic, so a retry would fail at the same step,
    and the policy (not the evaluator) chose the values. Raised in the worker,
    where the value is produced, so it pickles back through the process pool
    (all state is in ``args``).

    Two texts: :attr:`reason` says where (episode index and step, counted from 1)
    and goes only where the harness reads it (the official result and the signed
    ``result`` event); :attr:`public_reason` leaves that out, for the job status
    the agent polls, because when a policy fails on a hidden episode is
    information about the hidden episodes (a "fall detector" would learn when
    each one fell), which the agent never gets.
    """

    def __init__(self, what: str, value: str, episode: int, step: int) -> None:
        super().__init__(what, value, episode, step)
        self.what = what
        """'action' or 'reward'."""
        self.value = value
        """The first non-finite value: 'nan', 'inf' or '-inf'."""
        self.episode = episode
        self.step = step

    def _text(self, where: str) -> str:
        if self.what == "action":
            return (
                f"the policy produced a non-finite action ({self.value}){where}: "
                "the submission must output finite actions"
            )
        return (
            f"the policy's actions made the reward non-finite ({self.value}){where}: "
            "the submission must output actions the simulation can take"
        )

    @property
    def reason(self) -> str:
        return self._text(f" in episode {self.episode} at step {self.step}")

    @property
    def public_reason(self) -> str:
        return self._text("") + " (the episode and step are in the official result)"

    def __str__(self) -> str:
        return self.reason


def check_finite(what: str, batch: npt.NDArray[Any], episodes: Sequence[int], step: int) -> None:
    """Raise :class:`PolicyFault` for the first row of ``batch`` holding a NaN or inf.

    ``batch`` has one row per episode (actions ``(n, act_dim)`` or rewards ``(n,)``);
    ``episodes[row]`` is that row's episode index and ``step`` the 1-based step the
    values belong to. The common all-finite case costs one vectorized check.
    """
    arr = np.asarray(batch)
    if math.isfinite(arr.sum()):  # the fast path; a sum that overflows is checked in full
        return
    finite = np.isfinite(arr)
    if finite.all():
        return
    row, *col = (int(i) for i in np.argwhere(~finite)[0])
    value = float(arr[(row, *col)])
    raise PolicyFault(what, str(value), int(episodes[row]), step)
