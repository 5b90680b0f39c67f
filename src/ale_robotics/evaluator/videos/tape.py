"""The actions an interactive run sent in its first eval episodes, kept for their videos.

The evaluator has no policy of an interactive agent's: all it can show is what the agent
did. So an eval session keeps, for its first K budget episodes, every action its envs
were stepped with (the agent's, and the null actions the evaluator played for an episode
the agent abandoned), exactly as the envs got them (dtype included). An env reset on the
episode's hidden seed and stepped with the same actions is the same episode, which the
renderer checks against the recorded return (:mod:`.render`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["ActionTape", "tape_key"]


def tape_key(index: int) -> str:
    """The npz key of episode ``index``'s actions."""
    return f"episode-{index}"


class ActionTape:
    """The actions of budget episodes ``0 .. episodes-1`` of one eval session, in step order.

    Recording copies one action row per stepped env (a few bytes each); episodes past the
    first ``episodes`` cost one comparison. Not thread-safe: the session that owns it is
    called one request at a time.
    """

    def __init__(self, episodes: int) -> None:
        self.episodes = episodes
        self._steps: dict[int, list[npt.NDArray[Any]]] = {}

    def record(
        self, episode_of_env: Sequence[int], which: Sequence[int], actions: npt.NDArray[Any]
    ) -> None:
        """Env ``which[j]`` (running budget episode ``episode_of_env[which[j]]``) was stepped
        with ``actions[j]``."""
        for row, env in enumerate(which):
            episode = episode_of_env[env]
            if 0 <= episode < self.episodes:
                self._steps.setdefault(episode, []).append(np.array(actions[row], copy=True))

    def arrays(self) -> dict[str, npt.NDArray[Any]]:
        """Each taped episode's actions, ``[steps, *action_shape]``, keyed by :func:`tape_key`."""
        return {tape_key(e): np.stack(rows) for e, rows in sorted(self._steps.items()) if rows}
