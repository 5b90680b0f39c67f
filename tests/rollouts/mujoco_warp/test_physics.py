"""The Warp worlds themselves, in the engine's interpreter: the captured graph is the steps.

Run as a script by the ``mujoco-warp`` engine's Python (``ale_robotics`` through the
overlay, as its workers see it): a control step replayed from the graph captured once
(:class:`~ale_robotics.rollouts.mujoco_warp.physics.WarpWorlds`) leaves every world's
state equal to the bit to the same steps launched one by one, through contacts.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from engine_support import need_engine

from ale_robotics.engines import build_dir, get_engine
from ale_robotics.engines.overlay import with_overlay

SCRIPT = """
import json, sys
import numpy as np
import gymnasium as gym
from ale_robotics.rollouts.mujoco_warp.physics import WarpWorlds

env = gym.make(sys.argv[1]).unwrapped
n, steps = 4, 15
rng = np.random.default_rng(0)
qpos = env.init_qpos + rng.uniform(-0.1, 0.1, (n, env.model.nq))
qvel = env.init_qvel + rng.uniform(-0.1, 0.1, (n, env.model.nv))
acts = rng.uniform(-1, 1, (steps, n, env.model.nu)).astype(np.float32)
replayed, launched = WarpWorlds(env, n, "cpu"), WarpWorlds(env, n, "cpu")
replayed.reset(qpos, qvel)
launched.reset(qpos, qvel)
rows = np.arange(n)
for a in acts:
    replayed.step(rows, a)
    launched.data.ctrl.assign(a)
    launched.launch_substeps()
out = {f: float(np.abs(replayed.read(f) - launched.read(f)).max()) for f in ("qpos", "qvel")}
out["time"] = float(replayed.read("time").max())
print(json.dumps(out))
"""


@pytest.mark.parametrize("gym_id", ["InvertedPendulum-v5", "Hopper-v5"])
def test_the_captured_graph_steps_exactly_as_the_launches(gym_id: str) -> None:
    record = need_engine("mujoco-warp")
    env = {
        **os.environ,
        **get_engine("mujoco-warp").worker_env(build_dir(get_engine("mujoco-warp"))),
    }
    done = subprocess.run(
        [record.python, "-I", "-c", with_overlay(SCRIPT), gym_id],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["qpos"] == 0.0 and out["qvel"] == 0.0, out
    assert out["time"] > 0.01  # the worlds moved
