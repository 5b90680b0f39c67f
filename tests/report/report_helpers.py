"""Helpers for the report tests (importable as ``report_helpers``): real runs.

Every run is a real ``ale-robotics run`` (embedded evaluator, real agent, default
sandbox) of the shipped TD3 checkpoint agent, so the site is tested on what the
harness really writes: two labels of official runs, a smoke run, an agent that
prints markup, a terminal escape and a URL into its log, a short TD3 training on
Walker2d whose checkpoints give a learning curve, a run interrupted with SIGINT
while its agent ran (a stopped run: no verdict), and two runs with no result (a
rejected submission, an interactive agent that never opened its eval session).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "ale_robotics"]
PENDULUM = "td3-inverted-pendulum-v1"
WALKER = "td3-walker2d-repro-v1"
SUBMIT = "python examples/agents/submit_checkpoint.py"
HOSTILE_LINE = (
    "<script>window.pwned=1</script> <img src=https://evil.example/x.png> \\x1b[31mred\\x1b[0m done"
)
"""What the hostile agent prints first (Python escapes: the log gets a real ESC)."""
HOSTILE = (
    "python -c \"import runpy, sys; print('" + HOSTILE_LINE + "'); sys.stdout.flush(); "
    "sys.argv = ['submit_checkpoint.py']; "
    f"runpy.run_path('{ROOT / 'examples/agents/submit_checkpoint.py'}', run_name='__main__')\""
)
SLEEPER = "python -c \"import time; print('training...', flush=True); time.sleep(120)\""
HOPPER = "td3-hopper-v1"
REJECTED = (
    'python -c "import numpy as np; from safetensors.numpy import save_file; '
    "from ale_robotics.client import AleClient; c = AleClient.from_env(); "
    "save_file({'fc1.weight': np.zeros((4, 4), np.float32)}, "
    "str(c.submission_dir / 'policy.safetensors')); c.wait(c.submit())\""
)
"""An agent whose submission the evaluator rejects (a renamed key): no result."""
TRAIN = (
    "python examples/agents/td3_train.py --timesteps 1500 --learning-starts 500 "
    "--checkpoint-every 500"
)


@dataclass(frozen=True)
class Runs:
    """The runs root and the run directory of each run, by name."""

    root: Path
    dirs: dict[str, Path]


def _argv(base: Path, run_dir: Path, task: str, agent: str, *extra: str) -> list[str]:
    return [*CLI, "run", task, "--agent", agent, "--run-dir", str(run_dir),
            "--state-dir", str(base / "state"), *extra]  # fmt: skip


def _env(base: Path) -> dict[str, str]:
    return {**os.environ, "XDG_STATE_HOME": str(base / "xdg")}


def real_run(base: Path, name: str, task: str, agent: str, *extra: str) -> Path:
    run_dir = base / "runs" / name
    proc = subprocess.run(
        _argv(base, run_dir, task, agent, *extra),
        env=_env(base),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, (name, proc.stdout[-2000:], proc.stderr[-4000:])
    return run_dir


def interrupted_run(base: Path, name: str) -> Path:
    """A run stopped by SIGINT (what Ctrl-C sends) once its agent is running."""
    run_dir = base / "runs" / name
    proc = subprocess.Popen(
        _argv(base, run_dir, PENDULUM, SLEEPER, "--label", "sleeper"),
        env=_env(base),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        log = run_dir / "agent.log"
        while time.monotonic() < deadline and b"training" not in _read(log):
            assert proc.poll() is None, "the run ended before its agent started"
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=60) == 130
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return run_dir


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


SET_NAME = "study"
"""The eval set :func:`eval_set` runs."""


def eval_set(base: Path, zeroed: Path) -> Path:
    """A real ``ale-robotics eval-set``: the pendulum, the shipped checkpoint (label td3)
    and the same network zeroed (label zero), two repetitions of smoke runs of 2 episodes
    each (no sandbox), under ``base/runs``; returns that runs root."""
    import json

    spec = base / f"{SET_NAME}.json"
    spec.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "tasks": [PENDULUM],
                "agents": [
                    {"label": "td3", "cmd": SUBMIT},
                    {"label": "zero", "cmd": f"{SUBMIT} --checkpoint {zeroed}"},
                ],
                "repetitions": 2,
                "episodes": 2,
                "sandbox": "none",  # the zeroed checkpoint lies outside the workspace
                "run_args": ["--workers", "1", "--state-dir", str(base / "state")],
                "bootstrap": {"reps": 300, "profile_reps": 200, "seed": 3},
            }
        )
    )
    proc = subprocess.run(
        [*CLI, "eval-set", str(spec), "--runs-root", str(base / "runs"), "--jobs", "2"],
        env=_env(base),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-4000:])
    return base / "runs"
