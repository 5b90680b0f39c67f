"""``RemoteVectorEnv``: a ``num_envs`` session as a ``gymnasium.vector.VectorEnv``.

One Step call steps every env of the session, so a vector env costs one round
trip per step, not one per env. It behaves as ``SyncVectorEnv`` over local envs
(a test compares the two step for step):

* autoreset is done by the server, in the mode the env is opened with: Gymnasium
  1.x's ``NEXT_STEP`` (the default), ``SAME_STEP`` (``final_obs``/``final_info``
  in the infos) or ``DISABLED`` (``reset(options={"reset_mask": ...})`` the envs
  that ended); ``metadata["autoreset_mode"]`` says which;
* ``reset(seed=[1, None, None])`` seeds env 0 and leaves the others' generators
  going; ``np_random_seed`` is a tuple, one seed per env (-1 where the client
  does not know it: never seeded by you, or an eval session's hidden seeds);
* ``call``/``get_attr``/``set_attr`` reach a client-side view of each env: its
  ``spec``, spaces, ``metadata``, ``render_mode``, ``np_random_seed``,
  ``max_episode_steps``, ``render()``, and attributes you set yourself. The
  evaluator's env objects are not reachable, so anything else is an
  AttributeError that says so.

See :mod:`ale_robotics.evaluator.sessions.vector` for the server side.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium
import numpy as np
import numpy.typing as npt

try:
    from gymnasium.vector import AutoresetMode, VectorEnv
    from gymnasium.vector.utils import batch_space
except ImportError as exc:  # Gymnasium 0.x: another vector API (CleanRL pins 0.29.1)
    raise ImportError(
        f"RemoteVectorEnv needs gymnasium >= 1.0 (this is gymnasium {gymnasium.__version__}): "
        "pip install 'gymnasium>=1.0'. RemoteEnv works with 0.29 too: wrap RemoteEnvs in "
        "gymnasium.vector.SyncVectorEnv there (one session per env)"
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

__all__ = ["RemoteVectorEnv"]

Obs = npt.NDArray[Any]

_WIRE_MODES = {
    AutoresetMode.NEXT_STEP: "next_step",
    AutoresetMode.SAME_STEP: "same_step",
    AutoresetMode.DISABLED: "disabled",
}
_FIXED = frozenset(
    {
        "spec",
        "metadata",
        "render_mode",
        "observation_space",
        "action_space",
        "np_random_seed",
        "max_episode_steps",
        "render",
    }
)


def _mode(value: AutoresetMode | str) -> AutoresetMode:
    """An ``AutoresetMode`` from the enum, its value ("SameStep") or the wire name."""
    if isinstance(value, AutoresetMode):
        return value
    for mode, wire in _WIRE_MODES.items():
        if value in (mode.value, wire, mode.name):
            return mode
    raise InvalidArgumentError(
        f"autoreset_mode {value!r}: one of AutoresetMode.NEXT_STEP, SAME_STEP, DISABLED"
    )


class RemoteVectorEnv(SessionProps, VectorEnv[Obs, Obs, Obs]):
    """A ``num_envs`` session as a ``gymnasium.vector.VectorEnv`` (one Step call for all envs).

    ``client``, ``own_client``, ``task_id``, ``render_mode`` and ``env`` as for
    :class:`~ale_robotics.client.remote_env.RemoteEnv`; ``autoreset_mode`` one of
    Gymnasium's ``AutoresetMode`` values.
    """

    metadata: dict[str, Any] = {  # noqa: RUF012 (Gymnasium's own API)
        "render_modes": [],
        "autoreset_mode": AutoresetMode.NEXT_STEP,
    }

    def __init__(
        self,
        client: AleClient | Endpoint | None = None,
        *,
        num_envs: int = 1,
        task_id: str | None = None,
        kind: SessionKindName = "practice",
        transport: StepTransport = "any",
        render_mode: str | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        own_client: bool | None = None,
        env: Mapping[str, str] | None = None,
        max_episode_steps: int | None = None,
    ) -> None:
        """``max_episode_steps``: what ``gym.make_vec`` passes for an id registered with
        one; it must be the server's limit (the server truncates there)."""
        mode = _mode(autoreset_mode)
        self._connect = connector(client, own_client=own_client, task_id=task_id, env=env)
        self._session_kw: dict[str, Any] = {
            "kind": kind,
            "num_envs": num_envs,
            "transport": transport,
            "render_mode": render_mode,
            "autoreset_mode": _WIRE_MODES[mode],
        }
        self._session = self._connect.open(**self._session_kw)
        if max_episode_steps is not None and max_episode_steps != self.max_episode_steps:
            self._session.close()
            raise InvalidArgumentError(
                f"max_episode_steps {max_episode_steps}: the evaluator truncates episodes of "
                f"{self.task_id} at {self.max_episode_steps} steps; register the id without "
                "max_episode_steps (or with that value)"
            )
        self.num_envs = self._session.num_envs
        self.single_observation_space = self._session.single_observation_space
        self.single_action_space = self._session.single_action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.render_mode = render_mode
        self.metadata = {"autoreset_mode": mode, **render_metadata(self._session)}
        self._seeds: list[int] = [-1] * self.num_envs
        self._views = [_EnvView(self, i) for i in range(self.num_envs)]

    @classmethod
    def from_env(
        cls,
        *,
        num_envs: int = 1,
        kind: SessionKindName = "practice",
        task_id: str | None = None,
        transport: StepTransport = "any",
        render_mode: str | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        env: Mapping[str, str] | None = None,
    ) -> RemoteVectorEnv:
        """Open a session with the harness's variables (``ALE_ENDPOINT``, ``ALE_TOKEN``...)."""
        return cls(
            num_envs=num_envs,
            kind=kind,
            task_id=task_id,
            transport=transport,
            render_mode=render_mode,
            autoreset_mode=autoreset_mode,
            env=env,
        )

    @property
    def np_random_seed(self) -> tuple[int, ...]:  # type: ignore[override]
        """Each env's seed, as ``SyncVectorEnv`` gives them (-1: not known to the client)."""
        return tuple(self._seeds)

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Obs, dict[str, Any]]:
        """Reset every env (or those of ``options["reset_mask"]``): ``seed`` int gives env i
        seed+i, a list one seed (or None) per env, as ``SyncVectorEnv``."""
        per_env = self._per_env_seeds(seed)
        options = dict(options or {})
        mask = _reset_mask(options.pop("reset_mask", None), self.num_envs)
        if options:
            raise InvalidArgumentError(
                f"reset options {sorted(options)} do not reach the evaluator's envs; only "
                "reset_mask is supported"
            )
        if self._session.closed:  # as a local vector env starts over after close()
            self._session = self._connect.reopen(**self._session_kw)
            self.closed = False
            self._seeds = [-1] * self.num_envs
        wire = [] if seed is None else ([int(seed)] if isinstance(seed, int) else per_env)
        obs, infos = self._session.reset_wire(wire, None if mask is None else mask.tolist())
        if not self._session.seeds_ignored and seed is not None:
            for i in range(self.num_envs):
                if per_env[i] != -1 and (mask is None or mask[i]):
                    self._seeds[i] = per_env[i]
        return obs, infos.vector(self._add_info)

    def step(
        self, actions: Obs
    ) -> tuple[Obs, npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any], dict[str, Any]]:
        out = self._session.step(actions)
        infos = out.wire_infos.vector(self._add_info)
        if "final_obs" in infos:
            infos["final_obs"] = self._final_obs(infos["final_obs"], infos["_final_obs"])
        return out.obs, out.rewards, out.terminated, out.truncated, infos

    def render(self) -> tuple[Obs, ...] | None:
        """Each env's current frame (as ``SyncVectorEnv.render``), or None without a
        render mode."""
        if self.render_mode is None:
            return None
        return tuple(self._session.render())

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Each env's ``name`` (called with the arguments if callable), as ``SyncVectorEnv``."""
        results = []
        for view in self._views:
            value = view.attr(name)
            results.append(value(*args, **kwargs) if callable(value) else value)
        return tuple(results)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return self.call(name)

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | Any) -> None:
        """Set ``name`` on each env's client-side view (one value, or one per env)."""
        if not isinstance(values, list | tuple):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(
                "Values must be a list or tuple with length equal to the number of "
                f"environments. Got `{len(values)}` values for {self.num_envs} environments."
            )
        if name in _FIXED:
            raise AttributeError(f"{name!r} of a remote env is fixed by its session")
        for view, value in zip(self._views, values, strict=True):
            view.extra[name] = value

    def close_extras(self, **kwargs: Any) -> None:
        self._session.close()

    def __del__(self) -> None:
        # VectorEnv.__del__ would close() here, blocking on CloseSession inside the
        # garbage collector (or hanging at interpreter shutdown): hand it off instead.
        session = getattr(self, "_session", None)
        if session is not None:
            session.abandon()

    # --------------------------------------------------------------- private --

    def _per_env_seeds(self, seed: int | Sequence[int | None] | None) -> list[int]:
        """One seed per env (-1 for none), checked as ``SyncVectorEnv`` checks them."""
        if seed is None:
            return [-1] * self.num_envs
        if isinstance(seed, int | np.integer):
            return [int(seed) + i for i in range(self.num_envs)]
        if len(seed) != self.num_envs:
            raise ValueError(
                "If seeds are passed as a list the length must match "
                f"num_envs={self.num_envs} but got length={len(seed)}."
            )
        return [-1 if s is None else int(s) for s in seed]

    def _final_obs(self, values: Any, mask: npt.NDArray[np.bool_]) -> Obs:
        """``final_obs`` as ``SyncVectorEnv`` lays it out: an object array of each ended
        env's last observation (None elsewhere), in the observation dtype (it travels
        as JSON lists, which keep float64 values exact)."""
        dtype = self.single_observation_space.dtype
        out = np.full(self.num_envs, fill_value=None, dtype=object)
        for i in np.flatnonzero(mask):
            out[i] = np.asarray(values[i], dtype=dtype)
        return out


def _reset_mask(mask: Any, num_envs: int) -> npt.NDArray[np.bool_] | None:
    """``options["reset_mask"]``, checked with ``SyncVectorEnv``'s errors."""
    if mask is None:
        return None
    if not isinstance(mask, np.ndarray):
        raise TypeError(f"`options['reset_mask']` must be a numpy array, got {type(mask)}")
    if mask.shape != (num_envs,):
        raise ValueError(
            f"`options['reset_mask']` must have shape `({num_envs},)`, got {mask.shape}"
        )
    if mask.dtype != np.bool_:
        raise TypeError(f"`options['reset_mask']` must have `dtype=np.bool_`, got {mask.dtype}")
    if not np.any(mask):
        raise ValueError(
            "`options['reset_mask']` must contain a boolean array with at least one True "
            f"value, got reset_mask={mask}"
        )
    return mask


class _EnvView:
    """What ``call``/``get_attr`` reach for one env of the session (client-side facts)."""

    def __init__(self, owner: RemoteVectorEnv, index: int) -> None:
        self._owner = owner
        self._index = index
        self.extra: dict[str, Any] = {}

    def attr(self, name: str) -> Any:
        owner, session = self._owner, self._owner._session
        facts: dict[str, Callable[[], Any]] = {
            "spec": lambda: env_spec(session, ENTRY_POINT, render_mode=owner.render_mode),
            "metadata": lambda: render_metadata(session),
            "render_mode": lambda: owner.render_mode,
            "observation_space": lambda: owner.single_observation_space,
            "action_space": lambda: owner.single_action_space,
            "np_random_seed": lambda: owner.np_random_seed[self._index],
            "max_episode_steps": lambda: session.max_episode_steps,
            "render": lambda: self._render,
        }
        if name in facts:
            return facts[name]()
        if name in self.extra:
            return self.extra[name]
        raise AttributeError(
            f"a remote env has no attribute {name!r} here: the evaluator's env objects are "
            f"not reachable; call/get_attr reach {sorted(facts)} and what set_attr stored"
        )

    def _render(self) -> Obs | None:
        if self._owner.render_mode is None:
            return None
        frame: Obs = self._owner._session.render()[self._index]
        return frame
