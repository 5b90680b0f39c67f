"""Frames of a session's envs, rendered by the evaluator (Gymnasium's ``rgb_array`` mode).

A session opened with ``render_mode="rgb_array"`` builds its envs with that mode
and answers Render with every env's current frame, so that ``RecordVideo`` and
friends work on a remote env as on a local one, and rendering costs nothing
until someone asks for a frame.

Off-screen OpenGL has two constraints that shape this module:

* a headless host needs MuJoCo's EGL backend: unless the operator chose one
  (``MUJOCO_GL``) or a display exists, :func:`prepare_headless_gl` picks EGL;
* an OpenGL context is current in one thread at a time, and Gymnasium's MuJoCo
  viewer makes its context current only when it creates it. So every frame is
  rendered, and every rendering env closed, on one thread of its own, which
  makes the env's context current before each frame.

A task offers ``rgb_array`` where its env class declares it; a host that cannot
render (no EGL) answers FAILED_PRECONDITION naming the cause at the first
frame, and offers no render modes from then on.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt

from ale_robotics.errors import FailedPreconditionError
from ale_robotics.tasks.spec import TaskSpec

__all__ = ["RENDER_MODES", "close_envs", "offered_modes", "prepare_headless_gl", "render_fps"]

log = logging.getLogger(__name__)

RENDER_MODES = ("rgb_array",)
"""What a session may render: frames as arrays (never "human": there is no screen)."""

_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None
_broken: dict[str, str] = {}  # task id -> why its frames cannot be rendered here


def prepare_headless_gl() -> None:
    """Choose MuJoCo's EGL backend on a host without a display, unless one was chosen."""
    if "MUJOCO_GL" in os.environ or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return
    os.environ["MUJOCO_GL"] = "egl"
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")


def _declared(task: TaskSpec) -> list[str]:
    """The render modes the task's env class declares (read without building an env)."""
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    env_id = task.env.gym_id
    if ":" in env_id:  # "module:Id" (gym.make imports the module; gym.spec does not)
        module, env_id = env_id.split(":", 1)
        importlib.import_module(module)
    spec = gym.spec(env_id)
    creator: Any = spec.entry_point
    if isinstance(creator, str):
        creator = load_env_creator(creator)
    metadata = getattr(creator, "metadata", None)
    if not isinstance(metadata, dict):
        return []
    return list(metadata.get("render_modes") or [])


def offered_modes(task: TaskSpec) -> list[str]:
    """The render modes the task offers on this evaluator (empty where it cannot render)."""
    if task.id in _broken:
        return []
    try:
        declared = _declared(task)
    except Exception as exc:  # an env that cannot even be looked up offers nothing
        log.info("task %s: no render modes (%s)", task.id, exc)
        return []
    return [m for m in RENDER_MODES if m in declared]


def render_fps(env: Any) -> int:
    """An env's ``metadata["render_fps"]`` (MuJoCo envs set it per instance; 0 for none)."""
    metadata = getattr(env.unwrapped, "metadata", None) or {}
    return int(metadata.get("render_fps") or 0)


def _thread() -> ThreadPoolExecutor:
    global _executor
    with _lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ale-render")
        return _executor


def _frame(env: Any) -> npt.NDArray[np.uint8]:
    viewer = getattr(getattr(env.unwrapped, "mujoco_renderer", None), "viewer", None)
    if viewer is not None:
        viewer.make_context_current()  # another env's context may be current
    frame = env.render()
    return np.ascontiguousarray(frame, dtype=np.uint8)


def render(task: TaskSpec, envs: Sequence[Any]) -> npt.NDArray[np.uint8]:
    """Every env's current frame, ``[num_envs, height, width, 3]`` uint8."""
    if task.id in _broken:
        raise FailedPreconditionError(_broken[task.id])

    def frames() -> npt.NDArray[np.uint8]:
        return np.stack([_frame(env) for env in envs])

    try:
        return _thread().submit(frames).result()
    except Exception as exc:  # the host's OpenGL, not the agent: said once, then not offered
        why = (
            f"task {task.id} cannot render on this evaluator ({type(exc).__name__}: {exc}); "
            "it offers no render modes here: open sessions without render_mode"
        )
        log.warning("%s", why)
        _broken[task.id] = why
        raise FailedPreconditionError(why) from None


def close_envs(envs: Sequence[Any]) -> None:
    """Close rendering envs on the render thread, where their OpenGL contexts live."""

    def close() -> None:
        for env in envs:
            env.close()

    _thread().submit(close).result()
