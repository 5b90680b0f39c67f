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

import importlib.util
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ale_robotics.tasks.spec import EnvSpec

__all__ = ["make_env"]

# An evaluator answers its first GetSpec and OpenSession calls on several threads at once:
# one of them imports MuJoCo with the variable set, the others wait for it.
_IMPORT_LOCK = threading.Lock()


def _import_mujoco_without_a_probe() -> None:
    """Import MuJoCo (as the first MuJoCo env will) with glfw pointed at its bundled library.

    MuJoCo imports glfw, which on Linux finds its library by starting a child Python per
    candidate file to read its version. That child is in the caller's process group: a
    Ctrl-C meant for ``ale-robotics run`` reaches it too and it prints a
    ``KeyboardInterrupt`` traceback on the run's stderr. With ``PYGLFW_LIBRARY`` set glfw
    loads that file directly, starting nothing; the variable is set for the import only
    (glfw reads it then), so no agent or worker inherits it. Nothing renders through glfw
    here: frames come from EGL or OSMesa (``evaluator.sessions.rendering``).
    """
    if "mujoco" in sys.modules:
        return
    with _IMPORT_LOCK:
        _import_under_lock()


def _import_under_lock() -> None:
    if "mujoco" in sys.modules or "PYGLFW_LIBRARY" in os.environ:
        return
    spec = importlib.util.find_spec("glfw")
    if spec is None or not spec.submodule_search_locations:
        return
    package = Path(next(iter(spec.submodule_search_locations)))
    bundled = [package / "x11" / "libglfw.so", package / "libglfw.so"]
    library = next((str(p) for p in bundled if p.is_file()), None)
    if library is None:
        return
    os.environ["PYGLFW_LIBRARY"] = library
    try:
        import mujoco  # noqa: F401  # imported here for the environment above
    except ImportError:  # a task without MuJoCo; its env's own import says what is missing
        pass
    finally:
        del os.environ["PYGLFW_LIBRARY"]


def make_env(env: EnvSpec, *, time_limit: bool = True, render_mode: str | None = None) -> Any:
    """A fresh env of ``env`` (a task's ``env`` section).

    ``time_limit``: wrap in Gymnasium's TimeLimit at ``env.max_episode_steps`` (the
    task's protocol); False gives the id's own registration limit, for callers that
    only read spaces or the model. ``render_mode``: Gymnasium's, None for none.
    """
    import gymnasium as gym

    _import_mujoco_without_a_probe()
    extra: dict[str, Any] = {}
    if time_limit:
        extra["max_episode_steps"] = env.max_episode_steps
    if render_mode is not None:
        extra["render_mode"] = render_mode
    return gym.make(env.gym_id, disable_env_checker=True, **env.kwargs, **extra)
