"""What one ``ale-robotics run`` is asked to do: :class:`RunOptions`, run ids, default dirs.

Kept apart from :mod:`.run` so that the pre-run checks (:mod:`.preflight`) and the
run itself read the same options without importing each other.
"""

from __future__ import annotations

import datetime as dt
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ale_robotics.paths import state_home

__all__ = ["RunOptions", "default_state_dir", "new_run_id"]


def new_run_id() -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"run-{stamp}-{secrets.token_hex(3)}"


def default_state_dir() -> Path:
    """Where an embedded evaluator keeps its secret and keys: outside any run directory."""
    return state_home() / "evaluator"


@dataclass
class RunOptions:
    task_id: str
    agent_cmd: str
    run_dir: Path | None = None
    evaluator: str | None = None
    evaluator_harness: str | None = None
    harness_token_file: Path | None = None
    agent_token_file: Path | None = None
    submission_volume: Path | None = None
    state_dir: Path | None = None
    budget_s: float | None = None
    workers: int | None = None
    job_timeout_s: float = 900.0
    run_id: str | None = None
    sandbox: Literal["auto", "bwrap", "none"] = "auto"
    """'auto': bubblewrap where it can start, else 'none' with a warning."""
    workspace: Path | None = None
    """The agent's code and data, visible read-only (default: the current directory)."""
    runs_root: Path | None = None
    """Where ``<run_id>/`` is created when ``run_dir`` is not given (default: ./runs)."""
    disk_quota_bytes: int = 4 * 1024**3
    """Most the agent may write into its scratch and submission directories together
    (and the most any single file it writes may hold)."""
    log_cap_bytes: int = 64 * 1024**2
    """Most of the agent's output kept in ``agent.log``; the rest is read and dropped."""
    episodes: int | None = None
    """A smoke run: the embedded evaluator runs only the task's first N episodes, and the
    result, the report and the score line say so. An official run leaves it None."""
    cpus: float | None = None
    """CPUs the agent may use (its cgroup's CFS quota); None: the task's budget, else all."""
    memory_bytes: int | None = None
    """Memory the agent may use (its cgroup's limit, past it the OOM killer); None: the
    task's budget, else all."""
    pids_max: int | None = 4096
    """Most processes and threads the agent may have at once (its cgroup's pids.max)."""
    executor: str = "local"
    """Where the embedded evaluator runs the shards: 'local' worker processes or 'ray'."""
    ray_address: str | None = None
    """With executor 'ray': the cluster to connect to (None: a local Ray instance)."""
