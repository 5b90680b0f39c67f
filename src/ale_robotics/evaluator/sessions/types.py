"""The plain values of a session: its kind, Gymnasium's autoreset modes, what a Reset or a
Step returns (:class:`Batch`), and the stop of a completion cut short.

Split from :mod:`.vector` so that the servicer, the manager and the limits name them
without the session's stepping code.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from ale_robotics.model.result import EpisodeRecord
    from ale_robotics.seeds import HiddenSeed

__all__ = [
    "AUTORESET_MODE",
    "AUTORESET_MODES",
    "Batch",
    "CompletionAborted",
    "EvalSink",
    "SessionKind",
]


AUTORESET_MODE = "next_step"
"""Gymnasium's ``AutoresetMode.NEXT_STEP``: the default, advertised in GetSpec."""

AUTORESET_MODES = ("next_step", "same_step", "disabled")
"""Gymnasium's ``AutoresetMode`` values, as OpenSessionRequest.autoreset_mode names them."""


class SessionKind(StrEnum):
    PRACTICE = "practice"
    EVAL = "eval"


class CompletionAborted(Exception):
    """The evaluator is shutting down while it completes abandoned episodes."""


@dataclass(frozen=True)
class Batch:
    """What a Reset (rewards etc. ``None``) or a Step returns for all envs of a session."""

    obs: npt.NDArray[Any]
    infos: list[dict[str, Any]]
    rewards: npt.NDArray[np.float64] | None = None
    terminated: npt.NDArray[np.bool_] | None = None
    truncated: npt.NDArray[np.bool_] | None = None
    episodes_completed: int = 0
    eval_complete: bool = False
    seeds_ignored: bool = False


class EvalSink(Protocol):
    """Where an eval session's episodes go: the run's trusted record
    (:class:`.eval_record.EvalRecorder`), or the measurement of the task's floor
    (:mod:`.floor`: a session abandoned before its first step)."""

    @property
    def seeds(self) -> Sequence[HiddenSeed]:
        """The run's hidden seeds, one per budget episode."""
        ...

    def heartbeat(self) -> None:
        """The session is alive (called on every Step)."""
        ...

    def episode_ended(self, record: EpisodeRecord, done: int) -> None:
        """One more episode ended (``done`` so far)."""
        ...

    def finish(
        self,
        records: Iterable[EpisodeRecord],
        env_steps: int,
        failure: str | None,
        infrastructure: bool = False,
    ) -> None:
        """Every budget episode ended (``failure`` None), or the session cannot be scored."""
        ...
