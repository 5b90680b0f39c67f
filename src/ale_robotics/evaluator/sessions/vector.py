"""One interactive session: ``num_envs`` Gymnasium envs stepped together, as a vector env.

Autoreset is one of Gymnasium 1.x's three modes, chosen at OpenSession, each
exactly as ``SyncVectorEnv`` does it (a test checks this step for step):

* ``next_step`` (the default): the Step that ends an env's episode returns its
  last observation with ``terminated``/``truncated`` set; the *next* Step ignores
  that env's action, resets it and returns its first observation with reward 0,
  both flags false and the reset's info;
* ``same_step``: the Step that ends an episode resets the env at once and returns
  the new episode's first observation, the ended one's last observation and info
  in the info's ``final_obs`` and ``final_info`` (what SB3's VecEnv needs);
* ``disabled``: an ended env stays ended; Reset with a ``reset_mask`` restarts it,
  and a Step while it has not been is FAILED_PRECONDITION.

Reset takes a ``reset_mask`` in every mode (only those envs restart; the others
keep their episode and observation, and get an empty info), and per-env seeds
may leave an env unseeded (-1 on the wire, Gymnasium's ``None``).

Eval sessions add the trusted bookkeeping: episode ``i`` of the budget runs on
the run's ``i``-th hidden seed, client seeds are ignored, an env's
``info["success"]`` at an episode's last step is recorded as its success, and
once every budgeted episode has ended the result is recorded
(:class:`EvalRecorder`). When fewer budget episodes remain than envs, the spare
envs go idle: they return their last observation, reward 0 and no flags, and
ignore actions.

Doing less never pays (docs/architecture.md#rules-a-score-must-obey). An episode the agent does not
finish (a Reset cuts it short, or the session closes) is played on to its end
here with :func:`null_action`, from exactly the state the agent left it in, and
an episode never started is played the same way from its hidden-seed reset;
each is recorded ``abandoned`` with the steps the agent took. Stopping is then
exactly equal to sending the null action yourself, whatever the metric: a short
episode of a cost can no longer beat the paper, an unplayed episode can no
longer be skipped. The evaluator pays for that simulation (at most the budget's
episodes x ``max_episode_steps`` steps), and a close that cannot finish it (the
evaluator shuts down, an env fails) records an infrastructure failure, never a
score.

Practice sessions of a run charge its training budget
(:class:`~ale_robotics.evaluator.runs.training_budget.PracticeMeter`): one agent
step per env per Step, checked before any env moves.

Inputs are validated here, before anything touches an env, so a client mistake
is always a precise :class:`~ale_robotics.errors.AleError` and never INTERNAL.

A Step moves all the envs that step in one call of the session's
:class:`~.envs.VectorStepper` (MuJoCo envs: natively, bit-exact to
``env.step``; see :mod:`.envs`), then does the per-env bookkeeping in env
order (autoreset, eval episodes). Abandoned episodes are played out through the
same stepper, all the envs that need it together, so abandoning stays exactly
playing the null action (:mod:`.completion`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ale_robotics.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    OutOfRangeError,
)
from ale_robotics.evaluator.sessions import rendering
from ale_robotics.evaluator.sessions.completion import EpisodeCompletion
from ale_robotics.evaluator.sessions.envs import make_stepper, null_action
from ale_robotics.evaluator.sessions.inputs import ActionCheck, practice_seeds, reset_targets
from ale_robotics.evaluator.sessions.types import (
    AUTORESET_MODE,
    AUTORESET_MODES,
    Batch,
    EvalSink,
    SessionKind,
)
from ale_robotics.model.result import EpisodeRecord
from ale_robotics.tasks.spec import TaskSpec

if TYPE_CHECKING:
    from ale_robotics.evaluator.runs.training_budget import PracticeMeter
    from ale_robotics.evaluator.videos.tape import ActionTape

__all__ = ["Session"]


class _Moved(NamedTuple):
    """What the envs that moved in a Step returned: ``obs`` and ``infos`` in the order of
    the envs that moved, rewards and flags for every env (0 and False where it did not)."""

    obs: Sequence[Any]
    infos: Sequence[dict[str, Any]]
    rewards: npt.NDArray[np.float64]
    terminated: npt.NDArray[np.bool_]
    truncated: npt.NDArray[np.bool_]


class Session(EpisodeCompletion):
    """State of one session. Not thread-safe: :class:`SessionManager` serializes calls."""

    def __init__(
        self,
        session_id: str,
        task: TaskSpec,
        kind: SessionKind,
        envs: list[Any],
        run_id: str = "",
        recorder: EvalSink | None = None,
        meter: PracticeMeter | None = None,
        render_mode: str | None = None,
        float64_actions: bool = False,
        autoreset_mode: str = AUTORESET_MODE,
        tape: ActionTape | None = None,
    ) -> None:
        if autoreset_mode not in AUTORESET_MODES:
            raise InvalidArgumentError(
                f"autoreset_mode {autoreset_mode!r}: one of {list(AUTORESET_MODES)} (Gymnasium's "
                "AutoresetMode values)"
            )
        if (kind is SessionKind.EVAL) != (recorder is not None):
            raise ValueError("an eval session needs a recorder, a practice session none")
        if kind is SessionKind.EVAL and meter is not None:
            raise ValueError("eval sessions are not training: they charge no budget")
        self.id = session_id
        self.task = task
        self.kind = kind
        self.run_id = run_id
        self.num_envs = len(envs)
        self.lock = threading.Lock()
        self.last_used = time.monotonic()
        self.closed = False
        self.autoreset_mode = autoreset_mode
        self.render_mode = render_mode
        """The envs' render mode (None: they render nothing, Render is refused)."""
        self.render_fps = rendering.render_fps(envs[0])
        self._envs = envs
        self._stepper = make_stepper(task, envs)
        self._recorder = recorder
        self._meter = meter
        self._tape = tape  # eval: the first episodes' actions, for their videos
        act, obs = envs[0].action_space, envs[0].observation_space
        self.action_dtype: np.dtype[Any] = np.dtype(act.dtype)
        self.float64_actions = float64_actions and self.action_dtype.kind == "f"
        """Step also takes float64 actions, passed to the envs unrounded (OpenSession's
        ``float64_actions``: what a local env does with the float64 arrays of numpy code)."""
        self.action_shape: tuple[int, ...] = (self.num_envs, *act.shape)
        self._low = np.broadcast_to(np.asarray(act.low, self.action_dtype), self.action_shape)
        self._high = np.broadcast_to(np.asarray(act.high, self.action_dtype), self.action_shape)
        self._check_action = ActionCheck(
            self.action_dtype, self.action_shape, self._low, self._high, self.float64_actions
        )
        self.null_action = null_action(act.low, act.high, self.action_dtype)
        """One env's null action (shape ``action_shape[1:]``): what abandoned episodes get."""
        self._null_batch = np.ascontiguousarray(
            np.broadcast_to(self.null_action, self.action_shape)
        )
        self._obs = np.zeros((self.num_envs, *obs.shape), dtype=obs.dtype)
        self.observation_shape: tuple[int, ...] = tuple(obs.shape)
        """One env's observation shape (a Reset's or Step's ``obs`` is ``[num_envs, *this]``)."""
        self.observation_dtype: np.dtype[Any] = self._obs.dtype
        self._started = False
        self._pending = [False] * self.num_envs  # episode ended: autoreset on the next Step
        self._active = [False] * self.num_envs  # running an episode (eval: False when idle)
        self._every = list(range(self.num_envs))
        self._episode: list[int] = [-1] * self.num_envs  # eval: budget index of the episode
        self._ret = np.zeros(self.num_envs, dtype=np.float64)  # the running episodes' returns
        self._len = np.zeros(self.num_envs, dtype=np.int64)  # ... and steps
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

    def reset(self, seeds: Sequence[int], mask: Sequence[bool] = ()) -> Batch:
        """Start an episode in every env, or in those ``mask`` selects (eval: the next
        budget episodes); the others keep theirs and get an empty info.

        In an eval session a running episode is first played to its end with the
        null action (abandoned), so a Reset cannot cut a bad episode short.
        """
        self._check_not_complete()
        which = reset_targets(mask, self.num_envs, started=self._started, session=self.id)
        ignored = self.kind is SessionKind.EVAL and len(seeds) > 0
        per_env = (
            practice_seeds(self.num_envs, seeds) if self.kind is SessionKind.PRACTICE else None
        )
        if self.kind is SessionKind.EVAL and self._next_episode >= self.budget:
            raise OutOfRangeError(
                f"all {self.budget} episodes of this eval session have started; finish the "
                "running ones with Step (a Reset would start none)"
            )
        if self._meter is not None:
            self._meter.check_reset()
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        if self.kind is SessionKind.EVAL:
            self._play_out([i for i in which if self._active[i] and not self._pending[i]])
        for i in which:
            self._pending[i] = False
        begun = self._begin_episodes(
            which, None if per_env is None else [per_env[i] for i in which]
        )
        for i, info in zip(which, begun, strict=True):
            infos[i] = info
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
        if self.autoreset_mode == "disabled" and any(self._pending):
            ended = [i for i, p in enumerate(self._pending) if p]
            raise FailedPreconditionError(
                f"env(s) {ended} of session {self.id} ended their episode and autoreset is "
                "disabled: Reset them first (reset_mask), then Step"
            )
        if self._meter is not None:
            self._meter.charge(self.num_envs)  # before any env moves: refused means untouched
        moving, moved = self._move(action)
        infos, restart = self._settle(moving, moved)
        # All at once after the loop: an env's reset and the next env's end are independent,
        # and eval episodes still begin in env order (_begin_episodes assigns them in order).
        if restart:
            for i, info in zip(restart, self._begin_episodes(restart), strict=True):
                infos[i] = {**infos[i], **info}
        if self._recorder is not None:
            self._recorder.heartbeat()
            if self.episodes_completed == self.budget:
                self._recorder.finish(list(self._records.values()), self.env_steps, None)
                self.eval_complete = True
        return Batch(
            obs=self._obs,
            infos=infos,
            rewards=moved.rewards,
            terminated=moved.terminated,
            truncated=moved.truncated,
            episodes_completed=self.episodes_completed,
            eval_complete=self.eval_complete,
        )

    def _move(self, action: npt.NDArray[Any]) -> tuple[list[int], _Moved]:
        """Step the envs that step now (all of them but those waiting for their autoreset
        and, in eval, those left idle), together; which ones, and what they returned.

        The envs move first, all together, and what is the same for each is done for all
        at once; what depends on the env (autoreset, eval episodes) then goes env by env
        (:meth:`_settle`). Envs are independent, so this equals stepping and resetting
        them one by one."""
        n = self.num_envs
        if all(self._active) and not any(self._pending):
            moving = self._every  # the usual Step: every env moves, whole arrays, no indices
        else:
            moving = [i for i in range(n) if self._active[i] and not self._pending[i]]
        if len(moving) == n:
            obs_k, r_k, term_k, trunc_k, info_k = self._stepper.step(moving, action)
            if self._tape is not None:
                self._tape.record(self._episode, moving, action)
            # the stepper's arrays are its answer to this Step alone: taken as they are
            moved = _Moved(
                obs_k,
                info_k,
                np.asarray(r_k, dtype=np.float64),
                np.asarray(term_k, dtype=np.bool_),
                np.asarray(trunc_k, dtype=np.bool_),
            )
            self._obs[:] = obs_k
            self._ret += moved.rewards
            self._len += 1
            self.env_steps += n
            return moving, moved
        moved = _Moved(
            (), (), np.zeros(n, np.float64), np.zeros(n, np.bool_), np.zeros(n, np.bool_)
        )
        if moving:
            acts = action[moving]
            obs_k, r_k, term_k, trunc_k, info_k = self._stepper.step(moving, acts)
            if self._tape is not None:
                self._tape.record(self._episode, moving, acts)
            moved = moved._replace(obs=obs_k, infos=info_k)
            self._obs[moving] = obs_k
            moved.rewards[moving] = r_k
            moved.terminated[moving] = term_k
            moved.truncated[moving] = trunc_k
            self._ret[moving] += moved.rewards[moving]
            self._len[moving] += 1
            self.env_steps += len(moving)
        return moving, moved

    def _settle(self, moving: list[int], moved: _Moved) -> tuple[list[dict[str, Any]], list[int]]:
        """After the envs moved: every env's info, and the envs whose next episode begins
        now, in env order. Env by env, but only for the envs it concerns: those whose
        episode ended now, those waiting for their autoreset, and (eval) the success of
        every env that moved, each noted before its own episode's end is recorded."""
        n = self.num_envs
        terminated, truncated = moved.terminated, moved.truncated
        restart = [i for i in range(n) if self._pending[i]] if any(self._pending) else []
        for i in restart:  # ended last Step (next_step autoreset): they restart now
            self._pending[i] = False
        if not moving:
            return [{} for _ in range(n)], restart
        if len(moving) == n:
            infos = list(moved.infos)
        else:
            infos = [{} for _ in range(n)]
            for j, i in enumerate(moving):
                infos[i] = moved.infos[j]
        ended = np.flatnonzero(terminated | truncated).tolist()
        for i in ended:
            self._pending[i] = True
        if self._recorder is not None:
            for j, i in enumerate(moving):
                self._note_success(i, moved.infos[j])
                if terminated[i] or truncated[i]:
                    self._end_episode(i, terminated=bool(terminated[i]))
        if ended and self.autoreset_mode == "same_step":
            row = None if len(moving) == n else {i: j for j, i in enumerate(moving)}
            for i in ended:
                self._pending[i] = False
                j = i if row is None else row[i]
                infos[i] = {"final_obs": np.array(moved.obs[j]), "final_info": infos[i]}
            restart = sorted(restart + ended) if restart else ended
        return infos, restart

    def close(
        self, why: str, *, infrastructure: bool = False, abort: threading.Event | None = None
    ) -> int:
        """Release the envs; an unfinished eval session is completed, then recorded.

        Every episode the agent left (running or never started) is played to its
        end with the null action and the result recorded as for a finished
        session. ``infrastructure``: the evaluator, not the agent, ended the
        session (a shutdown), so nothing is completed on the agent's behalf and
        the run fails as the evaluator's fault. ``abort`` set while completing
        (the evaluator is shutting down) or an env failing on the way also ends
        the run as an infrastructure failure: a result that cannot be completed
        is never scored.
        """
        if self.closed:
            return self.episodes_completed
        self.closed = True
        try:
            if self._recorder is not None and not self.eval_complete:
                self._record_unfinished(why, infrastructure, abort)
        finally:
            if self._meter is not None:
                self._meter.flush()
            close_stepper = getattr(self._stepper, "close", None)
            if close_stepper is not None:
                close_stepper()  # a native stepper's helper thread
            if self.render_mode is not None:
                rendering.close_envs(self._envs)
            else:
                for env in self._envs:
                    env.close()
        return self.episodes_completed

    def render(self) -> npt.NDArray[np.uint8]:
        """Every env's current frame, ``[num_envs, height, width, 3]`` uint8."""
        if self.render_mode is None:
            raise FailedPreconditionError(
                f"session {self.id} was opened without render_mode: open one with "
                f"render_mode in {list(rendering.offered_modes(self.task))} to get frames"
            )
        return rendering.render(self.task, self._envs)

    def check_action(self, action: npt.NDArray[Any]) -> None:
        """INVALID_ARGUMENT unless ``action`` has the spec's dtype (or float64, see
        :attr:`float64_actions`), [num_envs, *shape] and is within the bounds."""
        self._check_action(action)

    # --------------------------------------------------------------- private --

    def _check_not_complete(self) -> None:
        if self.eval_complete:
            raise OutOfRangeError(
                f"the eval budget of {self.budget} episodes is used up and the result is "
                "recorded; close the session"
            )

    def _note_success(self, i: int, info: dict[str, Any]) -> None:
        if "success" in info:
            self._reports_success = True
            self._success[i] = bool(info["success"])

    def _begin_episodes(
        self, which: Sequence[int], seeds: Sequence[int | None] | None = None
    ) -> list[dict[str, Any]]:
        """Reset envs ``which`` (``seeds[j]`` for ``which[j]``; eval: each onto the next
        hidden seed, in the order given, or idle once the budget is out), all in one call
        of the stepper; their reset infos (``{}`` for one left idle), in that order."""
        start: list[int] = []
        start_seeds: list[int | None] = []
        for j, i in enumerate(which):
            seed = None if seeds is None else seeds[j]
            if self._recorder is not None:
                if self._next_episode >= self.budget:
                    self._active[i] = False
                    continue
                self._episode[i] = self._next_episode
                seed = self._recorder.seeds[self._next_episode].value
                self._next_episode += 1
            start.append(i)
            start_seeds.append(seed)
        if not start:
            return [{} for _ in which]
        obs, infos = self._stepper.reset(start, start_seeds)
        begun: dict[int, dict[str, Any]] = {}
        for i, row, info in zip(start, obs, infos, strict=True):
            self._obs[i] = row
            self._active[i] = True
            self._ret[i] = 0.0
            self._len[i] = 0
            self._success[i] = None
            begun[i] = dict(info)
        return [begun.get(i, {}) for i in which]

    def _end_episode(self, i: int, *, terminated: bool, agent_steps: int | None = None) -> None:
        """Record env ``i``'s episode; ``agent_steps`` set: the evaluator finished it."""
        assert self._recorder is not None
        index = self._episode[i]
        success = self._success[i]
        if success is None and self._reports_success:
            success = False  # silent at its last step: not solved then
        record = EpisodeRecord(
            index=index,
            seed_commitment=self._recorder.seeds[index].commitment,
            episode_return=float(self._ret[i]),
            length=int(self._len[i]),
            terminated=terminated,
            abandoned=agent_steps is not None,
            success=success,
            agent_steps=int(self._len[i]) if agent_steps is None else agent_steps,
        )
        self._records[index] = record
        self._active[i] = False
        self._recorder.episode_ended(record, self.episodes_completed)
