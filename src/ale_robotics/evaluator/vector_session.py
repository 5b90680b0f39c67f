"""One interactive session: ``num_envs`` Gymnasium envs stepped together, as a vector env.

Autoreset follows Gymnasium 1.x's default, ``AutoresetMode.NEXT_STEP`` (what
``SyncVectorEnv`` does): the Step that ends an env's episode returns its last
observation with ``terminated``/``truncated`` set; the *next* Step ignores that
env's action, resets it and returns its first observation with reward 0, both
flags false and the reset's info. A session therefore behaves exactly like an
in-process ``SyncVectorEnv`` (a test checks this step for step), so Gymnasium
code needs no adaptation and no ``final_obs`` has to travel.

Eval sessions add the trusted bookkeeping: episode ``i`` of the budget runs on
the run's ``i``-th hidden seed, client seeds are ignored, an episode a Reset or
a close cuts short counts as it stands (no cherry-picking), an env's
``info["success"]`` at an episode's last step is recorded as its success (an
abandoned episode of such a task is a failure), and once every budgeted
episode has ended the result is recorded (:class:`EvalRecorder`).
When fewer budget episodes remain than envs, the spare envs go idle: they
return their last observation, reward 0 and no flags, and ignore actions.

Inputs are validated here, before anything touches an env, so a client mistake
is always a precise :class:`~ale_robotics.errors.AleError` and never INTERNAL.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ale_robotics.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    OutOfRangeError,
)
from ale_robotics.evaluator.result import EpisodeRecord
from ale_robotics.tasks.spec import TaskSpec

if TYPE_CHECKING:
    from ale_robotics.evaluator.eval_record import EvalRecorder

__all__ = ["AUTORESET_MODE", "Batch", "Session", "SessionKind", "make_envs"]

AUTORESET_MODE = "next_step"
"""Gymnasium's ``AutoresetMode.NEXT_STEP``, advertised in OpenSessionResponse."""


class SessionKind(StrEnum):
    PRACTICE = "practice"
    EVAL = "eval"


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


def make_envs(task: TaskSpec, n: int) -> list[Any]:
    """``n`` fresh envs with the task's server-side step limit (Gymnasium's TimeLimit)."""
    import gymnasium as gym

    return [
        gym.make(
            task.env.gym_id,
            max_episode_steps=task.env.max_episode_steps,
            disable_env_checker=True,
            **task.env.kwargs,
        )
        for _ in range(n)
    ]


class Session:
    """State of one session. Not thread-safe: :class:`SessionManager` serializes calls."""

    def __init__(
        self,
        session_id: str,
        task: TaskSpec,
        kind: SessionKind,
        envs: list[Any],
        run_id: str = "",
        recorder: EvalRecorder | None = None,
    ) -> None:
        if (kind is SessionKind.EVAL) != (recorder is not None):
            raise ValueError("an eval session needs a recorder, a practice session none")
        self.id = session_id
        self.task = task
        self.kind = kind
        self.run_id = run_id
        self.num_envs = len(envs)
        self.lock = threading.Lock()
        self.last_used = time.monotonic()
        self.closed = False
        self._envs = envs
        self._recorder = recorder
        act, obs = envs[0].action_space, envs[0].observation_space
        self.action_dtype: np.dtype[Any] = np.dtype(act.dtype)
        self.action_shape: tuple[int, ...] = (self.num_envs, *act.shape)
        self._low = np.broadcast_to(np.asarray(act.low, self.action_dtype), self.action_shape)
        self._high = np.broadcast_to(np.asarray(act.high, self.action_dtype), self.action_shape)
        self._obs = np.zeros((self.num_envs, *obs.shape), dtype=obs.dtype)
        self._started = False
        self._pending = [False] * self.num_envs  # episode ended: autoreset on the next Step
        self._active = [False] * self.num_envs  # running an episode (eval: False when idle)
        self._episode: list[int] = [-1] * self.num_envs  # eval: budget index of the episode
        self._ret = [0.0] * self.num_envs
        self._len = [0] * self.num_envs
        # info["success"] of each env's latest step (None: the env does not report it).
        # Once the task is known to report success, an abandoned episode counts as failed.
        self._success: list[bool | None] = [None] * self.num_envs
        self._reports_success = any(m.name == "success_rate" for m in task.metrics)
        self._next_episode = 0
        self._records: dict[int, EpisodeRecord] = {}
        self.env_steps = 0
        self.eval_complete = False

    # ---------------------------------------------------------------- public --

    @property
    def budget(self) -> int:
        return self.task.eval.episodes if self.kind is SessionKind.EVAL else 0

    @property
    def episodes_completed(self) -> int:
        return len(self._records)

    def reset(self, seeds: Sequence[int]) -> Batch:
        """Start an episode in every env (eval: the next budget episodes; cut-off ones count)."""
        self._check_not_complete()
        ignored = self.kind is SessionKind.EVAL and len(seeds) > 0
        per_env = self._practice_seeds(seeds) if self.kind is SessionKind.PRACTICE else None
        if self.kind is SessionKind.EVAL and self._next_episode >= self.budget:
            raise OutOfRangeError(
                f"all {self.budget} episodes of this eval session have started; finish the "
                "running ones with Step (a Reset would start none)"
            )
        infos: list[dict[str, Any]] = []
        for i in range(self.num_envs):
            if self.kind is SessionKind.EVAL and self._active[i] and not self._pending[i]:
                self._end_episode(i, terminated=False, abandoned=True)
            self._pending[i] = False
            infos.append(self._begin_episode(i, None if per_env is None else per_env[i]))
        self._started = True
        return Batch(
            obs=self._obs,
            infos=infos,
            episodes_completed=self.episodes_completed,
            seeds_ignored=ignored,
        )

    def step(self, action: npt.NDArray[Any]) -> Batch:
        """One step of every env with NEXT_STEP autoreset; validates the action first."""
        if not self._started:
            raise FailedPreconditionError(
                f"session {self.id}: call Reset before Step (no episode is running yet)"
            )
        self._check_not_complete()
        self.check_action(action)
        n = self.num_envs
        rewards = np.zeros(n, dtype=np.float64)
        terminated = np.zeros(n, dtype=np.bool_)
        truncated = np.zeros(n, dtype=np.bool_)
        infos: list[dict[str, Any]] = []
        for i in range(n):
            if self._pending[i]:
                self._pending[i] = False
                infos.append(self._begin_episode(i, None))
            elif self._active[i]:
                obs, r, term, trunc, info = self._envs[i].step(action[i])
                self._obs[i] = obs
                rewards[i] = r
                self._ret[i] += float(r)
                self._len[i] += 1
                self.env_steps += 1
                infos.append(info)
                if "success" in info:
                    self._reports_success = True
                    self._success[i] = bool(info["success"])
                if term or trunc:
                    terminated[i] = bool(term)
                    truncated[i] = bool(trunc)
                    self._pending[i] = True
                    if self.kind is SessionKind.EVAL:
                        self._end_episode(i, terminated=bool(term), abandoned=False)
            else:
                infos.append({})
        if self._recorder is not None:
            self._recorder.heartbeat()
            if self.episodes_completed == self.budget:
                self._recorder.finish(list(self._records.values()), self.env_steps, None)
                self.eval_complete = True
        return Batch(
            obs=self._obs,
            infos=infos,
            rewards=rewards,
            terminated=terminated,
            truncated=truncated,
            episodes_completed=self.episodes_completed,
            eval_complete=self.eval_complete,
        )

    def close(self, why: str, *, infrastructure: bool = False) -> int:
        """Release the envs; an unfinished eval session is recorded as it stands.

        ``infrastructure``: the evaluator, not the agent, ended the session (a
        shutdown), so an incomplete budget is not held against the agent.
        """
        if self.closed:
            return self.episodes_completed
        self.closed = True
        try:
            if self._recorder is not None and not self.eval_complete:
                for i in range(self.num_envs):
                    if self._active[i] and not self._pending[i]:
                        self._end_episode(i, terminated=False, abandoned=True)
                reason = None
                if self.episodes_completed < self.budget:
                    reason = (
                        f"the eval session ended ({why}) after {self.episodes_completed} of "
                        f"{self.budget} episodes; the metric is defined over the whole budget"
                    )
                self._recorder.finish(
                    list(self._records.values()), self.env_steps, reason, infrastructure
                )
        finally:
            for env in self._envs:
                env.close()
        return self.episodes_completed

    def check_action(self, action: npt.NDArray[Any]) -> None:
        """INVALID_ARGUMENT unless ``action`` has the spec's dtype, [num_envs, *shape], bounds."""
        if action.dtype != self.action_dtype:
            raise InvalidArgumentError(
                f"action dtype is {action.dtype.name}; the action spec is "
                f"{self.action_dtype.name}: cast the action before sending it"
            )
        if action.shape != self.action_shape:
            raise InvalidArgumentError(
                f"action shape is {list(action.shape)}; this session needs "
                f"[num_envs, *action_shape] = {list(self.action_shape)}"
            )
        if action.dtype.kind == "f" and not np.isfinite(action).all():
            env = int(np.argwhere(~np.isfinite(action))[0][0])
            raise InvalidArgumentError(f"action for env {env} is NaN or infinite")
        out = (action < self._low) | (action > self._high)
        if out.any():
            where = tuple(int(k) for k in np.argwhere(out)[0])
            raise InvalidArgumentError(
                f"action for env {where[0]} is out of bounds: element {list(where[1:])} is "
                f"{action[where]!r}, allowed [{self._low[where]!r}, {self._high[where]!r}]"
            )

    # --------------------------------------------------------------- private --

    def _check_not_complete(self) -> None:
        if self.eval_complete:
            raise OutOfRangeError(
                f"the eval budget of {self.budget} episodes is used up and the result is "
                "recorded; close the session"
            )

    def _practice_seeds(self, seeds: Sequence[int]) -> list[int | None]:
        """Gymnasium's vector convention: one seed s gives env i seed s+i; or one per env."""
        if any(s < 0 for s in seeds):
            raise InvalidArgumentError("seeds must be non-negative integers")
        if not seeds:
            return [None] * self.num_envs
        if len(seeds) == 1:
            return [seeds[0] + i for i in range(self.num_envs)]
        if len(seeds) == self.num_envs:
            return list(seeds)
        raise InvalidArgumentError(
            f"{len(seeds)} seeds for {self.num_envs} envs: send none, one (env i gets "
            "seed+i) or exactly one per env"
        )

    def _begin_episode(self, i: int, seed: int | None) -> dict[str, Any]:
        """Reset env ``i`` (eval: onto the next hidden seed, or idle once the budget is out)."""
        if self._recorder is not None:
            if self._next_episode >= self.budget:
                self._active[i] = False
                return {}
            self._episode[i] = self._next_episode
            seed = self._recorder.seeds[self._next_episode].value
            self._next_episode += 1
        obs, info = self._envs[i].reset(seed=seed)
        self._obs[i] = obs
        self._active[i] = True
        self._ret[i] = 0.0
        self._len[i] = 0
        self._success[i] = None
        return dict(info)

    def _end_episode(self, i: int, *, terminated: bool, abandoned: bool) -> None:
        assert self._recorder is not None
        index = self._episode[i]
        success = self._success[i]
        if abandoned or (success is None and self._reports_success):
            # cut short (or silent at the end): not solved at the protocol's last step
            success = False if self._reports_success else None
        record = EpisodeRecord(
            index=index,
            seed_commitment=self._recorder.seeds[index].commitment,
            episode_return=self._ret[i],
            length=self._len[i],
            terminated=terminated,
            abandoned=abandoned,
            success=success,
        )
        self._records[index] = record
        self._active[i] = False
        self._recorder.episode_ended(record, self.episodes_completed)
