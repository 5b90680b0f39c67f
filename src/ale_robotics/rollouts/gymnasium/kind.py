"""The ``gymnasium`` kind: one Gymnasium env per episode of a shard, all stepped together.

Speed comes from batched numpy inference over all envs of a shard (one matmul
per layer per step instead of one per env, :class:`~ale_robotics.rollouts.mlp.MLPPolicy`),
with one such loop per worker process (Gymnasium's AsyncVectorEnv did not scale
on small hosts; processes do). The envs are made by
:func:`ale_robotics.envs.make.make_env` with the task's step limit (Gymnasium's
TimeLimit), like every env of the evaluator, and reused across shards in a
process: ``reset(seed=...)`` makes reuse exact.

Submitted policies are checked where they act: every batch of actions is
checked finite before any env steps it, and every reward after it
(:func:`~ale_robotics.model.episode.check_finite`). A NaN or inf raises
:class:`~ale_robotics.model.episode.PolicyFault`, the submission's failure,
so an episode can never be silently cut short (or voided later as a non-finite
metric) by a policy that outputs NaN when it is about to fail.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ale_robotics.model.rollout_kind import Artifact, EpisodeCallback, Shard
from ale_robotics.rollouts.policy import PolicyRolloutKind, policy_for
from ale_robotics.tasks.spec import TaskSpec

if TYPE_CHECKING:
    from ale_robotics.model.episode import EpisodeOutcome

__all__ = ["GymnasiumKind"]

_ENV_CACHE: dict[str, list[Any]] = {}


def _envs(task: TaskSpec, n: int) -> list[Any]:
    """Envs reused across shards in this process; reset(seed=...) makes reuse exact."""
    from ale_robotics.envs.make import make_env

    key = task.model_dump_json(include={"env"})
    envs = _ENV_CACHE.setdefault(key, [])
    while len(envs) < n:
        envs.append(make_env(task.env))
    return envs[:n]


class GymnasiumKind(PolicyRolloutKind):
    """The default kind: any Gymnasium env id, stepped from Python."""

    name = "gymnasium"

    def run_shard(
        self,
        task: TaskSpec,
        artifact: Artifact,
        seeds: Shard,
        on_episode: EpisodeCallback | None = None,
    ) -> list[EpisodeOutcome]:
        """One episode per ``(index, seed)``, in index order; episodes that end early drop out
        of the batch while the others go on. (numpy, Gymnasium and the episode helpers are
        imported here: checking a task config loads this module, and needs none of them.)"""
        import numpy as np

        from ale_robotics.model.episode import EpisodeOutcome, PolicyFault, check_finite

        envs = _envs(task, len(seeds))
        act_dtype = envs[0].action_space.dtype
        policy = policy_for(task, artifact, envs[0].action_space.high)
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
