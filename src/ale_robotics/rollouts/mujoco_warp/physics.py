"""``n`` worlds of one MuJoCo model stepped by MuJoCo Warp: :class:`WarpWorlds`.

The model is the Gymnasium env's own ``MjModel`` (compiled by the engine's MuJoCo),
put on Warp's device once per model and process; the worlds' data is made per shard
size and kept (allocating it compiles nothing, but costs more than a short episode).
A reset state is written into a world as MuJoCo's ``mj_resetData`` leaves it (Warp's
``reset_data``) with the episode's ``qpos`` and ``qvel``, then ``forward`` derives the rest
(Reacher's and InvertedDoublePendulum's reset observations read it). A control step sets
every world's ``ctrl`` and replays ``frame_skip`` Warp steps captured once as a graph
(Warp captures on its CPU device too): a Warp step is some 350 kernel launches, and
launching them from Python cost about 0.6 ms each on this 2-core host, so replaying the
graph made a control step 10-60x faster (InvertedPendulum, Hopper; 10 worlds), with
states equal to the bit to those of the launches one by one (tested). Worlds whose episode
ended are stepped with a zero control and ignored, so a running world's physics never
depends on another's.

Warp computes in float32: a state read back is float64 of float32 values, which is why
results agree with the C kind's within a tolerance, not to the bit.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["WarpWorlds", "device_name", "pick_device"]

Array = npt.NDArray[np.float64]

_MODELS: dict[int, Any] = {}
"""Warp models by ``id`` of the host model (the kind keeps its envs for the process)."""


def _warp() -> Any:
    """Warp, told to be quiet before it initializes: no banner and no line per kernel module
    loaded (hundreds per model) on the worker's stdout, which is its parent's (an
    ``audit --json`` prints its document there); warnings and errors still reach stderr."""
    import warp as wp

    wp.config.log_level = wp.LOG_WARNING
    return wp


def pick_device() -> str:
    """``ALE_ENGINE_DEVICE`` (set by the evaluator from the engine's probe), else Warp's
    first CUDA device where there is one, else its CPU."""
    wp = _warp()
    chosen = os.environ.get("ALE_ENGINE_DEVICE")
    if chosen:
        return chosen
    return "cuda:0" if wp.get_cuda_device_count() > 0 else "cpu"


def device_name() -> str:
    """The device a worker here would use (what the engine's probe prints)."""
    return pick_device()


class WarpWorlds:
    """``n`` worlds of ``env``'s model on Warp's ``device``."""

    def __init__(self, env: Any, n: int, device: str) -> None:
        wp = _warp()
        import mujoco_warp as mjw

        self.wp, self.mjw, self.device = wp, mjw, device
        self.n = n
        self.frame_skip = int(env.frame_skip)
        host = env.model
        with wp.ScopedDevice(device):
            model = _MODELS.get(id(host))
            if model is None:
                model = _MODELS[id(host)] = mjw.put_model(host)
            self.model = model
            self.data = mjw.make_data(host, nworld=n)
            # Captured before any state is loaded: whether capturing also runs the steps
            # differs by device, and :meth:`reset` sets every world's state afterwards.
            with wp.ScopedCapture() as capture:
                self._substeps()
            self.graph = capture.graph
        self.nu = int(host.nu)
        self.ctrl = np.zeros((n, self.nu), dtype=np.float32)

    def reset(self, qpos: Array, qvel: Array) -> None:
        """Every world from a reset state: ``qpos[i]``, ``qvel[i]`` for world ``i``."""
        wp, mjw, d = self.wp, self.mjw, self.data
        with wp.ScopedDevice(self.device):
            mjw.reset_data(self.model, d)
            d.qpos.assign(np.ascontiguousarray(qpos, dtype=np.float32))
            d.qvel.assign(np.ascontiguousarray(qvel, dtype=np.float32))
            mjw.forward(self.model, d)

    def step(self, rows: npt.NDArray[np.int64], action: npt.NDArray[np.float32]) -> None:
        """One control step: world ``rows[j]`` gets ``action[j]``, every other world 0."""
        wp = self.wp
        self.ctrl[:] = 0.0
        self.ctrl[rows] = action
        with wp.ScopedDevice(self.device):
            self.data.ctrl.assign(self.ctrl)
            wp.capture_launch(self.graph)
            wp.synchronize_device(self.device)

    def launch_substeps(self) -> None:
        """The control step's Warp steps launched one by one (what the graph replays)."""
        with self.wp.ScopedDevice(self.device):
            self._substeps()
            self.wp.synchronize_device(self.device)

    def _substeps(self) -> None:
        for _ in range(self.frame_skip):
            self.mjw.step(self.model, self.data)

    def read(self, name: str) -> npt.NDArray[np.float64]:
        """The worlds' ``name`` (``qpos``, ``xpos``...) as float64, world-major."""
        out: npt.NDArray[np.float64] = getattr(self.data, name).numpy().astype(np.float64)
        return out
