"""The native batch pipeline: build the policy from the contract, roll it out on hidden seeds.

Speed comes from two things measured on these 2-core machines: one loop per
process (processes scale, Gymnasium's AsyncVectorEnv did not), and batched numpy
inference over all envs of a shard (one matmul per layer per step instead of one
per env). BLAS is pinned to one thread per worker, or its threads fight MuJoCo.

Reproducibility: episodes are grouped into shards of ``eval.envs_per_shard`` in
index order, a layout fixed by the task config, so a result does not depend on
how many worker processes a host has (batched matmul may round differently for
different batch sizes; a fixed layout keeps every batch the same).
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ale_robotics.tasks.spec import PolicyArchitecture, TaskSpec

__all__ = [
    "EpisodeOutcome",
    "MLPPolicy",
    "RolloutPool",
    "WorkerCrashed",
    "rollout_episodes",
    "summarize",
]

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class WorkerCrashed(Exception):
    """A worker process died: an infrastructure failure, never the submission's fault."""


@dataclass(frozen=True)
class EpisodeOutcome:
    index: int
    ret: float
    length: int
    terminated: bool


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
        still: list[int] = []
        next_obs = []
        for row, j in enumerate(active):
            o, r, term, trunc, _ = envs[j].step(actions[row])
            returns[j] += float(r)
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
    from ale_robotics.evaluator.vector_backend import rollout_vectorized

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


# ----------------------------------------------------------- worker processes --

_PROGRESS: Any = None


def _init_worker(progress: Any) -> None:
    global _PROGRESS
    _PROGRESS = progress


def _run_shard(
    tag: str,
    task_json: str,
    weights: dict[str, npt.NDArray[np.floating]],
    seeds: list[tuple[int, int]],
) -> list[EpisodeOutcome]:
    task = TaskSpec.model_validate_json(task_json)

    def report(_: EpisodeOutcome) -> None:
        if _PROGRESS is not None:
            _PROGRESS.put((tag, 1))

    return rollout_episodes(task, weights, seeds, report)


class RolloutPool:
    """A persistent pool of spawned worker processes, rebuilt if one of them dies."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or max(1, min(os.cpu_count() or 1, 8))
        self._ctx = mp.get_context("spawn")
        self._pool: ProcessPoolExecutor | None = None
        self._progress: Any = None
        self._lock = threading.Lock()

    def _get(self) -> tuple[ProcessPoolExecutor, Any]:
        with self._lock:
            if self._pool is None:
                saved = {v: os.environ.get(v) for v in _THREAD_VARS}
                for v in _THREAD_VARS:
                    os.environ[v] = "1"
                try:
                    self._progress = self._ctx.Queue()
                    self._pool = ProcessPoolExecutor(
                        self.workers,
                        mp_context=self._ctx,
                        initializer=_init_worker,
                        initargs=(self._progress,),
                    )
                finally:
                    for v, old in saved.items():
                        if old is None:
                            os.environ.pop(v, None)
                        else:
                            os.environ[v] = old
            return self._pool, self._progress

    def _discard(self) -> None:
        """Drop the pool and kill its processes (a timed-out shard must not keep running)."""
        with self._lock:
            if self._pool is not None:
                # ProcessPoolExecutor only gains terminate_workers() in Python 3.14.
                procs = list(getattr(self._pool, "_processes", {}).values())
                for proc in procs:
                    proc.terminate()
                self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def shutdown(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def run(
        self,
        task: TaskSpec,
        weights: dict[str, npt.NDArray[np.floating]],
        seeds: Sequence[int],
        on_progress: Callable[[int], None] | None = None,
        deadline: float | None = None,
        on_heartbeat: Callable[[], None] | None = None,
    ) -> list[EpisodeOutcome]:
        """All episodes, sharded by the task's fixed layout; progress as episodes finish.

        Raises :class:`WorkerCrashed` when a worker dies and :class:`TimeoutError`
        past ``deadline`` (a ``time.monotonic()`` value).
        """
        pool, progress = self._get()
        size = task.eval.envs_per_shard
        indexed = list(enumerate(int(s) for s in seeds))
        shards = [indexed[i : i + size] for i in range(0, len(indexed), size)]
        tag = f"{os.getpid()}-{time.monotonic_ns()}"
        task_json = task.model_dump_json()
        try:
            futures: list[Future[list[EpisodeOutcome]]] = [
                pool.submit(_run_shard, tag, task_json, weights, shard) for shard in shards
            ]
        except BrokenProcessPool as exc:
            self._discard()
            raise WorkerCrashed(f"worker pool broken: {exc}") from None
        done = 0
        pending = set(futures)
        beat = time.monotonic()
        while True:
            _, pending = wait(pending, timeout=0.05, return_when=FIRST_COMPLETED)
            if on_heartbeat is not None and time.monotonic() - beat > 1.0:
                beat = time.monotonic()
                on_heartbeat()
            try:
                while True:
                    msg_tag, n = progress.get_nowait()
                    if msg_tag == tag:
                        done += n
                        if on_progress is not None:
                            on_progress(done)
            except queue.Empty:
                pass
            if not pending:
                break
            if deadline is not None and time.monotonic() > deadline:
                for f in futures:
                    f.cancel()
                self._discard()
                raise TimeoutError("evaluation deadline passed")
        outcomes: list[EpisodeOutcome] = []
        for f in futures:
            try:
                outcomes.extend(f.result())
            except BrokenProcessPool as exc:
                self._discard()
                raise WorkerCrashed(f"a worker process died: {exc}") from None
        if on_progress is not None and done != len(indexed):
            on_progress(len(indexed))
        return sorted(outcomes, key=lambda e: e.index)


def summarize(outcomes: Sequence[EpisodeOutcome]) -> dict[str, float]:
    """The task metrics from per-episode outcomes (mean/std return, mean length)."""
    rets = np.array([o.ret for o in outcomes], dtype=np.float64)
    lens = np.array([o.length for o in outcomes], dtype=np.float64)
    out = {
        "mean_return": float(rets.mean()),
        "std_return": float(rets.std()),
        "mean_episode_length": float(lens.mean()),
    }
    if not all(math.isfinite(v) for v in out.values()):
        raise ValueError("non-finite metric")
    return out
