"""Reference agent for isaaclab-cartpole-direct-v1: train with RSL-RL in the sandbox, submit.

The run's sandbox shows the task's ``isaaclab`` engine read-only and names its Python in
``ALE_ENGINE_PYTHON`` (Isaac Lab 3.0.0 kit-less, RSL-RL 5.5.1). This script (the project's
Python, for the SDK) runs ``isaaclab_rsl_rl_train.py`` with it in the scratch directory:
Isaac Lab's own training of ``Isaac-Cartpole-Direct`` on the CPU, offline with the task's
shipped assets. Then it submits the checkpoint RSL-RL wrote (``model_<iteration>.pt``, as
``model.pt``), unchanged, and waits for the evaluator::

    ale-robotics run isaaclab-cartpole-direct-v1 --agent "python examples/agents/isaaclab_rsl_rl.py"

Warp compiles its kernels on first use (1-2 minutes on a CPU); the engine's build holds them
compiled, so they are copied into the scratch directory's Warp cache first when visible.
``--checkpoint FILE`` submits a checkpoint instead of training (the shipped one:
``checkpoints/isaaclab-cartpole-direct-v1/model.pt``, made by this script's training; see
its ``meta.json``).

Exit status: 0 when the job succeeded; 1 when training or the job failed; 2 on a local
problem (no engine, no harness). The score is never printed: the harness reports it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRAIN = HERE / "isaaclab_rsl_rl_train.py"
SHIPPED = HERE / "checkpoints" / "isaaclab-cartpole-direct-v1" / "model.pt"


def _assets() -> Path:
    """The task's Isaac Lab asset root, as the evaluator's engine reads it."""
    from ale_robotics.rollouts.isaaclab.offline import ASSETS

    return ASSETS


def _warp_cache(python: Path, scratch: Path) -> Path:
    """A writable Warp kernel cache, seeded with the engine build's compiled kernels."""
    cache = scratch / "warp-cache"
    built = python.parent.parent.parent / "cache" / "warp"  # <build>/venv/bin/python
    if built.is_dir() and not cache.exists():
        shutil.copytree(built, cache)
    cache.mkdir(exist_ok=True)
    return cache


def train(python: Path, scratch: Path, args: argparse.Namespace) -> Path:
    """Run the training with the engine's Python; the checkpoint it wrote."""
    out = scratch / "rsl_rl"
    env = {**os.environ, "WARP_CACHE_PATH": str(_warp_cache(python, scratch))}
    cmd = [str(python), str(TRAIN), "--out", str(out), "--assets", str(_assets())]
    cmd += ["--num-envs", str(args.num_envs), "--iterations", str(args.iterations)]
    cmd += ["--seed", str(args.seed)]
    print("training: " + " ".join(cmd), flush=True)
    done = subprocess.run(cmd, env=env, cwd=scratch, capture_output=True, text=True, check=False)
    lines = done.stdout.splitlines()
    for line in lines:
        if "Mean reward" in line or "Learning iteration" in line:
            print("  " + line.strip(), flush=True)
    found = [ln for ln in lines if ln.startswith("TRAINED ")]
    if done.returncode != 0 or not found:
        tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
        raise RuntimeError(f"training failed (exit {done.returncode}):\n" + "\n".join(tail))
    summary = json.loads(found[-1][len("TRAINED ") :])
    print(f"trained in {summary['seconds']} s: {summary['checkpoint']}", flush=True)
    return Path(summary["checkpoint"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--checkpoint", type=Path, help="submit this file instead of training")
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--seed", type=int, default=int(os.environ.get("ALE_SEED", "42")))
    args = parser.parse_args(argv)

    from ale_robotics.client import AleClient

    client = AleClient.from_env()
    if client.submission_dir is None:
        print("error: ALE_SUBMISSION_DIR is not set; run this under the harness", file=sys.stderr)
        return 2
    spec = client.get_spec()
    print(f"task {spec.task.id}", flush=True)
    if args.checkpoint is not None:
        checkpoint = args.checkpoint
    else:
        python = os.environ.get("ALE_ENGINE_PYTHON")
        if not python:
            print(
                "error: ALE_ENGINE_PYTHON is not set: the task's engine is not shown to this "
                "run (ale-robotics engines install isaaclab)",
                file=sys.stderr,
            )
            return 2
        scratch = Path(os.environ.get("ALE_SCRATCH_DIR") or Path.cwd())
        try:
            checkpoint = train(Path(python), scratch, args)
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    target = client.submission_dir / "model.pt"
    shutil.copyfile(checkpoint, target)
    print(f"staged {checkpoint} as {target} ({target.stat().st_size} bytes)", flush=True)
    job_id = client.submit()
    print(f"submitted job {job_id}; waiting for the evaluator ...", flush=True)
    status = client.wait(job_id)
    print(f"job {job_id} finished: {status.state}", flush=True)
    if status.state == "SUCCEEDED":
        return 0
    print(f"error: job {job_id} ended {status.state}: {status.failure_reason}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
