"""Isaac Lab 3's direct cartpole, kit-less on Newton + MuJoCo Warp, offline: create, step, measure.

Run it with an Isaac Lab 3.0.0 interpreter (Python 3.12; not the project's environment):

    python3.12 -m venv /tmp/isaaclab && /tmp/isaaclab/bin/pip install isaaclab==3.0.0
    /tmp/isaaclab/bin/python benchmarks/isaaclab_cartpole.py --envs 1,16,64 --json

For each N it starts a fresh process that builds ``Isaac-Cartpole-Direct`` (its default physics,
``newton_mjwarp``) with N envs on ``--device`` (default ``cpu``), resets it with ``--seed``
(Isaac Lab's own seeding), steps ``--steps`` control steps with zero actions and reports:
the seconds to create the env, env-steps/s, the peak resident set, the first envs' returns
(equal across runs with one seed: the seeding is exact) and every network connection tried.

No network: the USD assets Isaac Lab fetches from NVIDIA's asset server at run time come from
the ``isaaclab`` kind's ``src/ale_robotics/rollouts/isaaclab/assets`` (``ISAACSIM_ASSET_ROOT``),
authored for the project: a cartpole with Isaac Lab's joint names (``slider_to_cart``,
``cart_to_pole``; an 8 m rail, a 1 kg cart, a 1 m pole of 1 kg, sizes from Newton's cartpole
example: not NVIDIA's ``cartpole.usd``, which is not redistributed here, so its physics is
not that task's) and a collision plane. Every
``socket.connect`` and every name lookup of a host other than this one's is recorded and
refused; the run fails (exit 1) if anything tried.
Warp compiles its kernels on the first run (minutes on a CPU), cached in ``~/.cache/warp``
(``WARP_CACHE_PATH``) after that.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ASSETS = Path(__file__).resolve().parents[1] / "src/ale_robotics/rollouts/isaaclab/assets"
TASK = "Isaac-Cartpole-Direct"
TRIED: list[str] = []


def _guard_network() -> None:
    """Record and refuse every outgoing connection of this process."""

    def refuse(self: socket.socket, address: Any) -> None:
        TRIED.append(repr(address))
        raise OSError(f"network refused by isaaclab_cartpole.py: {address!r}")

    lookup = socket.getaddrinfo

    def resolve(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in (None, "localhost", "127.0.0.1", "::1"):
            TRIED.append(f"getaddrinfo({host!r})")
            raise OSError(f"network refused by isaaclab_cartpole.py: {host!r}")
        return lookup(host, *args, **kwargs)

    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.socket.connect_ex = refuse  # type: ignore[method-assign,assignment]
    socket.getaddrinfo = resolve


def _one(n: int, steps: int, device: str, seed: int) -> dict[str, Any]:
    os.environ["ISAACSIM_ASSET_ROOT"] = str(ASSETS)
    _guard_network()
    t0 = time.perf_counter()
    import gymnasium as gym
    import isaaclab_tasks  # noqa: F401  # registers the tasks
    import torch
    from isaaclab_tasks.utils import parse_env_cfg

    imported = time.perf_counter() - t0
    cfg = parse_env_cfg(TASK, device=device, num_envs=n)
    cfg.seed = seed
    env = gym.make(TASK, cfg=cfg)
    created = time.perf_counter() - t0 - imported
    env.reset(seed=seed)
    returns = torch.zeros(n)
    zeros = torch.zeros((n, 1), device=device)
    env.step(zeros)  # the step's own first-call costs, outside the timing
    t1 = time.perf_counter()
    for _ in range(steps):
        _, reward, _, _, _ = env.step(zeros)
        returns += reward.cpu()
    wall = time.perf_counter() - t1
    return {
        "n": n,
        "device": device,
        "import_s": round(imported, 1),
        "create_s": round(created, 1),
        "env_steps_per_s": round(n * steps / wall, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "returns": [round(float(r), 6) for r in returns[:4]],
        "network_tried": TRIED,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default="1,16,64", help="env counts, comma-separated")
    parser.add_argument("--steps", type=int, default=100, help="timed control steps")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=123)
    parser.add_argument("--json", action="store_true", help="print one JSON line last")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one is not None:
        print("ROW " + json.dumps(_one(args.one, args.steps, args.device, args.seed)), flush=True)
        return 0
    load = [os.getloadavg()[0]]
    rows = []
    for n in (int(x) for x in args.envs.split(",") if x):
        cmd = [sys.executable, __file__, "--one", str(n), "--steps", str(args.steps)]
        cmd += ["--device", args.device, "--seed", str(args.seed)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        found = [ln for ln in done.stdout.splitlines() if ln.startswith("ROW ")]
        if done.returncode != 0 or not found:
            tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
            rows.append({"n": n, "failed": " / ".join(tail)})
            continue
        rows.append(json.loads(found[-1][4:]))
    load.append(os.getloadavg()[0])
    print(f"{TASK}, kit-less (newton_mjwarp), {args.steps} steps of zero actions, seed {args.seed}")
    print(f"{'N':>5} {'create':>8} {'env-steps/s':>12} {'peak RSS':>9}  returns[:4]")
    for r in rows:
        if "failed" in r:
            print(f"{r['n']:>5}  failed: {r['failed']}")
            continue
        print(
            f"{r['n']:>5} {r['create_s']:>7.1f}s {r['env_steps_per_s']:>12.1f} "
            f"{r['peak_rss_mb']:>7}MB  {r['returns']}"
        )
    print(f"load average before {load[0]:.1f}, after {load[1]:.1f}")
    tried = [t for r in rows for t in r.get("network_tried", [])]
    if args.json:
        print(json.dumps({"task": TASK, "load": load, "rows": rows}))
    if tried:
        print(f"network connections tried: {tried}", file=sys.stderr)
        return 1
    return 0 if all("failed" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
