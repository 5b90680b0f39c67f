"""The ``mujoco-warp`` engine: MuJoCo Warp 4.0 and the MuJoCo it needs, beside the project's 3.3.

``constraints/engine-mujoco-warp.txt`` pins the environment: mujoco-warp, warp-lang and
mujoco 4.0 with Gymnasium (the env models and their constants) and what the worker side of
``ale_robotics`` imports (numpy, pydantic, safetensors, threadpoolctl), at the project's
versions wherever the project pins them (numpy: the policy's matmuls are the same code on
both sides). Python 3.11, the evaluator's own version.

Warp compiles its kernels on first use (on this 2-core host 1-2.5 minutes a model, on
the CPU device) and caches them in ``WARP_CACHE_PATH``, which is the build's ``cache/warp``
here, so the install's warm-up compiles them once for every family's model and no job
pays for it again.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from ale_robotics.engines.base import Engine

__all__ = ["MujocoWarpEngine"]

_WARM_UP = """
from importlib import resources

import numpy as np

from ale_robotics.envs.make import make_env
from ale_robotics.rollouts.mujoco_warp.kind import FAMILY_GYM_IDS, TEMPLATE_TASK
from ale_robotics.rollouts.mujoco_warp.physics import pick_device
from ale_robotics.rollouts.mujoco_warp.rollout import rollout_worlds
from ale_robotics.tasks.spec import TaskSpec

# Every family the kind steps, a two-step episode on the device the workers will use:
# compiles (and caches) the kernels a shard of its model launches. (The task registry is
# not loaded: it checks every kind's tasks, and the engine holds only this kind's needs.)
config = resources.files("ale_robotics.tasks") / "configs" / f"{TEMPLATE_TASK}.json"
template = TaskSpec.model_validate_json(config.read_bytes())
for gym_id in sorted(FAMILY_GYM_IDS):
    env_spec = template.env.model_copy(update={"gym_id": gym_id, "max_episode_steps": 2})
    task = template.model_copy(update={"env": env_spec})
    env = make_env(env_spec, time_limit=False).unwrapped
    zero = lambda obs: np.zeros((len(obs), env.action_space.shape[0]), dtype=np.float32)
    rollout_worlds(env, task, zero, [(0, 1)])
    print("warmed up", gym_id, "on", pick_device(), flush=True)
"""

_PROBE = """
import warp as wp
wp.config.log_level = wp.LOG_WARNING
print("cuda:0" if wp.get_cuda_device_count() > 0 else "cpu")
"""


class MujocoWarpEngine(Engine):
    """MuJoCo Warp 4.0.0 on Python 3.11 (see the module docstring)."""

    name = "mujoco-warp"
    python = "3.11"
    constraints = "engine-mujoco-warp.txt"
    modules: ClassVar[tuple[str, ...]] = ("mujoco_warp", "warp", "mujoco", "gymnasium", "numpy")
    reported: ClassVar[tuple[str, ...]] = ("mujoco-warp", "warp-lang", "mujoco", "gymnasium")
    summary = "MuJoCo Warp 4.0 (mujoco 4.0): the mujoco_warp kind, CUDA or CPU"
    warm_up = _WARM_UP
    device_probe = _PROBE

    def worker_env(self, home: Path) -> dict[str, str]:
        """Warp's kernel cache in the build, and no OpenGL (workers never render)."""
        return {"WARP_CACHE_PATH": str(home / "cache" / "warp"), "MUJOCO_GL": "disable"}
