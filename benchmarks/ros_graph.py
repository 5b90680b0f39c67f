"""What a ROS launch graph costs per episode: its start, its messages at 125 Hz, its teardown.

Runs ``--episodes`` episodes of ``td3-hopper-ros-v1`` (``--steps`` control steps each, the
task's 1000 by default) as the ``ros`` kind runs them (``make ros-engine`` first): one
launch graph per episode, in its namespaces, with the shipped TD3 Hopper actor
(``examples/agents/checkpoints/td3-hopper-ros-v1``, or ``--checkpoint``), from this
process (the graph and its nodes start with the engine's interpreter, as in a worker).
For each episode:

* ``start_s``: ``roslaunch`` started -> the first control tick (roscore, rosout and the
  three nodes up and connected);
* ``latency_us`` p50 / p99 / max: observation published -> its command received by the sim
  (serialization, two TCP hops on the graph's loopback, the policy's MLP);
* ``held``, ``late``, ``missing``: steps that held an older command, commands past their
  tick, commands never received;
* ``teardown_s``: the kill -> no process of the graph left;
* ``episode_s``: all of it, as the worker spent it.

It also checks each recorded return against the episode its hold schedule implies,
computed without a graph. Prints a table and, last, one JSON line (the host's load before
and after, the versions, the rows). Timings on a shared machine are noisy: the load
averages are printed with them.

    python benchmarks/ros_graph.py                     # 10 episodes of 1000 steps
    python benchmarks/ros_graph.py --episodes 3 --steps 200 --json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINT = (
    ROOT / "examples" / "agents" / "checkpoints" / "td3-hopper-ros-v1" / "policy.safetensors"
)


def measure(episodes: int, steps: int, checkpoint: Path, quiet: bool) -> dict[str, Any]:
    from safetensors.numpy import load_file

    from ale_robotics.engines import get_engine, installed
    from ale_robotics.rollouts.ros.kind import graph_setup, run_graph_episode
    from ale_robotics.rollouts.ros.schedule import hold_runs, replay_episode
    from ale_robotics.tasks import default_registry

    task = default_registry().entry("td3-hopper-ros-v1").spec
    task = task.model_copy(update={"env": task.env.model_copy(update={"max_episode_steps": steps})})
    weights = load_file(str(checkpoint))
    setup = graph_setup()
    record = installed(get_engine("ros"))
    load_before = os.getloadavg()
    rows = []
    for i in range(episodes):
        seed = 1000 + i
        t0 = time.monotonic()
        episode = run_graph_episode(task, weights, i, seed, setup)
        total = time.monotonic() - t0
        rec = episode.record
        lat = np.asarray(rec.timing.latency_us)
        runs = hold_runs(rec.applied)
        again = replay_episode(task, weights, i, seed, runs)
        rows.append(
            {
                "episode": i,
                "steps": rec.length,
                "return": rec.episode_return,
                "return_matches_schedule": (again.ret, again.length)
                == (rec.episode_return, rec.length),
                "start_s": round(episode.start_s, 3),
                "latency_p50_us": round(float(np.percentile(lat, 50)), 1) if lat.size else None,
                "latency_p99_us": round(float(np.percentile(lat, 99)), 1) if lat.size else None,
                "latency_max_us": round(float(lat.max()), 1) if lat.size else None,
                "held": sum(c for _, c, _ in runs),
                "late": rec.timing.late,
                "missing": rec.length - rec.timing.received,
                "max_tick_lag_us": round(rec.timing.max_tick_lag_us, 1),
                "teardown_s": round(episode.teardown_s, 4),
                "episode_s": round(total, 3),
            }
        )
        if not quiet:
            print(_line(rows[-1]), flush=True)
    return {
        "host": {
            "cpus": os.cpu_count(),
            "machine": platform.machine(),
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
        },
        "versions": {}
        if record is None
        else {
            **{k: record.versions[k] for k in ("mujoco", "gymnasium", "numpy")},
            **record.system_versions,
        },
        "steps": steps,
        "rows": rows,
        "median": {
            k: float(np.median([r[k] for r in rows if r[k] is not None]))
            for k in ("start_s", "latency_p50_us", "latency_p99_us", "teardown_s", "episode_s")
            if any(r[k] is not None for r in rows)
        },
    }


def _line(r: dict[str, Any]) -> str:
    return (
        f"episode {r['episode']}: {r['steps']} steps, start {r['start_s']:.2f} s, latency "
        f"p50 {r['latency_p50_us']} us p99 {r['latency_p99_us']} us, held {r['held']} "
        f"(late {r['late']}, missing {r['missing']}), teardown {r['teardown_s'] * 1000:.0f} ms, "
        f"{r['episode_s']:.1f} s in all; return {r['return']:.1f}"
        f"{'' if r['return_matches_schedule'] else ' (DIFFERS from its schedule)'}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--checkpoint", type=Path, default=CHECKPOINT)
    parser.add_argument("--json", action="store_true", help="only the JSON line")
    args = parser.parse_args(argv)
    out = measure(args.episodes, args.steps, args.checkpoint, args.json)
    if not args.json:
        print("median:", ", ".join(f"{k} {v:.4g}" for k, v in out["median"].items()))
        print(f"load: {out['host']['load_before']} before, {out['host']['load_after']} after")
    print(json.dumps(out))
    return 0 if all(r["return_matches_schedule"] for r in out["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
