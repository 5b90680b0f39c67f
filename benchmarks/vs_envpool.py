"""Side by side with EnvPool: the evaluator's pipelines against EnvPool 1.2.5 in one run.

One process tree: this script (the project's venv) drives our side itself and starts
EnvPool's side as its child (``benchmarks/peers/envpool_side.py`` on ``.venv-peers``, made by
``make bench-peers``). Per workload and round the two sides run in alternated slices of
``--slice`` seconds (A B B A, then B A A B), so that drift and other load hit both; every
figure is a median over ``--rounds`` rounds (ratios: median of the per-round ratios, with
their min and max). Both sides run Gymnasium's v5 envs (EnvPool's own ``*-v5`` ports; the
observation and action sizes are checked equal) with ``OPENBLAS_NUM_THREADS=1``.

Workloads (``batch``: the same numpy MLP on both sides, the weights passed to EnvPool's side
as an .npz and its actions checked equal to ours on random observations):

* ``batch`` rows, HalfCheetah (fixed random weights: it never terminates), Walker2d
  (the standing controller), InvertedPendulum with the shipped TD3 checkpoint, and with
  random weights (PyTorch's default init: episodes of ~9 steps, so resets dominate) --
  policies as ``benchmarks/batch_eval.py`` builds them. Ours: the evaluator's native batch
  pipeline (``LocalExecutor``, ``--workers`` processes, jobs of ``--episodes`` episodes in
  shards of episodes / workers, as batch_eval.py drives it, warm); EnvPool: async mode,
  ``num_envs`` 64, ``batch_size`` 32, 2 threads, recv -> policy -> send.
* ``interactive`` rows, Hopper and InvertedDoublePendulum with pre-drawn random actions:
  ours is a batched 64-env ``RemoteVectorEnv`` on a practice session of an evaluator in its
  own process (a child of this one, as the harness runs it), twice: over gRPC
  (``StepStream``) and through the shared-memory data plane (``ale_robotics.dataplane``, the
  SDK's default when the agent shares the evaluator's host: the "shm" columns); EnvPool sync
  (64 envs, 2 threads); Gymnasium's ``SyncVectorEnv`` (64 envs) as a third column. Every
  side counts 64 transitions per step call. A fourth side, alternated with them, bounds
  ours from above (``FloorSide``, the "ceiling"): a bare gRPC stream echo between two
  processes with our Step's request and response sizes, spinning for our physics of a Step
  split perfectly over ``--threads`` threads, and nothing else. A pipeline with the agent in
  another process over gRPC cannot beat it; where it is below EnvPool, so is any such
  pipeline, whatever its Python, and its CPU above the spin is gRPC's own overhead per step.

Columns: steps/s per side (wall); CPU µs/step per side (utime+stime from ``/proc`` of the
side's whole process tree, threads and children included: ours is this process and its
workers, EnvPool's its child process); physics µs/step per side: MuJoCo's own cost of an env
step (``frame_skip`` ``mj_step`` calls, one thread, CPU time, ctypes call cost subtracted;
see ``benchmarks/peers/physics.py``) replaying recorded episodes of the same policy, ours on
MuJoCo 3.3 with Gymnasium's XML, EnvPool's on the MuJoCo bundled in its extension (3.6) with
its own XML (JSON ``physics_same_xml``: 3.6 on Gymnasium's XML, the engine difference alone);
policy µs/step (the MLP per row at each side's batch size); the pipeline's overhead, CPU
above physics + policy, per step and per episode.

Usage::

    make bench-peers                       # installs .venv-peers, then runs this
    python benchmarks/vs_envpool.py [--rounds 5] [--slice 2] [--only NAME] [--json]
    python benchmarks/vs_envpool.py --quick --json     # a smoke run (tenths of a second)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))

from physics import physics_us_per_step  # noqa: E402
from vs_envpool_sides import (  # noqa: E402
    FloorSide,
    GymSide,
    OurBatchSide,
    OurInteractiveSide,
    PeerSide,
    Side,
    record_replay,
)

PEERS_PYTHON = HERE.parent / ".venv-peers/bin/python"
WORKLOADS: dict[str, tuple[str, str, str]] = {
    # name -> (mode, task id, policy)
    "halfcheetah": ("batch", "td3-halfcheetah-vec-v1", "fixed"),
    "walker2d": ("batch", "td3-walker2d-repro-v3", "standing"),
    "pendulum-trained": ("batch", "td3-inverted-pendulum-v2", "checkpoint"),
    "pendulum-random": ("batch", "td3-inverted-pendulum-v2", "random"),
    "hopper": ("interactive", "td3-hopper-v1", "random actions"),
    "double-pendulum": ("interactive", "td3-inverted-double-pendulum-v1", "random actions"),
}


def alternate(sides: list[Side], rounds: int, slice_s: float) -> list[list[dict[str, float]]]:
    """Per round, per side: steps, episodes, wall, cpu; slices A B B A (B A A B next round)."""
    out: list[list[dict[str, float]]] = []
    for r in range(rounds):
        order = list(range(len(sides))) if r % 2 == 0 else list(range(len(sides)))[::-1]
        acc = [{"steps": 0.0, "episodes": 0.0, "wall": 0.0, "cpu": 0.0} for _ in sides]
        for j in order + order[::-1]:
            got = sides[j].slice(slice_s)
            for key in acc[j]:
                acc[j][key] += got[key]
        out.append(acc)
    return out


def _med(xs: list[float]) -> float:
    return float(statistics.median(xs))


def summarize(
    name: str, sides: list[Side], runs: list[list[dict[str, float]]], costs: dict[str, Any]
) -> dict[str, Any]:
    """The JSON row: rates, ratio and its range, CPU, physics, policy, overheads."""
    rate = [[r[j]["steps"] / r[j]["wall"] for r in runs] for j in range(len(sides))]
    cpu = [_med([r[j]["cpu"] / r[j]["steps"] * 1e6 for r in runs]) for j in range(len(sides))]
    seen = [
        sum(r[j]["steps"] for r in runs) / max(1.0, sum(r[j]["episodes"] for r in runs))
        for j in range(len(sides))
    ]
    ratios = [a / b for a, b in zip(rate[0], rate[1], strict=True)]
    row: dict[str, Any] = {
        "workload": name,
        "mode": WORKLOADS[name][0],
        "task": costs["task"],
        "policy": WORKLOADS[name][2],
        "ours": _med(rate[0]),
        "envpool": _med(rate[1]),
        "ratio": _med(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "ratio_per_round": ratios,
    }
    if len(sides) > 2:
        row["gymnasium"] = _med(rate[2])
        row["ours_vs_gymnasium"] = _med([a / b for a, b in zip(rate[0], rate[2], strict=True)])
    if len(sides) > 3:  # the interactive rows' ceiling (FloorSide)
        floor = sides[3]
        assert isinstance(floor, FloorSide)
        row["ceiling"] = _med(rate[3])
        ceiling = [a / b for a, b in zip(rate[3], rate[1], strict=True)]
        row["ceiling_ratio"] = _med(ceiling)
        row["ceiling_ratio_per_round"] = ceiling
        row["ceiling_work_us"] = floor.work_us
        # its CPU per step above the spin: gRPC's own cost, the least overhead a pipeline
        # with the agent in another process can have
        row["ceiling_overhead_us_per_step"] = cpu[3] - floor.work_us / floor.n
        row["ceiling_bytes"] = {"request": floor.request_bytes, "response": floor.response_bytes}
    if len(sides) > 4:  # the same session through the shared-memory data plane
        shm = [a / b for a, b in zip(rate[4], rate[1], strict=True)]
        row["ours_shm"] = _med(rate[4])
        row["ratio_shm"] = _med(shm)
        row["ratio_shm_min"] = min(shm)
        row["ratio_shm_max"] = max(shm)
        row["ratio_shm_per_round"] = shm
        row["shm_vs_grpc"] = _med([a / b for a, b in zip(rate[4], rate[0], strict=True)])
        row["cpu_us_per_step_shm"] = cpu[4]
        mine = costs["physics"]["ours"] + costs["policy"]["ours"]
        row["overhead_us_per_step_shm"] = cpu[4] - mine
    two = ("ours", "envpool")
    row["cpu_us_per_step"] = dict(zip(two, cpu[:2], strict=True))
    # per episode: the mean length of the recorded episodes (the same policy on the same env
    # for both sides); a slice of EnvPool's sees few of its 1000-step episodes end
    length = costs["episode_length"]
    row["episode_length"] = length
    row["steps_per_ended_episode"] = dict(zip(two, seen[:2], strict=True))
    row["physics_us_per_step"] = costs["physics"]
    row["physics_same_xml_us_per_step"] = costs["physics_same_xml"]
    row["policy_us_per_step"] = costs["policy"]
    over = {k: cpu[i] - costs["physics"][k] - costs["policy"][k] for i, k in enumerate(two)}
    row["overhead_us_per_step"] = over
    row["overhead_us_per_episode"] = {k: over[k] * length for k in two}
    # CPU per step, EnvPool's over ours; and with EnvPool's physics replaced by ours (the
    # same MuJoCo on both sides): the part of a lead that the engine version does not explain
    phys = costs["physics"]
    row["cpu_ratio"] = cpu[1] / cpu[0]
    row["cpu_ratio_same_mujoco"] = (cpu[1] - phys["envpool"] + phys["ours"]) / cpu[0]
    row["versions"] = costs["versions"]
    row["rounds"] = len(runs)
    return row


def measure(name: str, peer: PeerSide, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """One workload: both (three) sides set up, costs measured, slices alternated."""
    mode, task_id, policy = WORKLOADS[name]
    ours: Side
    sides: list[Side]
    if mode == "batch":
        ours = OurBatchSide(task_id, policy, args.episodes, args.workers)
        peer.setup_async(ours.gym_id, ours.write_policy(tmp / "policy.npz"), args.threads)
        ours.check_same_policy(peer, tmp)
        sides = [ours, peer]
    else:
        ours = OurInteractiveSide(task_id, args.num_envs)
        peer.setup_sync(ours.gym_id, args.num_envs, args.threads)
        sides = [ours, peer, GymSide(ours.task, args.num_envs)]
    try:
        ours.check_spaces(peer.spaces)
        costs = measure_costs(ours, peer, tmp, args)
        if mode == "interactive":
            work = costs["physics"]["ours"] * args.num_envs / args.threads
            sides.append(FloorSide(ours.task, args.num_envs, work))
            sides.append(OurInteractiveSide(task_id, args.num_envs, transport="shm"))
        runs = alternate(sides, args.rounds, args.slice)
    finally:
        for side in sides:
            if side is not peer:
                side.close()
    return summarize(name, sides, runs, costs)


def measure_costs(ours: Any, peer: PeerSide, tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Physics per step on each MuJoCo (the same recorded episodes; ours before and after
    EnvPool's, averaged, against drift) and policy per row."""
    replay, xml, frame_skip = record_replay(ours, args.replay_steps)
    path = tmp / "replay.npz"
    np.savez(path, **replay)
    before = physics_us_per_step(ours.mujoco_lib, xml, frame_skip, replay, args.physics_s)
    theirs = peer.request(
        "physics", replay=str(path), xml=xml, frame_skip=frame_skip, seconds=args.physics_s
    )
    mine = physics_us_per_step(ours.mujoco_lib, xml, frame_skip, replay, args.physics_s)
    mine["us_per_step"] = (mine["us_per_step"] + before["us_per_step"]) / 2
    own, same = theirs["own_xml"], theirs["same_xml"]
    return {
        "task": ours.task.id,
        "episode_length": float(np.mean(replay["lengths"])),
        "physics": {"ours": mine["us_per_step"], "envpool": own["us_per_step"]},
        "physics_same_xml": {"ours": mine["us_per_step"], "envpool": same["us_per_step"]},
        "policy": ours.policy_costs(peer),
        "versions": {
            "ours": {"env": ours.gym_id, "mujoco": mine["mujoco"], "xml": Path(xml).name},
            "envpool": {
                "env": ours.gym_id,
                "envpool": peer.spaces["envpool"],
                "mujoco": own["mujoco"],
                "xml": Path(own["xml"]).name,
            },
        },
    }


COST_KEYS = ("cpu_us_per_step", "physics_us_per_step", "policy_us_per_step", "overhead_us_per_step")


def print_tables(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """Two tables, each within 80 columns: rates, then CPU costs per step."""
    head = (
        f"vs EnvPool: {os.cpu_count()} CPUs, {args.rounds} round(s) of alternated "
        f"{args.slice:g} s slices (A B B A), medians; batch: ours {args.workers} workers x "
        f"{args.episodes} episodes/job, EnvPool async 64 envs/batch 32/{args.threads} threads; "
        f"interactive: {args.num_envs} envs, EnvPool sync {args.threads} threads"
    )
    print(textwrap.fill(head, 80))
    print(
        f"{'workload':<17}{'mode':<6}{'ours/s':>10}{'envpool/s':>10}{'ratio':>7}  "
        f"{'min-max':<11}{'gym/s':>9}"
    )
    for r in rows:
        gym = f"{r['gymnasium']:9,.0f}" if "gymnasium" in r else f"{'-':>9}"
        print(
            f"{r['workload']:<17}{r['mode'][:5]:<6}{r['ours']:10,.0f}{r['envpool']:10,.0f}"
            f"{r['ratio']:7.2f}  {r['ratio_min']:.2f}-{r['ratio_max']:<6.2f}{gym}"
        )
    ceiled = [r for r in rows if "ceiling" in r]
    if ceiled:
        print()
        note = (
            "Ceiling of the interactive rows: a bare gRPC stream echo between two processes, "
            "our Step's bytes each way, around our physics split perfectly over "
            f"{args.threads} threads, no other work (FloorSide); ours cannot be faster:"
        )
        print(textwrap.fill(note, 80))
        print(
            f"{'workload':<17}{'ceiling/s':>10}{'/ envpool':>10}{'work µs':>9}"
            f"{'bytes in/out':>14}{'ovh µs':>8}"
        )
        for r in ceiled:
            b = r["ceiling_bytes"]
            print(
                f"{r['workload']:<17}{r['ceiling']:10,.0f}{r['ceiling_ratio']:10.2f}"
                f"{r['ceiling_work_us']:9.0f}{b['request']:>7}/{b['response']:<6}"
                f"{r['ceiling_overhead_us_per_step']:>8.1f}"
            )
        print("(ovh: the echo's CPU per env step above its spin: gRPC's own overhead)")
    shm_rows = [r for r in rows if "ours_shm" in r]
    if shm_rows:
        print()
        note = (
            "Interactive rows through the shared-memory data plane (the same session, "
            "the SDK's default on the evaluator's host), alternated with the others:"
        )
        print(textwrap.fill(note, 80))
        print(
            f"{'workload':<17}{'shm/s':>10}{'/ envpool':>10}  {'min-max':<11}"
            f"{'/ gRPC':>7}{'CPU µs':>8}{'ovh µs':>8}"
        )
        for r in shm_rows:
            print(
                f"{r['workload']:<17}{r['ours_shm']:10,.0f}{r['ratio_shm']:10.2f}  "
                f"{r['ratio_shm_min']:.2f}-{r['ratio_shm_max']:<6.2f}{r['shm_vs_grpc']:7.2f}"
                f"{r['cpu_us_per_step_shm']:8.1f}{r['overhead_us_per_step_shm']:8.1f}"
            )
    print("\nCPU µs per env step, ours / EnvPool (overhead = CPU - physics - policy)")
    print(
        f"{'workload':<17}{'CPU':>12}{'physics':>12}{'policy':>11}{'overhead':>12}"
        f"{'ovh/episode':>15}"
    )
    for r in rows:
        pair = [f"{r[k]['ours']:.1f}/{r[k]['envpool']:.1f}" for k in COST_KEYS]
        ep = r["overhead_us_per_episode"]
        print(
            f"{r['workload']:<17}{pair[0]:>12}{pair[1]:>12}{pair[2]:>11}{pair[3]:>12}"
            f"{ep['ours']:>8.0f}/{ep['envpool']:<6.0f}"
        )
    print("\nCPU per step, EnvPool / ours: as measured, and with EnvPool's physics replaced")
    print("by ours (same MuJoCo); physics EnvPool / ours: own XMLs, and both on Gymnasium's")
    print(f"{'workload':<17}{'CPU':>10}{'same MuJoCo':>13}{'physics':>10}{'same XML':>10}")
    for r in rows:
        p, q = r["physics_us_per_step"], r["physics_same_xml_us_per_step"]
        print(
            f"{r['workload']:<17}{r['cpu_ratio']:10.2f}{r['cpu_ratio_same_mujoco']:13.2f}"
            f"{p['envpool'] / p['ours']:10.2f}{q['envpool'] / q['ours']:10.2f}"
        )
    if rows:
        v = rows[0]["versions"]
        note = (
            f"physics: ours MuJoCo {v['ours']['mujoco']} on Gymnasium's XML, EnvPool "
            f"{v['envpool']['envpool']} on its bundled MuJoCo {v['envpool']['mujoco']} and its "
            "own XML (*_envpool.xml); replayed episodes, one thread, CPU time, the loop's own "
            "cost subtracted (benchmarks/peers/physics.py)."
        )
        print("\n" + textwrap.fill(note, 80))


def parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--slice", type=float, default=2.0, help="seconds per slice")
    ap.add_argument("--episodes", type=int, default=64, help="episodes per job (ours, batch)")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--threads", type=int, default=2, help="EnvPool's threads")
    ap.add_argument("--num-envs", type=int, default=64, help="interactive rows")
    ap.add_argument("--replay-steps", type=int, default=3000, help="physics replay length")
    ap.add_argument("--physics-s", type=float, default=1.0, help="CPU s per physics timing")
    ap.add_argument("--only", action="append", choices=sorted(WORKLOADS), help="repeatable")
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 round of 0.2 s slices")
    ap.add_argument("--json", action="store_true", help="end with one JSON line")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.slice, args.replay_steps, args.physics_s = 1, 0.2, 200, 0.02
    return args


def main() -> None:
    args = parse()
    if not PEERS_PYTHON.exists():
        print(
            f"{PEERS_PYTHON} is missing: run `make bench-peers` to install EnvPool", file=sys.stderr
        )
        raise SystemExit(2)
    rows = []
    with tempfile.TemporaryDirectory(prefix="ale-vs-envpool-") as d:
        for name in args.only or list(WORKLOADS):
            with PeerSide(PEERS_PYTHON, HERE / "peers/envpool_side.py") as peer:
                rows.append(measure(name, peer, args, Path(d)))
    print_tables(rows, args)
    if args.json:
        print(json.dumps({"rows": rows}))


if __name__ == "__main__":
    main()
