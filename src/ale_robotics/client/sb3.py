"""A Stable-Baselines3 ``VecEnv`` over one batched session (optional extra ``sb3``).

SB3 vectorizes with ``DummyVecEnv``/``SubprocVecEnv`` over one env per process
slot; over remote ``RemoteEnv`` envs that is N sessions and N Step calls per
step. :class:`RemoteVecEnv` steps all N envs with one Step call of one session,
which is opened with the server's ``same_step`` autoreset, exactly SB3's
convention: the step that ends an episode returns the next episode's first
observation, with the last one in ``info["terminal_observation"]`` and
``info["TimeLimit.truncated"]`` set as ``DummyVecEnv`` sets it::

    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor
    from ale_robotics.client.sb3 import RemoteVecEnv

    venv = VecMonitor(RemoteVecEnv.from_env(num_envs=8))   # one session, 8 envs
    PPO("MlpPolicy", venv, n_steps=256).learn(100_000)
    venv.close()

Wrap it in ``VecMonitor`` for SB3's episode statistics (``rollout/ep_rew_mean``):
there is no per-env ``Monitor`` to record them. ``VecNormalize``,
``VecVideoRecorder`` (with ``render_mode="rgb_array"``) and ``evaluate_policy``
work on it as on any VecEnv. Install with ``pip install 'ale-robotics[sb3]'``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

try:
    from stable_baselines3.common.vec_env.base_vec_env import VecEnv
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "ale_robotics.client.sb3 needs Stable-Baselines3: pip install 'ale-robotics[sb3]' "
        "(or stable-baselines3>=2.4)"
    ) from exc

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
from ale_robotics.errors import InvalidArgumentError

__all__ = ["RemoteVecEnv"]

Obs = npt.NDArray[Any]


class RemoteVecEnv(SessionProps, VecEnv):
    """``num_envs`` envs of one session as an SB3 ``VecEnv`` (one Step call per step).

    ``client``, ``own_client``, ``task_id``, ``kind``, ``transport``, ``render_mode``
    and ``env`` as for :class:`~ale_robotics.client.remote_env.RemoteEnv`.
    """

    def __init__(
        self,
        client: AleClient | Endpoint | None = None,
        *,
        num_envs: int = 1,
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
            "num_envs": num_envs,
            "transport": transport,
            "render_mode": render_mode,
            "autoreset_mode": "same_step",
        }
        self._session = self._connect.open(**self._session_kw)
        self.render_mode = render_mode
        self._extra: list[dict[str, Any]] = [{} for _ in range(self._session.num_envs)]
        self._actions: Obs | None = None
        super().__init__(  # reads render_mode back through get_attr; sets metadata
            self._session.num_envs,
            self._session.single_observation_space,
            self._session.single_action_space,
        )
        fps = render_metadata(self._session).get("render_fps")
        if fps:
            self.metadata["render_fps"] = fps

    @classmethod
    def from_env(
        cls,
        *,
        num_envs: int = 1,
        kind: SessionKindName = "practice",
        task_id: str | None = None,
        transport: StepTransport = "any",
        render_mode: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> RemoteVecEnv:
        """Open a session with the harness's variables (``ALE_ENDPOINT``, ``ALE_TOKEN``...)."""
        return cls(
            num_envs=num_envs,
            kind=kind,
            task_id=task_id,
            transport=transport,
            render_mode=render_mode,
            env=env,
        )

    # ------------------------------------------------------------ VecEnv API --

    def reset(self) -> Obs:
        """Reset every env with the seeds of :meth:`seed` (if any), as ``DummyVecEnv``."""
        if any(self._options):
            raise InvalidArgumentError(
                "reset options do not reach the evaluator's envs: set_options is unsupported"
            )
        if self._session.closed:  # as SB3's own VecEnvs may be reset after close()
            self._session = self._connect.reopen(**self._session_kw)
        seeds = [-1 if s is None else int(s) for s in self._seeds]
        obs, infos = self._session.reset([] if all(s == -1 for s in seeds) else seeds)
        self.reset_infos = infos
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(
        self,
    ) -> tuple[Obs, npt.NDArray[np.float32], npt.NDArray[np.bool_], list[dict[str, Any]]]:
        if self._actions is None:
            raise InvalidArgumentError("step_wait() without step_async(actions)")
        actions, self._actions = self._actions, None
        out = self._session.step(actions)
        dones = out.terminated | out.truncated
        infos: list[dict[str, Any]] = []
        dtype = self.observation_space.dtype
        for i, wire in enumerate(out.infos):
            if dones[i]:
                info = dict(wire.pop("final_info", {}))
                info["terminal_observation"] = np.asarray(wire.pop("final_obs"), dtype=dtype)
                self.reset_infos[i] = wire  # what is left: the new episode's reset info
            else:
                info = wire
            info["TimeLimit.truncated"] = bool(out.truncated[i] and not out.terminated[i])
            infos.append(info)
        return out.obs, out.rewards.astype(np.float32), dones, infos

    def close(self) -> None:
        self._session.close()

    def get_images(self) -> Sequence[Obs | None]:
        """Each env's frame (``render_mode="rgb_array"``: rendered by the evaluator)."""
        if self.render_mode != "rgb_array":
            return [None] * self.num_envs
        return list(self._session.render())

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        return [self._attr(i, attr_name) for i in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        """Store ``attr_name`` on the client-side view of each env (the evaluator's env
        objects are not reachable); :meth:`get_attr` reads it back."""
        for i in self._get_indices(indices):
            self._extra[i][attr_name] = value

    def env_method(
        self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any
    ) -> list[Any]:
        if method_name == "render":
            frames = self.get_images()
            return [frames[i] for i in self._get_indices(indices)]
        out = []
        for i in self._get_indices(indices):
            method = self._attr(i, method_name)
            out.append(method(*method_args, **method_kwargs))
        return out

    def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
        """No gymnasium wrapper runs around the evaluator's envs (wrap the VecEnv instead)."""
        return [False for _ in self._get_indices(indices)]

    # --------------------------------------------------------------- private --

    def _attr(self, i: int, name: str) -> Any:
        session = self._session
        facts: dict[str, Callable[[], Any]] = {
            "spec": lambda: env_spec(session, ENTRY_POINT, render_mode=self.render_mode),
            "metadata": lambda: render_metadata(session),
            "render_mode": lambda: self.render_mode,
            "observation_space": lambda: self.observation_space,
            "action_space": lambda: self.action_space,
            "max_episode_steps": lambda: session.max_episode_steps,
        }
        if name in facts:
            return facts[name]()
        if name in self._extra[i]:
            return self._extra[i][name]
        raise AttributeError(
            f"a remote env has no attribute {name!r} here: the evaluator's env objects are "
            f"not reachable; get_attr reaches {sorted(facts)} and what set_attr stored"
        )

    def __del__(self) -> None:
        session = getattr(self, "_session", None)
        if session is not None:
            session.abandon()
