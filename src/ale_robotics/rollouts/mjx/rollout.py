"""A shard's episodes as one jitted program: a loop over control steps, ``vmap`` over episodes.

One control step of one episode is: the contract's MLP on the observation (in
JAX, float32, the torch ``Linear`` layout of :class:`~ale_robotics.rollouts.mlp.MLPPolicy`),
``frame_skip`` calls of ``mjx.step`` with that control, then the family's reward,
termination and next observation (:mod:`.families`). ``vmap`` runs all of a shard's
episodes side by side and a ``while_loop`` runs them to the task's step limit, or
until every one has terminated, so a shard is one XLA program with no Python between
steps; on a GPU that is the point of the kind, on a CPU it is a correctness path. The
step limit is an argument, not a constant of the program, so one compilation serves
every limit for a given family, policy shape and batch size (tests and the benchmark
record per-step values instead, with a fixed-length ``scan``: ``record=True``).

What matches the ``mujoco_rollout`` (C) kind, so that the two can be compared
step for step (``tests/rollouts/mjx``):

* initial states: the real Gymnasium env's ``reset(seed=...)`` (its ``qpos``, ``qvel``);
* the constraint solver starts each control step cold (``qacc_warmstart = 0``), as the
  C kind's ``initial_warmstart`` zeros do; within a control step it warm-starts from
  the previous substep in both;
* MJX picks the better of warm start and smooth acceleration, as MuJoCo's C solver does.

What differs, and why results are close rather than equal:

* precision: MJX computes in the default JAX dtype, float32 (the GPU's native width),
  where the C kind uses float64. One control step from a C-kind state agrees to ~5e-4
  on an observation (absolute; ~5e-6 on a reward, ~1e-5 on an action); along an episode
  that grows about tenfold every 3-4 steps on a chaotic random-weight gait, so whole
  episodes agree closely only when short, and statistically when long. ``x64=True``
  (tests only; not reachable from a task config) traces the same program in float64,
  where one step is MuJoCo's to 1e-9: the physics and formulas are the same, the rest
  is rounding;
* MJX's own solver (line search, collision code) is not MuJoCo's C code line for line.

Matrix products are traced at ``"highest"`` precision: on recent NVIDIA GPUs XLA's
default would run float32 matmuls as TF32 (10-bit mantissa), in the policy and in the
physics alike.

Returns are summed in the compute dtype with Kahan compensation, so a 1000-step float32
return loses no more than its rewards' own rounding.

Non-finite values: a NaN or inf in an episode's action (before it is stepped) or reward
(after) is recorded with its step, the episode leaves the batch (later steps use zero
control from its frozen state, so one bad lane cannot make the solver's batched
``while_loop`` run to its iteration limit), and after the program returns the earliest
one, ordered as the C kind checks them (step, then action before reward, then row), is
raised as :class:`~ale_robotics.model.episode.PolicyFault`.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import numpy.typing as npt
from mujoco import mjx

from ale_robotics.envs.make import make_env
from ale_robotics.model.episode import EpisodeOutcome, PolicyFault
from ale_robotics.model.rollout_kind import Artifact, EpisodeCallback, Shard
from ale_robotics.rollouts.mjx.families import FamilyParams, family_params
from ale_robotics.tasks.contract import PolicyArchitecture
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["MjxBatch", "Trace", "device_name", "initial_states", "rollout_batch", "run_task"]

_WHAT = ("action", "reward")


@dataclass(frozen=True)
class Trace:
    """Per-step values of every episode, for tests and the benchmark's cross-check."""

    action: npt.NDArray[np.float32]
    """``[n, steps, act_dim]``: the policy's action at each step (what was stepped while the
    episode ran)."""
    obs: npt.NDArray[np.floating]
    """``[n, steps, obs_dim]``: the observation Gymnasium's ``step`` returns at each step."""
    reward: npt.NDArray[np.floating]
    """``[n, steps]``: each step's reward (0 once the episode has ended)."""


@dataclass(frozen=True)
class MjxBatch:
    """What one jitted rollout of ``n`` episodes returns, on the host."""

    returns: npt.NDArray[np.float64]
    """``[n]``: undiscounted returns (summed in the compute dtype, then widened)."""
    lengths: npt.NDArray[np.int64]
    """``[n]``: steps each episode ran (its step limit unless it terminated)."""
    terminated: npt.NDArray[np.bool_]
    """``[n]``: whether it ended by the family's termination rule."""
    fault: tuple[int, str, int, str] | None
    """``(step, "action" | "reward", row, value)`` of the first non-finite value, or None."""
    trace: Trace | None
    """Per-step values when asked for (``record=True``)."""


@dataclass(frozen=True)
class _Program:
    """The static part of a jitted rollout: everything the trace depends on but the shapes."""

    family: FamilyParams
    frame_skip: int
    hidden: str  # "relu" | "tanh"
    out_tanh: bool
    record_steps: int | None
    """Steps of a recorded rollout (a fixed-length ``scan`` with per-step outputs); None for
    the kind's rollout, a ``while_loop`` whose step limit is an argument (one compilation
    serves every limit) and which stops when every episode has ended."""


class _Carry(NamedTuple):
    """One episode's state between control steps."""

    data: Any  # mjx.Data
    obs: jax.Array
    ret: jax.Array
    comp: jax.Array  # Kahan compensation of ret
    length: jax.Array
    alive: jax.Array
    terminated: jax.Array
    fault_step: jax.Array  # 0: none
    fault_what: jax.Array  # index into _WHAT
    fault_value: jax.Array
    t: jax.Array  # the next step's 1-based number


def _mlp(
    layers: Sequence[tuple[jax.Array, jax.Array]],
    high: jax.Array,
    hidden: str,
    out_tanh: bool,
    obs: jax.Array,
) -> jax.Array:
    """The contract's MLP on one observation: float32, ``y = x W^T + b`` per layer."""
    x = obs.astype(jnp.float32)
    last = len(layers) - 1
    for i, (w_t, b) in enumerate(layers):
        x = jnp.matmul(x, w_t, precision=jax.lax.Precision.HIGHEST) + b
        if i < last:
            x = jnp.tanh(x) if hidden == "tanh" else jnp.maximum(x, 0.0)
    if out_tanh:
        x = jnp.tanh(x)
    return x * high


def _episode_fn(p: _Program) -> Callable[..., Any]:
    """One episode's rollout: (model, weights, bound, data0, qpos0, qvel0, step limit) ->
    (return, length, terminated, fault step, fault kind, fault value, per-step outputs)."""
    fam = p.family

    def episode(
        mx: Any,
        layers: Sequence[tuple[jax.Array, jax.Array]],
        high: jax.Array,
        d0: Any,
        qpos0: jax.Array,
        qvel0: jax.Array,
        limit: jax.Array,
    ) -> Any:
        dtype = qpos0.dtype
        zeros_warm = jnp.zeros_like(d0.qacc_warmstart)
        d = d0.replace(qpos=qpos0, qvel=qvel0, qacc_warmstart=zeros_warm)

        def substep(_: Any, x: Any) -> Any:
            return mjx.step(mx, x)

        # put_data keeps MjData's int32 index arrays, where a traced step makes JAX's default
        # int (int64 under x64): give the carry the step's own dtypes, or a loop refuses it.
        shapes = jax.eval_shape(substep, 0, d)
        d = jax.tree_util.tree_map(lambda x, s: jnp.asarray(x, s.dtype), d, shapes)

        def control_step(c: _Carry) -> tuple[_Carry, Any]:
            action = _mlp(layers, high, p.hidden, p.out_tanh, c.obs)
            bad_action = ~jnp.all(jnp.isfinite(action))
            # an ended or faulty lane steps with zero control (finite, so the batched solver
            # loop still converges for it); its results are masked out below
            ctrl = jnp.where(c.alive & ~bad_action, action, 0.0).astype(dtype)
            d1 = c.data.replace(ctrl=ctrl, qacc_warmstart=zeros_warm)
            d1 = jax.lax.fori_loop(0, p.frame_skip, substep, d1)
            reward, terminated = fam.step(c.data.qpos, d1.qpos, d1.qvel, action)
            fault = c.alive & (bad_action | ~jnp.isfinite(reward))
            first_bad = action[jnp.argmax(~jnp.isfinite(action))].astype(dtype)
            live = c.alive & ~fault
            r = jnp.where(live, reward, jnp.zeros_like(reward))
            y = r - c.comp  # Kahan: ret + r, the lost low bits carried in comp
            ret = c.ret + y
            if fam.terminates:
                keep = live & ~terminated
                d1 = jax.tree_util.tree_map(lambda new, old: jnp.where(keep, new, old), d1, c.data)
            obs1 = fam.observe(d1.qpos, d1.qvel)
            nxt = _Carry(
                data=d1,
                obs=obs1,
                ret=ret,
                comp=(ret - c.ret) - y,
                length=c.length + live.astype(c.length.dtype),
                alive=live & ~terminated,
                terminated=c.terminated | (live & terminated),
                fault_step=jnp.where(fault, c.t, c.fault_step),
                fault_what=jnp.where(fault, jnp.where(bad_action, 0, 1), c.fault_what),
                fault_value=jnp.where(
                    fault, jnp.where(bad_action, first_bad, reward), c.fault_value
                ),
                t=c.t + 1,
            )
            return nxt, (action, obs1, r)

        zero = jnp.zeros((), dtype)
        i0 = jnp.zeros((), jnp.int32)
        c0 = _Carry(
            d, fam.observe(qpos0, qvel0), zero, zero, i0, jnp.asarray(True),
            jnp.asarray(False), i0, i0, zero, jnp.ones((), jnp.int32),
        )  # fmt: skip
        if p.record_steps is None:
            c = jax.lax.while_loop(
                lambda c: c.alive & (c.t <= limit), lambda c: control_step(c)[0], c0
            )
            ys = None
        else:
            c, ys = jax.lax.scan(lambda c, _: control_step(c), c0, length=p.record_steps)
        return c.ret, c.length, c.terminated, c.fault_step, c.fault_what, c.fault_value, ys

    return episode


@functools.lru_cache(maxsize=32)
def _compiled(p: _Program, x64: bool) -> Callable[..., Any]:
    """The jitted, vmapped rollout for ``p`` (XLA compiles it once per input shape)."""
    del x64  # part of the cache key: a program traced under x64 is another program
    batched = jax.vmap(_episode_fn(p), in_axes=(None, None, None, None, 0, 0, None))
    return jax.jit(batched)


_MODELS: dict[tuple[int, bool], tuple[Any, Any, Any]] = {}
_MODELS_LOCK = threading.Lock()


def _device_model(model: Any, x64: bool) -> tuple[Any, Any]:
    """``mjx.put_model`` of an env's model and the data every episode starts from (the
    model's reset state: each episode replaces its ``qpos`` and ``qvel``, and every other
    quantity a step reads is recomputed by it), kept for the model's life."""
    key = (id(model), x64)
    with _MODELS_LOCK:
        hit = _MODELS.get(key)
        if hit is not None and hit[0] is model:
            return hit[1], hit[2]
        data = mujoco.MjData(model)
        mujoco.mj_forward(model, data)
        entry = (model, mjx.put_model(model), mjx.put_data(model, data))
        _MODELS[key] = entry
        return entry[1], entry[2]


def initial_states(
    env: Any, seeds: Sequence[int]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """``(qpos, qvel)`` after the unwrapped Gymnasium env's ``reset(seed=...)``, one row each."""
    qpos = np.zeros((len(seeds), env.model.nq))
    qvel = np.zeros((len(seeds), env.model.nv))
    for row, seed in enumerate(seeds):
        env.reset(seed=int(seed))
        qpos[row] = env.data.qpos
        qvel[row] = env.data.qvel
    return qpos, qvel


def rollout_batch(
    env: Any,
    gym_id: str,
    arch: PolicyArchitecture,
    weights: Mapping[str, npt.NDArray[Any]],
    action_high: npt.ArrayLike,
    qpos0: npt.NDArray[np.floating],
    qvel0: npt.NDArray[np.floating],
    steps: int,
    *,
    record: bool = False,
    x64: bool = False,
) -> MjxBatch:
    """Roll out ``len(qpos0)`` episodes of ``steps`` control steps from the given states.

    ``env`` is the task's unwrapped Gymnasium env (its model, ``frame_skip`` and the
    family's constants); ``weights`` the contract's tensors. ``x64`` traces the program
    in float64 (see the module docstring: a test's precision, not the kind's).
    """
    program = _Program(
        family=family_params(gym_id, env),
        frame_skip=int(env.frame_skip),
        hidden=arch.activation,
        out_tanh=arch.output_activation == "tanh",
        record_steps=int(steps) if record else None,
    )
    with jax.enable_x64(x64), jax.default_matmul_precision("highest"):
        dtype = jnp.float64 if x64 else jnp.float32
        mx, d0 = _device_model(env.model, x64)
        layers = [
            (
                jnp.asarray(np.ascontiguousarray(weights[f"{n}.weight"].T, dtype=np.float32)),
                jnp.asarray(np.asarray(weights[f"{n}.bias"], dtype=np.float32)),
            )
            for n in arch.layer_names
        ]
        high = jnp.asarray(np.asarray(action_high, dtype=np.float32))
        out = _compiled(program, x64)(
            mx,
            layers,
            high,
            d0,
            jnp.asarray(qpos0, dtype),
            jnp.asarray(qvel0, dtype),
            jnp.asarray(steps, jnp.int32),
        )
        ret, length, term, fstep, fwhat, fval, ys = jax.device_get(out)
    trace = None
    if record:
        action, obs, reward = ys
        trace = Trace(action=np.asarray(action), obs=np.asarray(obs), reward=np.asarray(reward))
    return MjxBatch(
        returns=np.asarray(ret, dtype=np.float64),
        lengths=np.asarray(length, dtype=np.int64),
        terminated=np.asarray(term, dtype=np.bool_),
        fault=_first_fault(np.asarray(fstep), np.asarray(fwhat), np.asarray(fval)),
        trace=trace,
    )


def _first_fault(
    fstep: npt.NDArray[np.int32], fwhat: npt.NDArray[np.int32], fval: npt.NDArray[np.floating]
) -> tuple[int, str, int, str] | None:
    """The first non-finite value in the C kind's order: step, action before reward, row."""
    rows = np.flatnonzero(fstep > 0)
    if rows.size == 0:
        return None
    row = int(min(rows, key=lambda r: (int(fstep[r]), int(fwhat[r]), int(r))))
    return int(fstep[row]), _WHAT[int(fwhat[row])], row, str(float(fval[row]))


_ENVS: dict[str, Any] = {}


def _env(task: TaskSpec) -> Any:
    """The task's unwrapped env, kept per process (``reset(seed=...)`` makes reuse exact)."""
    key = task.model_dump_json(include={"env"})
    env = _ENVS.get(key)
    if env is None:
        env = _ENVS[key] = make_env(task.env, time_limit=False).unwrapped
    return env


def run_task(
    task: TaskSpec,
    artifact: Artifact,
    seeds: Shard,
    on_episode: EpisodeCallback | None = None,
) -> list[EpisodeOutcome]:
    """:meth:`~.kind.MjxKind.run_shard`: one jitted rollout of the whole shard."""
    assert task.policy is not None  # PolicyRolloutKind.check_task refuses a batch task without
    env = _env(task)
    qpos, qvel = initial_states(env, [s for _, s in seeds])
    batch = rollout_batch(
        env,
        task.env.gym_id,
        task.policy,
        artifact,
        env.action_space.high,
        qpos,
        qvel,
        task.env.max_episode_steps,
    )
    if batch.fault is not None:
        step, what, row, value = batch.fault
        raise PolicyFault(what, value, seeds[row][0], step)
    out = [
        EpisodeOutcome(index, float(batch.returns[row]), int(batch.lengths[row]), bool(term))
        for row, ((index, _), term) in enumerate(zip(seeds, batch.terminated, strict=True))
    ]
    if on_episode is not None:
        for o in out:
            on_episode(o)
    return out


def device_name() -> str:
    """The device the kind runs on, as JAX names it (e.g. ``cuda:0 NVIDIA H200``)."""
    dev = jax.devices()[0]
    return f"{dev.platform}:{dev.id} {getattr(dev, 'device_kind', '')}".strip()
