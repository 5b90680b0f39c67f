"""Interactive sessions' native step: a session's Gymnasium MuJoCo envs stepped in one loop.

A batched interactive session of 64 envs used to spend most of its Step in
Gymnasium's Python: per env, three wrappers, the env's ``step``, observation,
reward and info built from scalars. :class:`NativeStepper` keeps the real env
objects (their ``np_random``, ``render`` and ``close`` stay theirs) and replaces
their ``step`` and, for a family that draws reset states, their ``reset``
(:meth:`NativeStepper.reset`, the same draws from each env's ``np_random``). For
the envs that step, it gathers what each
env's ``MjData`` holds (:class:`~.families.StepView`), writes each env's action
to its ``ctrl`` and calls ``mj_step`` on it, gathers again, and computes
observation, reward, termination and info for all envs at once with the env's
family (:mod:`.families`, the formulas the batch kind uses too). A Step that moves
a single env calls that env's own ``step`` instead: for one row the batch path's
numpy costs more than Gymnasium's scalar code (``NativeStepper._one``).

**Bit-exact, not close.** Each env keeps its own ``MjData``, so the constraint
solver's warm start and every other piece of state carry over between control
steps exactly as in ``env.step`` (``mujoco.rollout`` would have to be given a
warm start, and the batch kind's zero warm start is not Gymnasium's). The
physics is what ``MujocoEnv.do_simulation`` does: ``data.ctrl[:] = action``, then
``mj_step(model, data, nstep=frame_skip)``. Gymnasium then calls
``mj_rnePostConstraint``, which only fills ``cacc``, ``cfrc_int`` and ``cfrc_ext``:
no family here reads them and the next ``mj_step`` recomputes them, so it is
called only for a family whose views ask for one of those fields.

**The wrappers' part.** ``gym.make`` wraps the env in ``TimeLimit`` and
``OrderEnforcing`` (the env checker is off, see :mod:`ale_robotics.envs.make`).
Both are re-done here on the wrapper objects themselves: a step before any
reset raises Gymnasium's ``ResetNeeded``, and the ``TimeLimit``'s own
``_elapsed_steps`` is counted, so truncation falls at ``max_episode_steps``
exactly and a later plain ``env.step`` (or ``reset``) sees a consistent count.
Envs with any other wrapper, or with ``render_mode="human"`` (whose step draws a
frame), get no native stepper (:func:`stepper_for` returns None) and keep their
own step.

**Types.** Gymnasium's infos mix Python and numpy scalars (Hopper's
``reward_survive`` is a ``float``, its ``x_position`` a ``numpy.float64``); a
remote env must give the same types, and the family says which are which
(:meth:`~.families.StepOut.infos`). That every value, type and flag equals
Gymnasium's is pinned per family by ``tests/rollouts/mujoco_rollout/`` and per
session, against ``SyncVectorEnv`` step for step, by
``tests/evaluator/sessions/test_native_sessions.py``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ale_robotics.rollouts.mujoco_rollout.families import FAMILIES, Family, FamilyEnv, StepView
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["NativeStepper", "ResetBatch", "StepBatch", "stepper_for"]

StepBatch = tuple[
    npt.NDArray[Any],
    npt.NDArray[np.float64],
    npt.NDArray[np.bool_],
    npt.NDArray[np.bool_],
    list[dict[str, Any]],
]
"""``(obs [k, ...], rewards [k], terminated [k], truncated [k], infos)`` of the k envs stepped,
in the order they were named: Gymnasium's step results, one row (one info dict) per env."""

ResetBatch = tuple[npt.NDArray[Any], list[dict[str, Any]]]
"""``(obs [k, ...], infos)`` of the k envs reset, in the order they were named: what their
``env.reset`` returns, one row (one info dict) per env."""

_POST_CONSTRAINT = frozenset({"cacc", "cfrc_int", "cfrc_ext"})
"""``MjData`` fields only ``mj_rnePostConstraint`` fills (see the module docstring)."""

_SPLIT_AT = 16
"""Envs in a Step from which the physics is split over two threads (below, one hand-off
costs about what the second half's physics saves)."""

_CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
"""CPUs this process may run on, read once (``os.cpu_count()`` per Step cost ~20 µs)."""


def stepper_for(task: TaskSpec, envs: Sequence[Any]) -> NativeStepper | None:
    """A native stepper for ``envs`` (a session's envs of ``task``), or None where there is none:
    no family for the task's env, or an env whose wrappers or render mode this module does not
    re-do (see the module docstring)."""
    family = FAMILIES.get(task.env.gym_id)
    if family is None or not envs:
        return None
    kinds = set()  # one env class and frame skip for all: the family reads the first env's
    for env in envs:
        base = env.unwrapped
        if _wrappers(env) is None or getattr(base, "render_mode", None) == "human":
            return None
        if not all(hasattr(base, a) for a in ("model", "data", "frame_skip")):
            return None
        kinds.add((type(base), base.frame_skip))
    return NativeStepper(family, envs) if len(kinds) == 1 else None


def _wrappers(env: Any) -> tuple[Any, Any] | None:
    """``(TimeLimit or None, OrderEnforcing or None)`` when those are ``env``'s only wrappers
    (each at most once), else None."""
    from gymnasium import Wrapper
    from gymnasium.wrappers import OrderEnforcing, TimeLimit

    found: dict[type, Any] = {}
    while isinstance(env, Wrapper):
        kind = type(env)
        if kind not in (TimeLimit, OrderEnforcing) or kind in found:
            return None
        found[kind] = env
        env = env.env
    return found.get(TimeLimit), found.get(OrderEnforcing)


class NativeStepper:
    """Steps the given envs' ``MjData`` directly, and ``family`` computes the rest.

    One instance per session, made by :func:`stepper_for` (which checks that the envs
    are what this class assumes). Not thread-safe: a session serializes its calls.
    """

    def __init__(self, family: Family, envs: Sequence[Any]) -> None:
        import mujoco

        self._mj_step = mujoco.mj_step
        self._mj_reset = mujoco.mj_resetData
        self._mj_forward = mujoco.mj_forward
        self._mj_post = mujoco.mj_rnePostConstraint
        self._family = family
        self._envs = list(envs)
        bases = self._bases = [env.unwrapped for env in envs]
        # whether the family draws reset states itself (else each env's own reset)
        self._draws_resets = type(family).reset_state is not Family.reset_state
        # the weights, ranges and dt the family reads (the same for all)
        self._base = FamilyEnv(bases[0])
        self._frame_skip = int(bases[0].frame_skip)
        self._models = [b.model for b in bases]
        self._datas = [b.data for b in bases]
        self._ctrl = [d.ctrl for d in self._datas]
        wrappers = [_wrappers(env) or (None, None) for env in envs]
        self._limits = [w[0] for w in wrappers]
        self._orders = [w[1] for w in wrappers]
        # Views into each env's MjData, made once (reset and mj_step write the same
        # memory): reading them later reads the data as it is then.
        self._fields = {
            name: [getattr(d, name) for d in self._datas]
            for name in ("qpos", "qvel", *family.fields)
        }
        self._bodies = {
            body: [
                d.xpos[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, body)]
                for m, d in zip(self._models, self._datas, strict=True)
            ]
            for body in family.bodies
        }
        self._post_constraint = bool(_POST_CONSTRAINT.intersection(family.fields))
        self._all = list(range(len(self._envs)))
        self._helper: Any = None  # a one-thread pool, made at the first large Step

    def step(self, which: Sequence[int], action: npt.NDArray[Any]) -> StepBatch:
        """Step envs ``which`` (indices into the envs given) with ``action[j]`` for ``which[j]``,
        as ``env.step`` would: same physics, results, wrapper state and errors."""
        if len(which) != len(action):
            raise ValueError(f"{len(action)} actions for {len(which)} envs")
        if len(which) == 1:
            return self._one(which[0], action[0])
        for i in which:
            order = self._orders[i]
            if order is not None and not order._has_reset:
                from gymnasium.error import ResetNeeded

                raise ResetNeeded("Cannot call env.step() before calling env.reset()")
        before = self._gather(which, self._family.before_fields)
        self._physics(which, action)
        after = self._gather(which)
        out = self._family.step(self._base, before, after, action)
        return (
            out.obs,
            np.asarray(out.reward, dtype=np.float64),
            np.asarray(out.terminated, dtype=np.bool_),
            self._count(which),
            out.infos(),
        )

    def reset(self, which: Sequence[int], seeds: Sequence[int | None]) -> ResetBatch:
        """Reset envs ``which``, ``which[j]`` with ``seeds[j]``, as ``env.reset(seed=...)``
        would: same random draws, state, observation, info and wrapper state.

        Gymnasium's reset of one env (wrappers, ``set_state``'s checks and copies, the
        observation from scalars) is ~24 µs in a loop, and a random-action session of the
        shortest episodes resets many (InvertedDoublePendulum, 64 envs: ~6 a Step); here
        it is ~15 µs an env from six on, and a Step of that session measured 7% faster
        (in process, alternated). Each env does only what changes its state, in order:
        seeding (Gymnasium's own ``Env.reset``), ``mj_resetData``, the family's draw of
        ``qpos``/``qvel`` from the env's ``np_random`` (:meth:`~.families.Family.
        reset_state`), ``mj_forward``; observation and info come for all at once. A
        family that does not draw reset states (Reacher: its goal is env state) resets
        each env with its own ``reset``."""
        if len(which) != len(seeds):
            raise ValueError(f"{len(seeds)} seeds for {len(which)} envs")
        if len(which) < 2 or not self._draws_resets:
            return self._reset_each(which, seeds)  # one env: its own reset is cheaper (22 µs
            # against 28 for Hopper; from three envs on, 19 against 22 each)
        from gymnasium import Env

        family = self._family
        for i, seed in zip(which, seeds, strict=True):
            limit, order, base = self._limits[i], self._orders[i], self._bases[i]
            if limit is not None:
                limit._elapsed_steps = 0
            if order is not None:
                order._has_reset = True
            Env.reset(base, seed=seed)  # what MujocoEnv.reset's super().reset does: seeding
            model, data = self._models[i], self._datas[i]
            self._mj_reset(model, data)
            state = family.reset_state(base, base.np_random)
            assert state is not None, "a family that draws reset states returns one"
            data.qpos[:], data.qvel[:] = state
            self._mj_forward(model, data)
        view = self._gather(which)
        return family.observe(self._base, view), family.reset_infos(self._base, view)

    # --------------------------------------------------------------- private --

    def _reset_each(self, which: Sequence[int], seeds: Sequence[int | None]) -> ResetBatch:
        """Each env's own ``reset``."""
        results = [self._envs[i].reset(seed=seed) for i, seed in zip(which, seeds, strict=True)]
        return np.array([obs for obs, _ in results]), [info for _, info in results]

    def _one(self, i: int, action: npt.NDArray[Any]) -> StepBatch:
        """A single env's step is its own ``env.step``: for one row the batch path's numpy
        costs more than Gymnasium's scalar code (Hopper 112 against 98 µs a step,
        InvertedDoublePendulum 74 against 53, measured alternating in one process); from
        two envs on the batch path is as cheap or cheaper. The results are the same
        either way (the batch path is bit-exact to ``env.step``)."""
        obs, reward, terminated, truncated, info = self._envs[i].step(action)
        return (
            np.asarray(obs)[None],
            np.array([reward], dtype=np.float64),
            np.array([terminated], dtype=np.bool_),
            np.array([truncated], dtype=np.bool_),
            [info],
        )

    def _physics(self, which: Sequence[int], action: npt.NDArray[Any]) -> None:
        """``MujocoEnv.do_simulation`` for each env.

        ``mj_step`` releases the GIL, so a large batch is shared by two threads: one
        helper thread and the calling thread, at the same time. While
        a session's Step runs, its client waits for the reply, so on a 2-core host the
        second core is otherwise idle (InvertedDoublePendulum, 64 envs: 1.74 ms -> ~1.1 ms
        a step in process). One hand-off per Step, not per env (a task per env measured
        slower than one thread); each env's physics is its own, so results are the same
        bit for bit."""
        n = len(which)
        if n < 2 or n < _SPLIT_AT or _CPUS < 2:
            self._advance(which, action)
            return
        if self._helper is None:
            from concurrent.futures import ThreadPoolExecutor

            self._helper = ThreadPoolExecutor(1, thread_name_prefix="ale-native-step")
        # Both threads take the next env from one iterator (``next`` on it is atomic under
        # the GIL) rather than half each: the helper wakes ~0.1 ms late and envs differ in
        # cost (contacts), so fixed halves left one thread waiting (Hopper, 64 envs: 1.72
        # against 1.68 ms a Step, the double pendulum 1.09 against 1.05).
        work = iter(range(n))
        second = self._helper.submit(self._advance, which, action, work)
        try:
            self._advance(which, action, work)
        finally:
            second.result()

    def _advance(
        self, which: Sequence[int], action: npt.NDArray[Any], rows: Iterator[int] | None = None
    ) -> None:
        """Step envs ``which[j]`` with ``action[j]`` for each row j of ``rows`` (all rows
        when None)."""
        mj_step, frame_skip = self._mj_step, self._frame_skip
        for j in range(len(which)) if rows is None else rows:
            i = which[j]
            self._ctrl[i][:] = action[j]
            mj_step(self._models[i], self._datas[i], nstep=frame_skip)
            if self._post_constraint:
                self._mj_post(self._models[i], self._datas[i])

    def close(self) -> None:
        """Stop the helper thread (the session closes its stepper with its envs)."""
        if self._helper is not None:
            self._helper.shutdown(wait=True)
            self._helper = None

    def _gather(self, which: Sequence[int], only: tuple[str, ...] | None = None) -> StepView:
        """What envs ``which`` hold now, copied (the physics overwrites the data); ``only``:
        just those fields (``qpos``/``qvel`` not named are left ``[k, 0]``, bodies out),
        for the view before the physics, of which a family reads little
        (:attr:`~.families.Family.before_fields`)."""
        every = isinstance(which, list) and which == self._all  # all, in order: views as is
        if only is None:
            fields = {
                name: np.array(v if every else [v[i] for i in which])
                for name, v in self._fields.items()
            }
            xpos = {
                body: np.array(rows if every else [rows[i] for i in which])
                for body, rows in self._bodies.items()
            }
            return StepView(xpos=xpos, **fields)
        empty: npt.NDArray[np.float64] = np.empty((len(which), 0))
        got = {
            name: np.array(self._fields[name] if every else [self._fields[name][i] for i in which])
            for name in only
        }
        return StepView(qpos=got.get("qpos", empty), qvel=got.get("qvel", empty))

    def _count(self, which: Sequence[int]) -> npt.NDArray[np.bool_]:
        """TimeLimit's part of a step: count it on the wrapper, truncate at the limit (the
        unwrapped MuJoCo envs never truncate themselves)."""
        truncated = np.zeros(len(which), dtype=np.bool_)
        for j, i in enumerate(which):
            limit = self._limits[i]
            if limit is not None:
                limit._elapsed_steps += 1
                truncated[j] = limit._elapsed_steps >= limit._max_episode_steps
        return truncated
