"""Completing the episodes an agent left in an eval session: doing less never pays.

An eval session whose agent stops early (it closes the session, its run is closed, its
client vanishes) still has a result: every episode it left, running or never started, is
played to its end here with the null action, from exactly the state the agent left it
in, and recorded ``abandoned`` (docs/architecture.md#rules-a-score-must-obey). A close
that cannot finish that (the evaluator shuts down, an env fails) records an
infrastructure failure, never a score.

A job of its own, split from :mod:`.vector`'s :class:`~.vector.Session`, which inherits
it: these methods work on the session's state (declared below) through the same stepper
and bookkeeping as a Step, so abandoning stays exactly playing the null action.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ale_robotics.evaluator.sessions.types import CompletionAborted, EvalSink
from ale_robotics.model.result import EpisodeRecord
from ale_robotics.tasks.spec import TaskSpec

if TYPE_CHECKING:
    from ale_robotics.evaluator.sessions.envs import VectorStepper
    from ale_robotics.evaluator.videos.tape import ActionTape

__all__ = ["EpisodeCompletion"]

log = logging.getLogger(__name__)


class EpisodeCompletion:
    """The completion of an eval session's abandoned episodes (module doc); mixed into
    :class:`~.vector.Session`, whose state it uses."""

    id: str
    task: TaskSpec
    num_envs: int
    env_steps: int
    eval_complete: bool
    _recorder: EvalSink | None
    _records: dict[int, EpisodeRecord]
    _stepper: VectorStepper
    _tape: ActionTape | None
    _null_batch: npt.NDArray[Any]
    _obs: npt.NDArray[Any]
    _ret: npt.NDArray[np.float64]
    _len: npt.NDArray[np.int64]
    _active: list[bool]
    _pending: list[bool]
    _episode: list[int]
    _next_episode: int

    # Session's own, the bookkeeping of a Step (declared here for the type checker only).

    @property
    def budget(self) -> int:
        raise NotImplementedError

    @property
    def episodes_completed(self) -> int:
        raise NotImplementedError

    def _begin_episodes(
        self, which: Sequence[int], seeds: Sequence[int | None] | None = None
    ) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _note_success(self, i: int, info: dict[str, Any]) -> None:
        raise NotImplementedError

    def _end_episode(self, i: int, *, terminated: bool, agent_steps: int | None = None) -> None:
        raise NotImplementedError

    def _record_unfinished(
        self, why: str, infrastructure: bool, abort: threading.Event | None
    ) -> None:
        assert self._recorder is not None
        self.eval_complete = True  # one way or another, nothing more happens here
        failure: str | None = None  # set: an infrastructure failure, never a score
        if infrastructure:
            failure = (
                f"the eval session ended ({why}) after {self.episodes_completed} of "
                f"{self.budget} episodes; the evaluator, not the agent, ended it, so this run "
                "cannot be scored: re-run it"
            )
        else:
            try:
                self._complete_budget(abort)
            except CompletionAborted:
                failure = (
                    f"the evaluator shut down while completing the episodes the agent left "
                    f"({why}; {self.episodes_completed} of {self.budget} ended): this run "
                    "cannot be scored, re-run it"
                )
            except Exception as exc:  # an env failed under the null action: the evaluator's
                log.exception("session %s: completing abandoned episodes failed", self.id)
                failure = (
                    f"the evaluator could not complete the episodes the agent left ({why}): "
                    f"{type(exc).__name__} after {self.episodes_completed} of {self.budget} "
                    "episodes; this run cannot be scored, re-run it"
                )
        records = list(self._records.values())
        self._recorder.finish(records, self.env_steps, failure, failure is not None)

    def _complete_budget(self, abort: threading.Event | None) -> None:
        """Play every episode the agent left with the null action: running ones from
        where they are, then the never-started ones from their hidden-seed resets, as
        many at a time as there are envs (an episode depends on its seed only)."""
        self._play_out(
            [i for i in range(self.num_envs) if self._active[i] and not self._pending[i]], abort
        )
        while self._next_episode < self.budget:
            wave = list(range(min(self.num_envs, self.budget - self._next_episode)))
            self._begin_episodes(wave)
            self._play_out(wave, abort)

    def _play_out(self, which: list[int], abort: threading.Event | None = None) -> None:
        """Step envs ``which`` with the null action, together, until each one's episode
        ends; record each abandoned.

        The envs' TimeLimit (``max_episode_steps``) ends every episode; the bound
        here only turns an env without one into an error instead of a hang.
        """
        agent_steps = {i: int(self._len[i]) for i in which}
        running = list(which)
        for _ in range(self.task.env.max_episode_steps + 1):
            if not running:
                return
            if abort is not None and abort.is_set():
                raise CompletionAborted
            all_obs, all_r, all_term, all_trunc, all_info = self._stepper.step(
                running, self._null_batch[: len(running)]
            )
            if self._tape is not None:
                self._tape.record(self._episode, running, self._null_batch)
            still = []
            for j, i in enumerate(running):
                self._obs[i] = all_obs[j]
                self._ret[i] += float(all_r[j])
                self._len[i] += 1
                self.env_steps += 1
                self._note_success(i, all_info[j])
                if all_term[j] or all_trunc[j]:
                    self._pending[i] = True
                    self._end_episode(i, terminated=bool(all_term[j]), agent_steps=agent_steps[i])
                else:
                    still.append(i)
            running = still
        if running:
            raise RuntimeError(
                f"env {running[0]} of session {self.id} ran {self._len[running[0]]} steps "
                f"without ending, past max_episode_steps = {self.task.env.max_episode_steps}"
            )
