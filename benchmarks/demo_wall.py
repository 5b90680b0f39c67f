"""Wall clock of a warm ``make demo`` run: the whole ``ale-robotics run`` command, end to end.

``make demo`` runs ``ale-robotics run td3-inverted-pendulum-v2 --agent "python
examples/agents/submit_checkpoint.py"`` with the default sandbox (``auto``: bubblewrap when
it can start). This script times that command ``--runs`` times after one warm-up run (so
the page cache holds Python, MuJoCo and the checkpoint, and ``__pycache__`` is written), each
run into a fresh run directory under a temporary root, and prints the median, min and max.
The warm-up writes the bytecode cache even where ``PYTHONDONTWRITEBYTECODE`` is set (as in
some CI and container images): otherwise every timed run would compile again each module
changed since the cache was last written, which no user's second run does.
A run that does not end in a score line fails the benchmark: a fast run that scores nothing
measures nothing.

What it measures is a user's wait: interpreter start, the CLI's imports, the embedded
evaluator, the agent (its own interpreter, SDK and gRPC), the evaluation on hidden seeds,
scoring, the report and the plot, and the process exit. On a shared machine the figures
move with the load; compare runs made back to back.

Usage::

    python benchmarks/demo_wall.py [--runs 5] [--task ID] [--agent CMD] [--sandbox auto] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_TASK = "td3-inverted-pendulum-v2"


def _cli() -> list[str]:
    """``ale-robotics`` of this interpreter's environment (the console script ``make`` runs)."""
    script = Path(sys.executable).with_name("ale-robotics")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "ale_robotics"]


def time_run(cmd: list[str], run_dir: Path, *, env: dict[str, str] | None = None) -> float:
    """Seconds one run took, from exec to exit; raises when it printed no score line."""
    start = time.perf_counter()
    proc = subprocess.run(
        [*cmd, "--run-dir", str(run_dir)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    wall = time.perf_counter() - start
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines or not lines[-1].startswith("score:"):
        raise SystemExit(
            f"the run failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        )
    return wall


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5, help="Timed runs after the warm-up.")
    p.add_argument("--task", default=DEFAULT_TASK)
    p.add_argument(
        "--agent",
        default=f"{sys.executable} examples/agents/submit_checkpoint.py",
        help="Agent command (default: make demo's, with this interpreter).",
    )
    p.add_argument("--sandbox", default="auto", help="--sandbox of the run (make demo: auto).")
    p.add_argument("--json", action="store_true", help="Print only the JSON line.")
    args = p.parse_args()
    cmd = [*_cli(), "run", args.task, "--agent", args.agent, "--sandbox", args.sandbox]
    with tempfile.TemporaryDirectory(prefix="ale-demo-wall-") as tmp:
        root = Path(tmp)
        writes_bytecode = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        warmup = time_run(cmd, root / "warmup", env=writes_bytecode)
        walls = [time_run(cmd, root / f"run{i}") for i in range(args.runs)]
        plotted = all((root / f"run{i}" / "episodes.png").is_file() for i in range(args.runs))
    out = {
        "task": args.task,
        "sandbox": args.sandbox,
        "runs": args.runs,
        "median_s": round(statistics.median(walls), 3),
        "min_s": round(min(walls), 3),
        "max_s": round(max(walls), 3),
        "warmup_s": round(warmup, 3),
        "walls_s": [round(w, 3) for w in walls],
        "plot_written": plotted,
    }
    if not args.json:
        print(
            f"{args.task}: median {out['median_s']} s, min {out['min_s']} s, "
            f"max {out['max_s']} s over {args.runs} warm runs",
            file=sys.stderr,
        )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
