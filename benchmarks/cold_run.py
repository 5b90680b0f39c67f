"""A cold ``ale-robotics run`` on Ray against the same run on local workers.

Each run is a fresh ``ale-robotics run`` process (nothing warm: a private Ray instance or
the local worker pool starts with it) of a batch task whose agent works ``--agent-s``
seconds, then submits the shipped TD3 checkpoint (``examples/agents/submit_checkpoint.py``),
as a training agent would after its training. The executors alternate (``ray local local
ray ...``, so drift hits both) for ``--reps`` runs each. Per run it reads the run's
trajectory for the job's own time (``evaluation_started`` to ``result``) and the agent's
launch, and times the whole command.

Printed: per executor the median (min-max) of the whole run's wall time, of the job's
time, and of the agent's launch after the run started; ``ray / local`` of the medians. The
cold cost of Ray is its instance's start (3-4 s here) and its workers' first imports and
env (about 2 s): both now start in the background when the run begins and warm up while
the agent works (``RayExecutor`` starts its first driver in a thread; the harness calls
``Executor.prestart``), so an agent that works longer than that pays neither.

Usage::

    python benchmarks/cold_run.py [--task td3-inverted-pendulum-v2] [--agent-s 8] [--reps 3]
                                  [--json]
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "examples" / "agents" / "submit_checkpoint.py"


def _times(run_dir: Path) -> dict[str, float]:
    """Seconds from the run's start to its agent's launch, and the job's own seconds."""
    events = [json.loads(line) for line in (run_dir / "trajectory.jsonl").open()]
    at = {e["kind"]: datetime.fromisoformat(e["time"].replace("Z", "+00:00")) for e in events}
    start = at["run_started"]
    return {
        "agent_launched_s": (at["agent_launched"] - start).total_seconds(),
        "job_s": (at["result"] - at["evaluation_started"]).total_seconds(),
    }


def one_run(task: str, executor: str, agent_s: float, run_dir: Path) -> dict[str, float]:
    agent = f"sh -c {shlex.quote(f'sleep {agent_s}; exec {sys.executable} {AGENT}')}"
    cmd = [sys.executable, "-m", "ale_robotics", "run", task, "--agent", agent]
    cmd += ["--executor", executor, "--run-dir", str(run_dir)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{executor} run failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return {"wall_s": wall, **_times(run_dir)}


def _med(rows: list[dict[str, float]], key: str) -> tuple[float, float, float]:
    values = [r[key] for r in rows]
    return statistics.median(values), min(values), max(values)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="td3-inverted-pendulum-v2")
    p.add_argument("--agent-s", type=float, default=8.0, help="seconds the agent works")
    p.add_argument("--reps", type=int, default=3, help="runs per executor")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    rows: dict[str, list[dict[str, float]]] = {"ray": [], "local": []}
    with tempfile.TemporaryDirectory(prefix="ale-cold-") as d:
        for rep in range(args.reps):
            for executor in ("ray", "local") if rep % 2 == 0 else ("local", "ray"):
                run_dir = Path(d) / f"{executor}-{rep}"
                rows[executor].append(one_run(args.task, executor, args.agent_s, run_dir))
    print(f"cold `ale-robotics run {args.task}`, agent working {args.agent_s:g} s,")
    print(f"{args.reps} run(s) per executor (alternated), medians (min-max)")
    doc: dict[str, Any] = {"task": args.task, "agent_s": args.agent_s, "reps": args.reps}
    print(f"  {'':<6} {'whole run, s':>20} {'job, s':>20} {'agent launched, s':>20}")
    for executor, runs in rows.items():
        cells = {key: _med(runs, key) for key in ("wall_s", "job_s", "agent_launched_s")}
        doc[executor] = {key: m for key, (m, _, _) in cells.items()} | {"runs": runs}
        line = " ".join(f"{f'{m:.2f} ({lo:.2f}-{hi:.2f})':>20}" for m, lo, hi in cells.values())
        print(f"  {executor:<6} {line}")
    doc["ray_vs_local_wall"] = doc["ray"]["wall_s"] / doc["local"]["wall_s"]
    doc["ray_vs_local_job"] = doc["ray"]["job_s"] / doc["local"]["job_s"]
    print(
        f"  ray / local: whole run {doc['ray_vs_local_wall']:.2f}, "
        f"job {doc['ray_vs_local_job']:.2f}"
    )
    if args.json:
        print(json.dumps(doc))


if __name__ == "__main__":
    main()
