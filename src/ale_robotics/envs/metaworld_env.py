"""Meta-World tasks as Gymnasium envs, following TD-MPC2's evaluation protocol.

TD-MPC2 (Hansen et al., ICLR 2024) runs Meta-World through its own wrapper
(``tdmpc2/envs/metaworld.py`` in nicklashansen/tdmpc2): the *goal-observable*
variant of a task, with ``_freeze_rand_vec = False`` so that every episode draws
a new object and goal position, an action repeat of 2, 100 agent steps per
episode, and success read from ``info["success"]`` at the episode's last step.
This adapter does the same, with two differences that only make it stricter:

* **Seeding.** Meta-World draws the task variant (object and goal position) from
  the global ``np.random`` unless ``seeded_rand_vec`` is set, and its
  ``reset(seed=...)`` ignores the seed. Here the variant comes from the env's own
  ``np_random``, and ``reset(seed=s)`` re-seeds it through Meta-World's
  ``seed(s)``, so the variant and the initial state are a function of ``s``
  alone, whatever ran before; ``reset()`` without a seed continues the stream
  (a new env starts from OS entropy). The global ``np.random`` state is left as
  it was, which Meta-World's own constructor does not do without a seed.
* **Observation bounds.** The observation is Meta-World's 39-vector as float32
  inside the Box Meta-World clips it to (``sawyer_observation_space``, the goal
  within its goal space); the reset observation is clipped the same way as the
  step ones. TD-MPC2 also takes one zero-action env step after each reset and
  returns the observation from before it; that step is not taken here (it would
  make the first observation stale).

The reward of an agent step is the sum over its env steps (training signal only);
``info`` is Meta-World's from the last env step, so ``info["success"]`` of the
last agent step is the episode's success. Meta-World truncates at its own
``max_path_length`` (500 env steps), well past the 200 env steps of an episode.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

__all__ = ["MetaWorldEnv"]

Obs = npt.NDArray[np.float32]


def _entropy_seed() -> int:
    return int(np.random.SeedSequence().generate_state(1)[0])


class MetaWorldEnv(gym.Env[Obs, Obs]):
    """One goal-observable Meta-World task (e.g. ``push-v3``) with TD-MPC2's action repeat."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (Gymnasium's own API)

    def __init__(self, task_name: str, action_repeat: int = 2) -> None:
        if action_repeat < 1:
            raise ValueError(f"action_repeat must be at least 1, got {action_repeat}")
        from metaworld.env_dict import ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE

        key = f"{task_name}-goal-observable"
        if key not in ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE:
            raise ValueError(f"Meta-World has no goal-observable task {task_name!r}")
        # A seed makes the constructor restore the global np.random state it uses.
        env_cls: Any = ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE[key]
        self._env: Any = env_cls(seed=0)
        self._env._freeze_rand_vec = False  # a new variant per episode, as TD-MPC2
        self._env.seeded_rand_vec = True  # ... drawn from the env's np_random
        self._env.seed(_entropy_seed())
        self._repeat = action_repeat
        box = self._env.sawyer_observation_space
        self._low = np.asarray(box.low, dtype=np.float64)
        self._high = np.asarray(box.high, dtype=np.float64)
        self.observation_space = spaces.Box(
            self._low.astype(np.float32), self._high.astype(np.float32), dtype=np.float32
        )
        act = self._env.action_space
        self.action_space = spaces.Box(
            np.asarray(act.low, dtype=np.float32),
            np.asarray(act.high, dtype=np.float32),
            dtype=np.float32,
        )
        self.render_mode = None

    def _obs(self, raw: npt.NDArray[Any]) -> Obs:
        # float64 clip, then float32: rounding is monotone, so the result stays in the Box
        return np.clip(np.asarray(raw, dtype=np.float64), self._low, self._high).astype(np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self._env.seed(seed)
        obs, info = self._env.reset()
        return self._obs(obs), dict(info)

    def step(self, action: Obs) -> tuple[Obs, float, bool, bool, dict[str, Any]]:
        a = np.asarray(action, dtype=np.float32)
        reward = 0.0
        terminated = truncated = False
        obs: npt.NDArray[Any] = np.zeros(self._low.shape)
        info: dict[str, Any] = {}
        for _ in range(self._repeat):
            obs, r, term, trunc, info = self._env.step(a.copy())
            reward += float(r)
            terminated, truncated = bool(term), bool(trunc)
            if terminated or truncated:
                break
        return self._obs(obs), reward, terminated, truncated, dict(info)

    def close(self) -> None:
        self._env.close()
