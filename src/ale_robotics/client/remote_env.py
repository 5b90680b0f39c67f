"""Gymnasium environments backed by a remote AleEnv session.

``RemoteEnv`` is a ``gymnasium.Env`` (one env), ``RemoteVectorEnv``
(:mod:`.vector_env`) a ``gymnasium.vector.VectorEnv`` (``num_envs`` envs, one
Step call for all), so Gymnasium and Stable-Baselines3 code runs against a
remote task unchanged::

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

A task as a Gymnasium id (``gym.make`` passes ``render_mode`` through)::

    gym.register("AleHopper-v1", entry_point="ale_robotics.client:RemoteEnv",
                 kwargs={"task_id": "td3-hopper-v1"})
    env = gym.make("AleHopper-v1")                        # env.spec.max_episode_steps: 1000

(An id with no ``/``: scripts name files after it, and ``NAME/`` is a Gymnasium
namespace, ``ALE/`` the Arcade Learning Environment's.)

``spec.max_episode_steps`` (and :attr:`RemoteEnv.max_episode_steps`) is the
server's step limit: the server truncates episodes there, so no client
``TimeLimit`` is needed (one at the same limit changes nothing).

Spaces come from the task's ``GetSpec`` (dtype, shape and bounds); the server
checks every action and answers :class:`~ale_robotics.errors.InvalidArgumentError`
for a bad one. Actions travel in the action space's dtype, or as float64 when
the caller gives float64 and the evaluator accepts it (a local MuJoCo env
uses float64 actions as they are, so a script gets the same numbers remote
and local). In an eval session the seeds passed to ``reset`` are ignored
(``seeds_ignored`` says so): the evaluator uses the run's hidden seeds.

An env nobody closes is closed all the same (:mod:`.lifetime`), and
``reset()`` after ``close()`` opens a new session, as a local env would
start over. Envs can be neither pickled nor copied: pickle a function that
makes one instead.

Stopping early never pays: an eval episode left unfinished (``reset`` before it
ended, ``close``, the process exiting) is played to its end by the evaluator
with the task's null action (zero, or the bounds' centre where zero is out of
bounds), and so is every episode never started. Practice steps count against
the run's training budget (``AleClient.get_spec().training_agent_steps``,
one per env per ``step``); past it ``step`` and ``reset`` raise
:class:`~ale_robotics.errors.ResourceExhaustedError`.

A batch task whose simulator runs only in the evaluator (its config's
``training.simulator`` is "evaluator"; GetSpec's capabilities have
``practice_sessions``) is trained the same way: its sandbox cannot import the
simulator, so ``RemoteEnv.from_env()`` is the agent's env. Such a task offers no
eval session (it is evaluated on its submission). Nothing here imports a
simulator, so the SDK works in that sandbox.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt

from ale_robotics.client._envbase import (
    ENTRY_POINT,
    Endpoint,
    SessionProps,
    connector,
    env_spec,
    render_metadata,
)
from ale_robotics.client.sdk import AleClient
from ale_robotics.client.session import SessionKindName, StepTransport

if TYPE_CHECKING:
    from gymnasium.envs.registration import EnvSpec

    from ale_robotics.client.vector_env import RemoteVectorEnv

__all__ = ["ENTRY_POINT", "RemoteEnv", "RemoteVectorEnv"]

Obs = npt.NDArray[Any]


class RemoteEnv(SessionProps, gym.Env[Obs, Obs]):
    """A one-env session as a ``gymnasium.Env``.

    ``client``: the connection (default: one from ``ALE_ENDPOINT``, ``ALE_TOKEN``...,
    or ``env``), closed with the env when the env owns it (``own_client``; True
    for a client the env built). ``task_id`` overrides ``ALE_TASK_ID``.
    ``render_mode``: None, or "rgb_array" where the task renders on this
    evaluator (``metadata["render_modes"]``); frames are rendered by the evaluator.
    """

    # What gym.make checks before it builds the env; an instance's own metadata says what
    # its task offers on its evaluator.
    metadata: dict[str, Any] = {"render_modes": ["rgb_array"]}  # noqa: RUF012 (Gymnasium's)

    def __init__(
        self,
        client: AleClient | Endpoint | None = None,
        *,
        task_id: str | None = None,
        kind: SessionKindName = "practice",
        transport: StepTransport = "any",
        render_mode: str | None = None,
        own_client: bool | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self._connect = connector(client, own_client=own_client, task_id=task_id, env=env)
        self._session_kw: dict[str, Any] = {
            "kind": kind,
            "num_envs": 1,
            "transport": transport,
            "render_mode": render_mode,
        }
        self._session = self._connect.open(**self._session_kw)
        self.observation_space = self._session.single_observation_space
        self.action_space = self._session.single_action_space
        self.render_mode = render_mode
        self.metadata = render_metadata(self._session)
        self._spec: EnvSpec | None = None

    @classmethod
    def from_env(
        cls,
        *,
        kind: SessionKindName = "practice",
        task_id: str | None = None,
        transport: StepTransport = "any",
        render_mode: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> RemoteEnv:
        """Open a session with the harness's variables (``ALE_ENDPOINT``, ``ALE_TOKEN``...)."""
        return cls(
            kind=kind, task_id=task_id, transport=transport, render_mode=render_mode, env=env
        )

    @property
    def spec(self) -> EnvSpec:
        """The env's ``EnvSpec``, ``max_episode_steps`` the server's step limit.

        ``gym.make`` replaces it with the registered id's spec (whose own
        ``max_episode_steps`` it leaves None when it adds no TimeLimit): the server's
        limit is filled in, so ``TimeLimit``-aware code sees it either way.
        """
        if self._spec is None:
            where = self._connect.endpoint
            self._spec = env_spec(
                self._session,
                ENTRY_POINT,
                transport=self._session_kw["transport"],
                render_mode=self.render_mode,
                **({} if where is None else {"client": where}),
            )
        return self._spec

    @spec.setter
    def spec(self, value: EnvSpec | None) -> None:
        if value is not None and value.max_episode_steps is None:
            from dataclasses import replace

            value = replace(value, max_episode_steps=self.max_episode_steps)
        self._spec = value

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        super().reset(seed=seed)
        if self._session.closed:  # as a local env starts over after close()
            self._session = self._connect.reopen(**self._session_kw)
        obs, infos = self._session.reset(None if seed is None else [seed])
        return obs[0], infos[0]

    def step(self, action: Obs) -> tuple[Obs, float, bool, bool, dict[str, Any]]:
        out = self._session.step(np.asarray(action)[None])
        return (
            out.obs[0],
            float(out.rewards[0]),
            bool(out.terminated[0]),
            bool(out.truncated[0]),
            out.infos[0],
        )

    def render(self) -> Obs | None:
        """The current frame (``render_mode="rgb_array"``: uint8 [height, width, 3]), or None."""
        if self.render_mode is None:
            gym.logger.warn(
                "You are calling render method without specifying any render mode: open the "
                'env with render_mode="rgb_array" (gym.make(id, render_mode="rgb_array"))'
            )
            return None
        frame: Obs = self._session.render()[0]
        return frame

    def close(self) -> None:
        self._session.close()


def __getattr__(name: str) -> Any:
    """``RemoteVectorEnv`` on first use: its module needs Gymnasium >= 1.0, and under 0.29
    (CleanRL's pin) importing ``RemoteEnv`` must still work. Not a cycle: vector_env does
    not import this module (an import-linter contract)."""
    if name == "RemoteVectorEnv":
        from ale_robotics.client.vector_env import RemoteVectorEnv

        return RemoteVectorEnv
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
