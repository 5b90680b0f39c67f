"""Gymnasium environments backed by a remote AleEnv session.

``RemoteEnv`` is a ``gymnasium.Env`` (one env), ``RemoteVectorEnv`` a
``gymnasium.vector.VectorEnv`` (``num_envs`` envs, one Step call for all), so
Gymnasium and Stable-Baselines3 code runs against a remote task unchanged::

    env = RemoteEnv.from_env()                            # practice session, your seeds
    model = stable_baselines3.PPO("MlpPolicy", env).learn(50_000)
    env.close()

    env = RemoteEnv.from_env(kind="eval")                 # hidden seeds, fixed budget
    while not env.eval_complete:
        obs, info = env.reset()
        done = False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, reward, terminated, truncated, info = env.step(action)
            done = terminated or truncated
    env.close()

Autoreset is Gymnasium 1.x's default ``AutoresetMode.NEXT_STEP``, done by the
server: the Step after an env's episode ended ignores its action and returns
the first observation of the next episode with reward 0 (see
:mod:`ale_robotics.evaluator.vector_session`). ``RemoteEnv`` users call
``reset()`` after an episode ends, as with any ``gymnasium.Env``.

Spaces come from the task's ``GetSpec`` (dtype, shape and bounds); actions are
cast to the action dtype and checked by the server, which answers
:class:`~ale_robotics.errors.InvalidArgumentError` for a bad one. In an eval
session the seeds passed to ``reset`` are ignored (``seeds_ignored`` says so):
the evaluator uses the run's hidden seeds.

Stopping early never pays: an eval episode left unfinished (``reset`` before it
ended, ``close``, the process exiting) is played to its end by the evaluator
with the task's null action (zero, or the bounds' centre where zero is out of
bounds), and so is every episode never started. Practice steps count against
the run's training budget (``AleClient.get_spec().training_agent_steps``,
one per env per ``step``); past it ``step`` and ``reset`` raise
:class:`~ale_robotics.errors.ResourceExhaustedError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from ale_robotics.client.sdk import AleClient
from ale_robotics.client.session import RemoteSession, SessionKindName, StepTransport

__all__ = ["RemoteEnv", "RemoteVectorEnv"]

Obs = npt.NDArray[Any]


def _client(env: Mapping[str, str] | None) -> AleClient:
    return AleClient.from_env(None if env is None else dict(env))


class _SessionProps:
    """Session facts shared by both env classes."""

    _session: RemoteSession

    @property
    def session_id(self) -> str:
        return self._session.session_id

    @property
    def kind(self) -> str:
        return self._session.kind

    @property
    def episode_budget(self) -> int:
        """Episodes of an eval session (0 for practice)."""
        return self._session.episode_budget

    @property
    def episodes_completed(self) -> int:
        """Eval sessions: budget episodes that have ended so far."""
        return self._session.episodes_completed

    @property
    def eval_complete(self) -> bool:
        """Eval sessions: every budget episode has ended; the evaluator has the result."""
        return self._session.eval_complete

    @property
    def seeds_ignored(self) -> bool:
        return self._session.seeds_ignored

    @property
    def transport(self) -> str:
        """How Steps travel: "stream" (one StepStream call) or "unary" (a Step call each)."""
        return self._session.transport


class RemoteEnv(_SessionProps, gym.Env[Obs, Obs]):
    """A one-env session as a ``gymnasium.Env``."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (Gymnasium's own API)

    def __init__(
        self,
        client: AleClient,
        *,
        kind: SessionKindName = "practice",
        own_client: bool = False,
        transport: StepTransport = "stream",
    ) -> None:
        self._own_client = own_client
        self._session = RemoteSession(client, kind=kind, num_envs=1, transport=transport)
        self.observation_space = self._session.single_observation_space
        self.action_space = self._session.single_action_space
        self.render_mode = None

    @classmethod
    def from_env(
        cls, *, kind: SessionKindName = "practice", env: Mapping[str, str] | None = None
    ) -> RemoteEnv:
        """Open a session with the harness's variables (``ALE_ENDPOINT``, ``ALE_TOKEN``...)."""
        return cls(_client(env), kind=kind, own_client=True)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        super().reset(seed=seed)
        obs, infos = self._session.reset(None if seed is None else [seed])
        return obs[0], infos[0]

    def step(self, action: Obs) -> tuple[Obs, float, bool, bool, dict[str, Any]]:
        out = self._session.step(np.expand_dims(np.asarray(action), 0))
        return (
            out.obs[0],
            float(out.rewards[0]),
            bool(out.terminated[0]),
            bool(out.truncated[0]),
            out.infos[0],
        )

    def close(self) -> None:
        self._session.close()
        if self._own_client:
            self._session.client.close()


class RemoteVectorEnv(_SessionProps, VectorEnv[Obs, Obs, Obs]):
    """A ``num_envs`` session as a ``gymnasium.vector.VectorEnv`` (one Step call for all envs)."""

    metadata: dict[str, Any] = {  # noqa: RUF012 (Gymnasium's own API)
        "render_modes": [],
        "autoreset_mode": AutoresetMode.NEXT_STEP,
    }

    def __init__(
        self,
        client: AleClient,
        *,
        num_envs: int = 1,
        kind: SessionKindName = "practice",
        own_client: bool = False,
        transport: StepTransport = "stream",
    ) -> None:
        self._own_client = own_client
        self._session = RemoteSession(client, kind=kind, num_envs=num_envs, transport=transport)
        self.num_envs = self._session.num_envs
        self.single_observation_space = self._session.single_observation_space
        self.single_action_space = self._session.single_action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.render_mode = None

    @classmethod
    def from_env(
        cls,
        *,
        num_envs: int = 1,
        kind: SessionKindName = "practice",
        env: Mapping[str, str] | None = None,
    ) -> RemoteVectorEnv:
        """Open a session with the harness's variables (``ALE_ENDPOINT``, ``ALE_TOKEN``...)."""
        return cls(_client(env), num_envs=num_envs, kind=kind, own_client=True)

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Obs, dict[str, Any]]:
        """Reset every env: ``seed`` int gives env i seed+i, a list one seed per env."""
        if seed is None:
            seeds: list[int] = []
        elif isinstance(seed, int | np.integer):
            super().reset(seed=int(seed))
            seeds = [int(seed)]
        else:
            if any(s is None for s in seed) or len(seed) != self.num_envs:
                raise ValueError(f"seed lists need one int per env ({self.num_envs})")
            seeds = [int(s) for s in seed if s is not None]
        obs, infos = self._session.reset_wire(seeds)
        return obs, infos.vector(self._add_info)

    def step(
        self, actions: Obs
    ) -> tuple[Obs, npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any], dict[str, Any]]:
        out = self._session.step(actions)
        infos = out.wire_infos.vector(self._add_info)
        return out.obs, out.rewards, out.terminated, out.truncated, infos

    def close_extras(self, **kwargs: Any) -> None:
        self._session.close()
        if self._own_client:
            self._session.client.close()
