"""EnvPool's side of ``benchmarks/vs_envpool.py``: a worker run with ``.venv-peers/bin/python``.

EnvPool lives in a venv of its own (``make bench-peers``), so the driver (the project's
venv) starts this script as its child and drives it over stdin/stdout, one JSON object a
line each way. The driver measures this process's CPU from ``/proc``; here only wall time
and counts are taken. Commands (``cmd``):

* ``setup``: build the pool (``task``, ``mode`` "async"/"sync", ``num_envs``, ``batch_size``,
  ``threads``, ``seed``) and, for async, the numpy MLP of ``policy`` (an .npz written by the
  driver: ``w0, b0, w1, ...`` in x @ w + b layout, ``hidden`` "relu"/"tanh", ``out_tanh``,
  ``high``), the same math as ``ale_robotics.rollouts.mlp.MLPPolicy``; warm it up;
* ``run``: step for ``seconds`` (async: recv, policy, send; sync: step pre-drawn random
  actions); reply ``steps`` (env transitions, EnvPool's reset transitions not counted),
  ``episodes`` (ended), ``wall``;
* ``act``: the policy on the observations of an .npz (``obs``), actions written back
  (``out``): the driver checks that both sides run the same policy;
* ``policy``: CPU µs per row of the policy on batches of ``rows``;
* ``physics``: :func:`physics.physics_us_per_step` on EnvPool's bundled MuJoCo;
* ``quit``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import envpool
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from physics import physics_us_per_step

ASSETS = Path(envpool.__file__).resolve().parent.parent / "envpool_assets/mujoco/assets_gym"
LIB = str(Path(envpool.__file__).resolve().parent / "mujoco/mujoco_gym_envpool.so")


class Policy:
    """The contract's MLP, numpy float32, as ``MLPPolicy`` computes it."""

    def __init__(self, path: str) -> None:
        z = np.load(path)
        n = sum(1 for k in z.files if k.startswith("w"))
        self.layers = [
            (z[f"w{i}"].astype(np.float32), z[f"b{i}"].astype(np.float32)) for i in range(n)
        ]
        self.tanh_hidden = str(z["hidden"]) == "tanh"
        self.out_tanh = bool(z["out_tanh"])
        self.high = z["high"].astype(np.float32)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        x = np.asarray(obs, dtype=np.float32)
        last = len(self.layers) - 1
        for i, (w, b) in enumerate(self.layers):
            x = x @ w
            x += b
            if i < last:
                x = np.tanh(x) if self.tanh_hidden else np.maximum(x, 0.0, out=x)
        if self.out_tanh:
            np.tanh(x, out=x)
        x *= self.high
        return x


class Side:
    def __init__(self) -> None:
        self.env: Any = None
        self.policy: Policy | None = None
        self.mode = ""

    def setup(self, req: dict[str, Any]) -> dict[str, Any]:
        self.mode = req["mode"]
        self.own_xml = self.xml(req["task"])
        sync = self.mode == "sync"
        self.env = envpool.make_gymnasium(
            req["task"],
            num_envs=req["num_envs"],
            batch_size=req["num_envs"] if sync else req["batch_size"],
            num_threads=req["threads"],
            seed=req["seed"],
        )
        space = self.env.action_space
        rng = np.random.default_rng(0)
        shape = (256, req["num_envs"], *space.shape)
        self.actions = rng.uniform(space.low, space.high, shape).astype(space.dtype)
        if req.get("policy"):
            self.policy = Policy(req["policy"])
        if sync:
            self.env.reset()
        else:
            self.env.async_reset()
        self.run({"seconds": 0.2})  # warm-up
        return {
            "obs_dim": int(self.env.observation_space.shape[0]),
            "act_dim": int(space.shape[0]),
            "envpool": envpool.__version__,
            "numpy": np.__version__,
            "xml": self.own_xml,
        }

    @staticmethod
    def xml(task: str) -> str:
        name = {
            "HalfCheetah": "half_cheetah",
            "Walker2d": "walker2d_v5" if task.endswith("v5") else "walker2d",
            "InvertedPendulum": "inverted_pendulum",
            "InvertedDoublePendulum": "inverted_double_pendulum",
            "Hopper": "hopper",
        }[task.split("-")[0]]
        return str(ASSETS / f"{name}_envpool.xml")

    def run(self, req: dict[str, Any]) -> dict[str, Any]:
        env, seconds = self.env, req["seconds"]
        steps = episodes = i = 0
        t0 = time.perf_counter()
        while True:
            for _ in range(10):
                if self.mode == "sync":
                    _, _, term, trunc, info = env.step(self.actions[i % len(self.actions)])
                    i += 1
                else:
                    obs, _, term, trunc, info = env.recv()
                    assert self.policy is not None
                    env.send(self.policy(obs), info["env_id"])
                    # elapsed_step 0: EnvPool's auto-reset transition, not an env step (sync
                    # counts every transition, as a vector env's user and the other sides do)
                    steps -= int(np.count_nonzero(info["elapsed_step"] == 0))
                steps += len(term)
                episodes += int(np.count_nonzero(term | trunc))
            wall = time.perf_counter() - t0
            if wall >= seconds:
                return {"steps": steps, "episodes": episodes, "wall": wall}

    def act(self, req: dict[str, Any]) -> dict[str, Any]:
        assert self.policy is not None
        np.save(req["out"], self.policy(np.load(req["obs"])))
        return {}

    def policy_cost(self, req: dict[str, Any]) -> dict[str, Any]:
        assert self.policy is not None
        obs = np.random.default_rng(0).standard_normal((req["rows"], req["obs_dim"]))
        obs = obs.astype(np.float64)
        self.policy(obs)
        calls, t0 = 0, time.thread_time()
        while (cpu := time.thread_time() - t0) < req["seconds"]:
            self.policy(obs)
            calls += 1
        return {"us_per_row": cpu / (calls * req["rows"]) * 1e6}

    def physics(self, req: dict[str, Any]) -> dict[str, Any]:
        replay = dict(np.load(req["replay"]))
        args = (req["frame_skip"], replay, req["seconds"])
        own = physics_us_per_step(LIB, self.own_xml, *args)
        same = physics_us_per_step(LIB, req["xml"], *args)
        return {"own_xml": own, "same_xml": same}


def main() -> None:
    side = Side()
    handlers = {
        "setup": side.setup,
        "run": side.run,
        "act": side.act,
        "policy": side.policy_cost,
        "physics": side.physics,
    }
    for line in sys.stdin:
        req = json.loads(line)
        if req["cmd"] == "quit":
            break
        try:
            reply = {"ok": True, **handlers[req["cmd"]](req)}
        except Exception as exc:  # reported to the driver, which stops with it
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
