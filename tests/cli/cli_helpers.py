"""Helpers for the command-line tests (importable as ``cli_helpers``): the CLI as a
real process, a real run's directory and a stopped run's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ale_robotics.harness.report import StoppedRunReport, write_stopped
from ale_robotics.trajectory import EvaluatorSigner, TrajectoryWriter, seed_commitment

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "ale_robotics"]
TASK_ID = "td3-inverted-pendulum-v1"
CHECKPOINT = ROOT / "examples/agents/checkpoints/td3-inverted-pendulum-v1/policy.safetensors"
STOPPED_RUN_ID = "run-test-stopped"


@dataclass(frozen=True)
class RealRun:
    run_dir: Path
    secret: Path
    """The embedded evaluator's secret file (what is revealed for an audit)."""


def cli(
    *args: str, columns: int = 80, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``ale-robotics ARGS`` as a real process, stdout and stderr through pipes."""
    return subprocess.run(
        [*CLI, *args],
        env={**os.environ, "COLUMNS": str(columns), **(env or {})},
        capture_output=True,  # stdout and stderr are pipes, not a terminal
        text=True,
        timeout=timeout,
        check=False,
    )


def make_real_run(base: Path) -> RealRun:
    """``ale-robotics run`` with the shipped TD3 checkpoint agent, no sandbox (~10 s)."""
    agent = f"{sys.executable} {ROOT / 'examples/agents/submit_checkpoint.py'}"
    proc = subprocess.run(
        [
            *CLI,
            "run",
            TASK_ID,
            "--agent",
            agent,
            "--sandbox",
            "none",
            "--workers",
            "1",
            "--run-dir",
            str(base / "run"),
            "--state-dir",
            str(base / "state"),
        ],
        env={**os.environ, "XDG_STATE_HOME": str(base / "xdg")},
        capture_output=True,
        text=True,
        timeout=240,
        cwd=base,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return RealRun(base / "run", base / "state" / "secret")


def copy_run(run: RealRun, dest: Path) -> Path:
    """A copy of the real run's directory (its submission too) to change."""
    shutil.copytree(run.run_dir, dest, ignore=shutil.ignore_patterns("scratch"))
    return dest


def write_stopped_run(run_dir: Path, *, signal: str = "SIGINT", phase: str = "agent") -> Path:
    """A run stopped by ``signal`` while the agent ran: a trajectory that ends with the
    harness's ``run_interrupted`` event, and the StoppedRunReport written next to it."""
    run_dir.mkdir(parents=True)
    trajectory = run_dir / "trajectory.jsonl"
    writer = TrajectoryWriter(trajectory, STOPPED_RUN_ID)
    signed = EvaluatorSigner.from_private_bytes(bytes.fromhex("c3" * 32)).for_run(STOPPED_RUN_ID)
    writer.append("harness", "run_started", {"task_id": TASK_ID})
    writer.append_signed(signed.key_event())
    writer.append_signed(
        signed.commitment_event(
            secret=b"s" * 32, seed_commitments=[seed_commitment(bytes([i]) * 32) for i in range(3)]
        )
    )
    writer.append("harness", "agent_launched", {"pid": 4242, "sandbox": "none"})
    last = writer.append(
        "harness", "run_interrupted", {"signal": signal, "phase": phase, "cancelled_jobs": []}
    )
    report = StoppedRunReport(
        state="interrupted",
        run_id=STOPPED_RUN_ID,
        task_id=TASK_ID,
        agent_cmd="python agent.py",
        reason=f"{signal} from the operator",
        signal=signal,
        phase=phase,
        wall_s=3.5,
        trajectory_head=last.hash,
    )
    write_stopped(run_dir, report, trajectory)
    return run_dir
