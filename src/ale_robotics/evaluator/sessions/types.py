"""The plain values of a session: its kind, Gymnasium's autoreset modes, what a Reset or a
Step returns (:class:`Batch`), and the stop of a completion cut short.

Split from :mod:`.vector` so that the servicer, the manager and the limits name them
without the session's stepping code.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["AUTORESET_MODE", "AUTORESET_MODES", "Batch", "CompletionAborted", "SessionKind"]


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
