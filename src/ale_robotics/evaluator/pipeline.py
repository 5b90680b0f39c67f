"""The native batch pipeline: build the policy from the contract, roll it out on hidden seeds.

Speed comes from batched numpy inference over all envs of a shard (one matmul
per layer per step instead of one per env), with one such loop per worker
process (:mod:`ale_robotics.evaluator.pool`: processes scale on these 2-core
machines, Gymnasium's AsyncVectorEnv did not).

Submitted policies are checked where they act: every batch of actions is
checked finite before any env steps it, and every reward after it
(:func:`check_finite`). A NaN or inf raises :class:`PolicyFault`, the
submission's failure, so an episode can never be silently cut short (or voided
later as a non-finite metric) by a policy that outputs NaN when it is about to
fail.

Reproducibility: episodes are grouped into shards of ``eval.envs_per_shard`` in
index order, a layout fixed by the task config, so a result does not depend on
how many worker processes a host has (batched matmul may round differently for
different batch sizes; a fixed layout keeps every batch the same).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from ale_robotics.evaluator.episode import EpisodeOutcome, PolicyFault, check_finite
from ale_robotics.evaluator.metrics import compute as compute_metrics
from ale_robotics.evaluator.replay import ACTIONS_KEY, replay_episodes
from ale_robotics.evaluator.vector_backend import rollout_vectorized
from ale_robotics.planning.backend import planning_episodes
from ale_robotics.tasks.spec import PolicyArchitecture, TaskSpec

__all__ = [
    "EpisodeOutcome",
    "MLPPolicy",
    "PolicyFault",
    "check_finite",
    "rollout_episodes",
    "summarize",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class MLPPolicy:
    """The contract's MLP in numpy (float32, torch Linear layout: y = x W^T + b)."""

    def __init__(
        self,
        arch: PolicyArchitecture,
        weights: dict[str, npt.NDArray[np.floating]],
        action_high: npt.NDArray[np.floating],
    ) -> None:
        self._layers = [
            (
                np.ascontiguousarray(weights[f"{n}.weight"].T, dtype=np.float32),
                weights[f"{n}.bias"].astype(np.float32),
            )
            for n in arch.layer_names
        ]
        self._hidden = np.tanh if arch.activation == "tanh" else _relu
        self._out_tanh = arch.output_activation == "tanh"
        self._high = np.asarray(action_high, dtype=np.float32)

    def __call__(self, obs: npt.NDArray[np.floating]) -> npt.NDArray[np.float32]:
        x = np.asarray(obs, dtype=np.float32)
        last = len(self._layers) - 1
        for i, (w, b) in enumerate(self._layers):
            x = x @ w
            x += b
            if i < last:
                x = self._hidden(x)
        if self._out_tanh:
            x = np.tanh(x)
        out: npt.NDArray[np.float32] = x * self._high
        return out


def _relu(x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    return np.maximum(x, 0.0, out=x)


def _make_env(task: TaskSpec) -> Any:
    import gymnasium as gym

    return gym.make(
        task.env.gym_id,
        max_episode_steps=task.env.max_episode_steps,
        disable_env_checker=True,
        **task.env.kwargs,
    )


_ENV_CACHE: dict[str, list[Any]] = {}


def _envs(task: TaskSpec, n: int) -> list[Any]:
    """Envs reused across shards in this process; reset(seed=...) makes reuse exact."""
    key = task.model_dump_json(include={"env"})
    envs = _ENV_CACHE.setdefault(key, [])
    while len(envs) < n:
        envs.append(_make_env(task))
    return envs[:n]


def rollout_episodes(
    task: TaskSpec,
    weights: dict[str, npt.NDArray[np.floating]],
    seeds: Sequence[tuple[int, int]],
    on_episode: Callable[[EpisodeOutcome], None] | None = None,
) -> list[EpisodeOutcome]:
    """Run one episode per ``(index, seed)`` with all envs stepped together in this process."""
    if task.eval.backend == "replay":
        return replay_episodes(task, weights[ACTIONS_KEY], seeds, on_episode)
    if task.eval.backend in ("planner", "edmp"):
        return planning_episodes(task, weights, seeds, on_episode)
    assert task.policy is not None
    if task.eval.backend == "mujoco_rollout":
        return _rollout_native(task, weights, seeds, on_episode)
    envs = _envs(task, len(seeds))
    high = np.asarray(envs[0].action_space.high, dtype=np.float32)
    act_dtype = envs[0].action_space.dtype
    policy = MLPPolicy(task.policy, weights, high)
    obs = np.stack([env.reset(seed=int(s))[0] for env, (_, s) in zip(envs, seeds, strict=True)])
    active = list(range(len(seeds)))
    returns = [0.0] * len(seeds)
    lengths = [0] * len(seeds)
    outcomes: list[EpisodeOutcome] = []
    while active:
        actions = policy(obs).astype(act_dtype, copy=False)
        # every active episode has taken the same number of steps (they start together)
        step = lengths[active[0]] + 1
        check_finite("action", actions, [seeds[j][0] for j in active], step)
        still: list[int] = []
        next_obs = []
        for row, j in enumerate(active):
            o, r, term, trunc, _ = envs[j].step(actions[row])
            reward = float(r)
            if not math.isfinite(reward):
                raise PolicyFault("reward", str(reward), seeds[j][0], step)
            returns[j] += reward
            lengths[j] += 1
            if term or trunc:
                out = EpisodeOutcome(seeds[j][0], returns[j], lengths[j], bool(term))
                outcomes.append(out)
                if on_episode is not None:
                    on_episode(out)
            else:
                still.append(j)
                next_obs.append(o)
        active = still
        if active:
            obs = np.stack(next_obs)
    return sorted(outcomes, key=lambda e: e.index)


def _rollout_native(
    task: TaskSpec,
    weights: dict[str, npt.NDArray[np.floating]],
    seeds: Sequence[tuple[int, int]],
    on_episode: Callable[[EpisodeOutcome], None] | None,
) -> list[EpisodeOutcome]:
    """The shard's episodes through :mod:`.vector_backend` (one C-threaded batch)."""
    assert task.policy is not None
    env = _envs(task, 1)[0]
    policy = MLPPolicy(task.policy, weights, np.asarray(env.action_space.high, np.float32))
    out = [
        EpisodeOutcome(index, ret, length, False)
        for index, ret, length in rollout_vectorized(task, policy, seeds, task.eval.threads)
    ]
    if on_episode is not None:
        for o in out:
            on_episode(o)
    return out


def summarize(outcomes: Sequence[EpisodeOutcome], names: Iterable[str] = ()) -> dict[str, float]:
    """The task metrics from per-episode outcomes (see :mod:`ale_robotics.evaluator.metrics`).

    Always mean/std return and mean length; ``success_rate`` and
    ``mean_final_distance`` when every outcome carries them; plus the metrics
    ``names`` (the task's declared ones, e.g. ``mean_cost``), computed by name.
    """
    return compute_metrics(outcomes, names)
