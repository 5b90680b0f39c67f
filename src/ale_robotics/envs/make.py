"""The one place the evaluator makes a task's Gymnasium env.

Every env the evaluator steps or describes (batch rollouts, replay, the native
vectorized kind's model, interactive sessions, GetSpec's spaces, an audit's
re-run) comes from :func:`make_env`, so they all see the same id, kwargs and
step limit, and a change to how envs are made (a wrapper, a checker setting)
is made once. The env checker is off: it runs a reset and a step on creation
(with an unseeded RNG), which would perturb nothing we measure but costs time
in every worker; the tasks' envs are pinned by tests instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ale_robotics.tasks.spec import EnvSpec

__all__ = ["make_env"]


def make_env(env: EnvSpec, *, time_limit: bool = True, render_mode: str | None = None) -> Any:
    """A fresh env of ``env`` (a task's ``env`` section).

    ``time_limit``: wrap in Gymnasium's TimeLimit at ``env.max_episode_steps`` (the
    task's protocol); False gives the id's own registration limit, for callers that
    only read spaces or the model. ``render_mode``: Gymnasium's, None for none.
    """
    import gymnasium as gym

    extra: dict[str, Any] = {}
    if time_limit:
        extra["max_episode_steps"] = env.max_episode_steps
    if render_mode is not None:
        extra["render_mode"] = render_mode
    return gym.make(env.gym_id, disable_env_checker=True, **env.kwargs, **extra)
