"""The ``isaaclab`` engine: Isaac Lab 3.0.0 kit-less (Newton + MuJoCo Warp) and RSL-RL.

Isaac Lab 3 requires Python 3.12 and torch 2.11; the project runs 3.11 with torch 2.13, so
the kind's shards run here. ``constraints/engine-isaaclab.txt`` pins a *lean* environment:
what ``Isaac-Cartpole-Direct`` and RSL-RL's runner import, measured by running both, and
nothing of the 120-odd other distributions ``pip install isaaclab`` brings (open3d,
transformers, Isaac Sim's client...): those are :attr:`IsaacLabEngine.omitted_requirements`,
which the build's ``pip check`` allows missing. Built from nothing on this 2-core host in
about 2 minutes and 4.9 GB (the full ``isaaclab`` install: 13 minutes, 7.8 GB): most of it
torch 2.11 and the CUDA libraries PyPI's torch cannot import without, so the engine also
runs on a CUDA device where there is one.

The install's warm-up builds the env once and steps it (Warp compiles its kernels, about
1.5 minutes here, into the build's ``cache/warp``, ``WARP_CACHE_PATH`` of the workers).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from ale_robotics.engines.base import Engine

__all__ = ["IsaacLabEngine"]

_WARM_UP = """
from importlib import resources

from ale_robotics.rollouts.isaaclab.kind import TEMPLATE_TASK
from ale_robotics.rollouts.isaaclab.rollout import (
    make_env, network_attempts, rollout_envs,
)
from ale_robotics.tasks.spec import TaskSpec
import torch

# The bundled task's env on the device the workers will use, a few steps of zero actions:
# compiles (and caches) Warp's kernels. (The task registry is not loaded: it checks every
# kind's tasks, and the engine holds only this kind's needs.)
config = resources.files("ale_robotics.tasks") / "configs" / f"{TEMPLATE_TASK}.json"
task = TaskSpec.model_validate_json(config.read_bytes())
device = "cuda:0" if torch.cuda.is_available() else "cpu"
env = make_env(task.env.kwargs["task"], task.eval.envs_per_shard, device)
short = task.env.model_copy(update={"max_episode_steps": int(env.max_episode_length)})
zero = lambda obs: torch.zeros((obs.shape[0], 1), device=obs.device)
out = rollout_envs(env, task.model_copy(update={"env": short}), zero, [(0, 1), (1, 2)])
assert not network_attempts(), network_attempts()
print("warmed up", task.env.kwargs["task"], "on", device, [round(o.ret, 3) for o in out])
"""

_PROBE = """
import torch
print("cuda:0" if torch.cuda.is_available() else "cpu")
"""

_OMITTED = """
alphashape botocore coacd daqp einops fast-simplification h5py hf-xet hidapi imgui-bundle
matplotlib meshio numba omniverseclient onnx open3d pillow pin pin-pink psutil pycollada
pyglet pyopengl-accelerate requests resolve-robotics-uri-py scipy starlette torchvision
transformers trimesh urllib3
onnxscript
grpcio markdown tensorboard-data-server werkzeug
triton
"""


class IsaacLabEngine(Engine):
    """Isaac Lab 3.0.0 kit-less with RSL-RL 5.5.1 on Python 3.12 (see the module docstring)."""

    name = "isaaclab"
    python = "3.12"
    constraints = "engine-isaaclab.txt"
    modules: ClassVar[tuple[str, ...]] = (
        "isaaclab",
        "isaaclab_tasks",
        "isaaclab_newton",
        "isaaclab_rl.rsl_rl",
        "rsl_rl.runners",
        "newton",
        "mujoco_warp",
        "warp",
        "torch",
    )
    reported: ClassVar[tuple[str, ...]] = (
        "isaaclab",
        "newton",
        "mujoco-warp",
        "warp-lang",
        "torch",
        "rsl-rl-lib",
    )
    summary = "Isaac Lab 3.0 kit-less (Newton + MuJoCo Warp) and RSL-RL: the isaaclab kind"
    warm_up = _WARM_UP
    device_probe = _PROBE
    agent_trains_with = True
    omitted_requirements: ClassVar[frozenset[str]] = frozenset(_OMITTED.split())
    """Isaac Lab's declared requirements that kit-less env stepping and RSL-RL training never
    import (its extras: mesh tools, Isaac Sim's client, teleoperation, visualizers), RSL-RL's
    ONNX export, tensorboard's server side, and triton (torch's compiler back end)."""

    def worker_env(self, home: Path) -> dict[str, str]:
        """Warp's kernel cache in the build; Isaac Lab's assets from the package."""
        from ale_robotics.rollouts.isaaclab.offline import ASSETS

        return {"WARP_CACHE_PATH": str(home / "cache" / "warp"), "ISAACSIM_ASSET_ROOT": str(ASSETS)}
