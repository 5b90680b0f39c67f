"""The native batch path: all of a shard's episodes stepped together, one Python iteration per step.

Gymnasium's MuJoCo envs spend a third of a step in Python (wrappers, reward,
observation, info, per env). Here one iteration advances *every* running episode:
the batched MLP gives all actions, the physics of all envs runs in C (threads
that release the GIL), then observation, reward and termination come from the
env's family (:mod:`.families`) with numpy over the batch. Initial states are the
real Gymnasium env's ``reset(seed=...)``, so reset noise is exactly Gymnasium's.
Episodes that terminate leave the batch (its arrays are compacted), as in the
``gymnasium`` kind, so the policy sees the same observation batches in the same
row order.

Two engines step the physics (:data:`ENGINES`), chosen per family:

* ``rollout``: ``mujoco.rollout`` steps the FULLPHYSICS states of all envs,
  ``frame_skip`` substeps each, on ``threads`` threads (the calling thread when 1,
  ``nthread=0``), with preallocated outputs and ``skip_checks`` (every array it is
  handed is built here, C-contiguous float64 of the exact shape). For the families
  that read only ``qpos`` and ``qvel`` (HalfCheetah, Hopper, Walker2d,
  InvertedPendulum). One difference from Gymnasium is deliberate: each control
  step starts the constraint solver cold (zero warm start), where Gymnasium
  warm-starts it from the previous step (the warm start is not part of the state
  ``mujoco.rollout`` returns, so it cannot be carried). While no constraint is
  active (no contact, no joint at a limit: the pendulum while it balances) the
  solver does not run and results are Gymnasium's to the bit; with contacts a
  step agrees to ~1e-9 and a chaotic gait can amplify that over a long
  episode, so returns match Gymnasium's statistically, not bit for bit.
  ``mujoco.rollout`` stops integrating an env at its first MuJoCo warning (a
  diverging simulation), where ``mj_step`` resets the data and goes on: such an
  env's step is redone with ``mj_step`` from its state (detected by its time,
  which then does not advance).
* ``mjdata``: one ``MjData`` per env, set to what the Gymnasium env's data holds
  right after ``reset`` (its full integration state, then ``mj_forward``), stepped
  with ``mj_step(model, data, nstep=frame_skip)`` exactly
  as ``MujocoEnv.do_simulation`` does, by ``threads`` threads each looping over its
  share of envs (``mj_step`` releases the GIL). Bit-exact to Gymnasium, warm
  start included. Needed by the families that read ``MjData`` beyond the state
  (Reacher's body positions, InvertedDoublePendulum's tip and constraint force),
  which MuJoCo's RK4 leaves from its last internal stage: neither the states nor
  the sensors ``mujoco.rollout`` returns hold them. (Sensors added to a copy of
  the model do not change the physics, but they are evaluated at a substep's
  start, not at that stage; see :mod:`.families`.)

Either engine's results are identical for any number of threads: each env's
physics is a function of its own state (and its own ``MjData``) only.

Every batch of actions is checked finite before it is stepped, and every
batch of rewards after (:func:`~ale_robotics.model.episode.check_finite`):
a NaN action would otherwise be zeroed by MuJoCo while the return turned NaN,
voiding the whole evaluation late, as a non-finite metric, instead of naming
the episode.
"""

from __future__ import annotations

import abc
import itertools
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ale_robotics.envs.make import make_env
from ale_robotics.model.episode import EpisodeOutcome, check_finite
from ale_robotics.rollouts.mujoco_rollout.families import FAMILIES, Family, FamilyEnv, StepView
from ale_robotics.tasks.spec import TaskSpec

__all__ = [
    "ENGINES",
    "EngineName",
    "Policy",
    "engine_for",
    "family_of",
    "rollout_on",
    "rollout_vectorized",
]

Array = npt.NDArray[np.float64]

Policy = Callable[[npt.NDArray[np.floating]], npt.NDArray[np.float32]]
"""Observation batch -> action batch (the batched MLP, or any callable in tests)."""

EngineName = Literal["rollout", "mjdata"]
ENGINES: tuple[EngineName, ...] = ("rollout", "mjdata")
"""The physics engines of this module (see the module docstring)."""


def family_of(task: TaskSpec) -> Family:
    """The task env's family; ``ValueError`` when it has no vectorized step here."""
    family = FAMILIES.get(task.env.gym_id)
    if family is None:
        raise ValueError(
            f"no vectorized backend for {task.env.gym_id} (the mujoco_rollout kind steps "
            f"{sorted(FAMILIES)}); use backend 'gymnasium'"
        )
    return family


def engine_for(family: Family) -> EngineName:
    """The engine a family is stepped with: ``rollout`` unless it reads ``MjData`` beyond
    the state, which only ``mjdata`` has."""
    return "mjdata" if family.reads_derived else "rollout"


def rollout_vectorized(
    task: TaskSpec,
    policy: Policy,
    seeds: Sequence[tuple[int, int]],
    threads: int = 1,
    *,
    engine: EngineName | None = None,
) -> list[EpisodeOutcome]:
    """Run one episode per ``(index, seed)``; one outcome each, in the order of ``seeds``.

    Episodes end when the env terminates or at ``task.env.max_episode_steps``
    (Gymnasium's TimeLimit truncation). ``engine``: None for the family's own
    (:func:`engine_for`). Raises :class:`~ale_robotics.model.episode.PolicyFault`
    at the first non-finite action or reward.
    """
    family = family_of(task)
    env: Any = make_env(task.env, time_limit=False).unwrapped
    try:
        return rollout_on(env, family, task, policy, seeds, threads, engine=engine)
    finally:
        env.close()


def rollout_on(
    env: Any,
    family: Family,
    task: TaskSpec,
    policy: Policy,
    seeds: Sequence[tuple[int, int]],
    threads: int = 1,
    *,
    engine: EngineName | None = None,
    on_episode: Callable[[EpisodeOutcome], None] | None = None,
    datas: list[Any] | None = None,
) -> list[EpisodeOutcome]:
    """:func:`rollout_vectorized` on a given unwrapped env of the task (its model, its
    ``reset``), for a caller that needs the env first (the action bound of the policy).
    ``on_episode`` is called with each outcome as its episode ends. ``datas``: ``MjData``
    objects of ``env.model`` to reuse across calls (the kind keeps one list per env), grown
    here as needed: making one costs ~0.5 ms (its arena is megabytes), more than a short
    episode's steps; what they held before never matters (every use sets their state)."""
    name = engine or engine_for(family)
    if name == "rollout" and family.reads_derived:
        raise ValueError(f"{family.gym_id} reads MjData beyond the state: engine 'mjdata' only")
    n = len(seeds)
    if n == 0:
        return []
    threads = max(1, int(threads))
    pool = [] if datas is None else datas
    physics: _Engine = (
        _RolloutEngine(env, n, threads, pool)
        if name == "rollout"
        else _DataEngine(env, family, n, threads, pool)
    )
    episodes = np.array([index for index, _ in seeds], dtype=np.int64)
    returns = np.zeros(n)
    outcomes: list[EpisodeOutcome | None] = [None] * n
    try:
        for row, (_, seed) in enumerate(seeds):
            start = physics.native_start(family, env, int(seed))
            if start is None:
                env.reset(seed=int(seed))
                physics.load(row, env.data)
            else:
                physics.load_state(row, *start)
        active = np.arange(n)  # rows of the episodes still running, in seeds order
        ids = episodes.tolist()  # their episode indices, for check_finite
        consts = FamilyEnv(env)  # what the family reads of the env, dt read once
        view = physics.view(family, n)
        obs = family.observe(consts, view)
        limit = task.env.max_episode_steps
        for step in range(1, limit + 1):
            action = np.asarray(policy(obs), dtype=np.float32)
            check_finite("action", action, ids, step)
            after = physics.step(action, family)
            out = family.step(consts, view, after, action)
            check_finite("reward", out.reward, ids, step)
            returns[active] += out.reward
            done = out.terminated | (step == limit)
            if not done.any():
                view, obs = after, out.obs
                continue
            for j in np.flatnonzero(done):
                row = int(active[j])
                outcome = EpisodeOutcome(
                    int(episodes[row]), float(returns[row]), step, bool(out.terminated[j])
                )
                outcomes[row] = outcome
                if on_episode is not None:
                    on_episode(outcome)
            keep = ~done
            if not keep.any():
                break
            active = active[keep]
            ids = episodes[active].tolist()
            physics.compact(keep)
            view, obs = _rows(after, keep), out.obs[keep]
    finally:
        physics.close()
    assert all(o is not None for o in outcomes)
    return [o for o in outcomes if o is not None]


def _rows(view: StepView, keep: npt.NDArray[np.bool_]) -> StepView:
    """``view`` restricted to the rows ``keep`` marks."""
    return StepView(
        qpos=view.qpos[keep],
        qvel=view.qvel[keep],
        xpos={name: rows[keep] for name, rows in view.xpos.items()},
        site_xpos=None if view.site_xpos is None else view.site_xpos[keep],
        qfrc_constraint=None if view.qfrc_constraint is None else view.qfrc_constraint[keep],
    )


class _Engine(abc.ABC):
    """The physics of ``n`` envs of one model, the first ``k`` of which are running."""

    def __init__(self, env: Any, n: int, threads: int, pool: list[Any], size: int) -> None:
        import mujoco

        self.mujoco = mujoco
        self.model = env.model
        self.frame_skip = int(env.frame_skip)
        self.threads = threads
        self.n = self.k = n
        while len(pool) < size:
            pool.append(mujoco.MjData(self.model))
        self.datas: list[Any] = pool[:size]

    @abc.abstractmethod
    def load(self, row: int, data: Any) -> None:
        """Row ``row`` starts from ``data`` (the Gymnasium env's, right after ``reset``)."""

    def native_start(self, family: Family, env: Any, seed: int) -> tuple[Array, Array] | None:
        """The ``(qpos, qvel)`` that ``env.reset(seed=seed)`` sets, drawn without the env
        (:meth:`~.families.Family.reset_state`), where this engine loads plain states; None:
        reset the env and :meth:`load` its data."""
        return None

    def load_state(self, row: int, qpos: Array, qvel: Array) -> None:
        """Row ``row`` starts from a reset state with this ``qpos`` and ``qvel``."""
        raise NotImplementedError

    @abc.abstractmethod
    def view(self, family: Family, k: int) -> StepView:
        """The first ``k`` rows' :class:`StepView`, the fields ``family`` reads."""

    @abc.abstractmethod
    def step(self, action: npt.NDArray[np.float32], family: Family) -> StepView:
        """One control step of the running rows with ``action[j]`` for row ``j``; the view
        after it."""

    @abc.abstractmethod
    def compact(self, keep: npt.NDArray[np.bool_]) -> None:
        """Only the running rows ``keep`` marks go on (in order)."""

    def close(self) -> None:
        """Release threads; the engine is not used after."""
        return None


class _RolloutEngine(_Engine):
    """``mujoco.rollout`` over FULLPHYSICS state arrays (see the module docstring)."""

    def __init__(self, env: Any, n: int, threads: int, pool: list[Any]) -> None:
        super().__init__(env, n, threads, pool, threads)  # one MjData per rollout thread
        from mujoco import rollout

        mujoco, model, fs = self.mujoco, self.model, self.frame_skip
        self.spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
        nstate = mujoco.mj_stateSize(model, self.spec)
        self.qpos = slice(1, 1 + model.nq)  # FULLPHYSICS starts with time
        self.qvel = slice(1 + model.nq, 1 + model.nq + model.nv)
        # The running rows' states, C-contiguous; a new array each step, so that the view
        # of the previous step (the family's "before") stays intact.
        self.state = np.zeros((n, nstate))
        # Preallocated, C-contiguous float64 (leading-axis slices of them stay so):
        # skip_checks hands their buffers to C as they are.
        self.out = np.zeros((n, fs, nstate))
        self.control = np.zeros((n, fs, model.nu))
        # The solver's warm start is not part of the FULLPHYSICS state. Left implicit,
        # rollout would reuse whatever the thread's MjData last held (another episode's),
        # making results depend on thread scheduling; explicit zeros make them exact.
        self.warmstart = np.zeros((n, model.nv))
        self.models = [model] * n
        self.timestep = float(model.opt.timestep)
        # nthread=0 runs on the calling thread: no pool, no hand-off, for a 1-thread shard.
        self.runner = rollout.Rollout(nthread=0 if threads == 1 else threads)
        from gymnasium.utils.seeding import np_random

        self._np_random = np_random
        scratch = self.datas[0]
        mujoco.mj_resetData(model, scratch)
        self.reset_template = np.zeros(nstate)
        mujoco.mj_getState(model, scratch, self.reset_template, self.spec)

    def load(self, row: int, data: Any) -> None:
        self.mujoco.mj_getState(self.model, data, self.state[row], self.spec)

    def native_start(self, family: Family, env: Any, seed: int) -> tuple[Array, Array] | None:
        # seeding.np_random is what Env.reset seeds its np_random with
        return family.reset_state(env, self._np_random(seed)[0])

    def load_state(self, row: int, qpos: Array, qvel: Array) -> None:
        # What mj_resetData leaves (time 0, act, mocap, userdata: the model's defaults),
        # then set_state's qpos and qvel: the FULLPHYSICS state env.reset makes (its
        # mj_forward computes only derived quantities, none of them in the state).
        row_state = self.state[row]
        row_state[:] = self.reset_template
        row_state[self.qpos] = qpos
        row_state[self.qvel] = qvel

    def view(self, family: Family, k: int) -> StepView:
        return StepView(self.state[:k, self.qpos], self.state[:k, self.qvel])

    def step(self, action: npt.NDArray[np.float32], family: Family) -> StepView:
        k, start = self.k, self.state
        out, control = self.out[:k], self.control[:k]
        control[:] = action[:, None, :]
        self.runner.rollout(
            self.models if k == self.n else self.models[:k],
            self.datas,
            start,
            control,
            nstep=self.frame_skip,
            initial_warmstart=self.warmstart[:k],
            state=out,
            skip_checks=True,
            chunk_size=self.chunk(k),
        )
        # A step that ran advanced the time by exactly one timestep per substep (one
        # addition each, as mj_advance and mj_RungeKutta do); a frozen env's last state
        # repeats an earlier one (or is a reset one), so its time is not its previous
        # substep's plus one timestep.
        final = out[:, -1, :]
        before = out[:, -2, 0] if self.frame_skip > 1 else start[:, 0]
        frozen = final[:, 0] != before + self.timestep
        if frozen.any():
            for j in np.flatnonzero(frozen):
                self._restep(start[j], control[j, 0], final[j])
        self.state = final.copy()
        return StepView(self.state[:, self.qpos], self.state[:, self.qvel])

    def chunk(self, k: int) -> int | None:
        """Rows per thread-pool task: one even share per thread. MuJoCo's default (a tenth
        of a share) hands a thread a few envs' substeps at a time, whose hand-offs cost more
        than small models' physics (2 threads on 64 InvertedPendulum envs were no faster
        than 1)."""
        return None if self.threads == 1 else max(1, -(-k // self.threads))

    def _restep(self, start: Array, ctrl: Array, into: Array) -> None:
        """One env's control step with ``mj_step`` (which resets a diverged simulation and
        goes on, as in Gymnasium) from ``start`` with a cold solver, into ``into``."""
        mujoco, model, d = self.mujoco, self.model, self.datas[0]
        mujoco.mj_resetData(model, d)
        mujoco.mj_setState(model, d, start, self.spec)
        d.ctrl[:] = ctrl
        mujoco.mj_step(model, d, nstep=self.frame_skip)
        mujoco.mj_getState(model, d, into, self.spec)

    def compact(self, keep: npt.NDArray[np.bool_]) -> None:
        self.state = self.state[keep]
        self.k = len(self.state)

    def close(self) -> None:
        self.runner.close()


class _DataEngine(_Engine):
    """One ``MjData`` per env, stepped with ``mj_step`` (see the module docstring)."""

    def __init__(self, env: Any, family: Family, n: int, threads: int, pool: list[Any]) -> None:
        super().__init__(env, n, threads, pool, n)  # one MjData per env
        mujoco, model = self.mujoco, self.model
        warm = int(mujoco.mjtState.mjSTATE_WARMSTART)
        self.spec = int(mujoco.mjtState.mjSTATE_INTEGRATION) & ~warm
        self.warm = warm
        self.buffer = np.zeros(mujoco.mj_stateSize(model, self.spec))
        self.warm_buffer = np.zeros(mujoco.mj_stateSize(model, warm))
        self.body_ids = {
            name: mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name) for name in family.bodies
        }
        self.fields = family.fields
        self.pool = ThreadPoolExecutor(threads) if threads > 1 else None

    def load(self, row: int, data: Any) -> None:
        """The env's data as Gymnasium's ``reset`` leaves it: its integration state (all that
        ``mj_step`` reads: state, controls, applied forces) with what ``reset``'s
        ``mj_forward`` derives from it (the reset observation reads ``xpos`` and co.), then
        the solver's warm start. In that order: ``mj_forward`` reads the warm start (zero
        in ``reset``, after ``mj_resetData``) and writes it (its ``qacc``)."""
        mujoco, model, d = self.mujoco, self.model, self.datas[row]
        mujoco.mj_getState(model, data, self.buffer, self.spec)
        mujoco.mj_resetData(model, d)
        mujoco.mj_setState(model, d, self.buffer, self.spec)
        mujoco.mj_forward(model, d)
        mujoco.mj_getState(model, data, self.warm_buffer, self.warm)
        mujoco.mj_setState(model, d, self.warm_buffer, self.warm)

    def view(self, family: Family, k: int) -> StepView:
        datas = self.datas[:k]
        return StepView(
            qpos=np.array([d.qpos for d in datas]),
            qvel=np.array([d.qvel for d in datas]),
            xpos={name: np.array([d.xpos[i] for d in datas]) for name, i in self.body_ids.items()},
            site_xpos=np.array([d.site_xpos for d in datas])
            if "site_xpos" in self.fields
            else None,
            qfrc_constraint=np.array([d.qfrc_constraint for d in datas])
            if "qfrc_constraint" in self.fields
            else None,
        )

    def step(self, action: npt.NDArray[np.float32], family: Family) -> StepView:
        k = self.k
        if self.pool is None:
            self._advance(action, 0, k)
        else:
            bounds = np.linspace(0, k, self.threads + 1).astype(int)
            jobs = [
                self.pool.submit(self._advance, action, int(lo), int(hi))
                for lo, hi in itertools.pairwise(bounds)
                if hi > lo
            ]
            for job in jobs:
                job.result()
        return self.view(family, k)

    def _advance(self, action: npt.NDArray[np.float32], lo: int, hi: int) -> None:
        mj_step, model, fs = self.mujoco.mj_step, self.model, self.frame_skip
        for j in range(lo, hi):
            data = self.datas[j]
            data.ctrl[:] = action[j]
            mj_step(model, data, nstep=fs)

    def compact(self, keep: npt.NDArray[np.bool_]) -> None:
        running = self.datas[: self.k]
        kept = [d for d, k in zip(running, keep, strict=True) if k]
        self.datas[: len(kept)] = kept
        self.datas[len(kept) : self.k] = [d for d, k in zip(running, keep, strict=True) if not k]
        self.k = len(kept)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
