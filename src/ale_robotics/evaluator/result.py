"""The official ``EvalResult``: what the evaluator measured, stored per job, read by the harness.

It is JSON on the wire (``GetEvalResultResponse.eval_result_json``) and on disk,
validated by this versioned schema at both ends. It never holds a raw seed: each
episode carries the commitment to its seed, and the secret is represented by
its SHA-256.
"""

from __future__ import annotations

import platform
import sys
from importlib import metadata
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "EpisodeRecord",
    "EvalResult",
    "HostInfo",
    "SmokeRun",
    "Timings",
    "host_info",
    "package_versions",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EpisodeRecord(_Model):
    index: int = Field(description="Position in the task's base-seed list.")
    seed_commitment: str = Field(description="SHA256 commitment to the hidden seed, hex.")
    episode_return: float = Field(description="Undiscounted return of the episode.")
    length: int = Field(description="Steps simulated.")
    terminated: bool = Field(description="True if the env terminated (vs truncated by time).")
    abandoned: bool = Field(
        default=False,
        description="Interactive eval sessions: the agent cut the episode short (a new Reset or "
        "CloseSession); it counts with the return and length it had reached.",
    )
    success: bool | None = Field(
        default=None,
        description="Tasks whose env reports info['success']: its value at the episode's last "
        "step (False for an abandoned episode); None for other tasks.",
    )


class SmokeRun(_Model):
    """An operator's smoke run (``ale-robotics run --episodes N``): not an official result."""

    episodes: int = Field(description="Episodes evaluated: the first N of the task's base seeds.")
    of: int = Field(description="Episodes the task's official evaluation runs.")


class Timings(_Model):
    wall_s: float = Field(description="Seconds spent in the rollout pipeline.")
    env_steps: int = Field(description="Environment steps simulated for this result.")
    env_steps_per_s: float = Field(description="env_steps / wall_s on this host.")
    workers: int = Field(description="Worker processes used.")


class HostInfo(_Model):
    platform: str
    machine: str
    python: str
    cpu_count: int


class EvalResult(_Model):
    schema_version: Literal[1] = 1
    job_id: str
    run_id: str
    task_id: str
    task_config_sha256: str = Field(description="Hash of the exact task config evaluated.")
    state: str = Field(description="Terminal job state (SUCCEEDED, REJECTED, FAILED, ...).")
    failure_source: str = Field(default="", description="'submission' or 'infrastructure'.")
    failure_reason: str = Field(default="")
    submission_files: dict[str, str] = Field(
        default_factory=dict, description="Snapshot file name -> SHA-256."
    )
    metrics: dict[str, float] = Field(
        default_factory=dict, description="Evaluator-measured metrics; empty unless SUCCEEDED."
    )
    episodes: list[EpisodeRecord] = Field(default_factory=list)
    evidence_files: dict[str, str] = Field(
        default_factory=dict,
        description="Evidence files of the submission (meta.json, curve.csv...) as base64 of "
        "the frozen bytes, for the harness's faithfulness gate.",
    )
    tensor_shapes: dict[str, list[int]] = Field(
        default_factory=dict, description="State-dict key -> shape of the evaluated policy."
    )
    secret_sha256: str = Field(description="Commitment to the hidden-seed secret.")
    evaluator_version: str
    simulator_versions: dict[str, str] = Field(default_factory=dict)
    host: HostInfo | None = None
    timings: Timings | None = None
    attempts: int = Field(default=1, description="Pipeline attempts (retries after crashes).")
    events: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Signed trusted-evaluator events of the run, in eval_seq order.",
    )
    official: bool = Field(
        default=False, description="Set only on results read over the harness channel."
    )
    smoke_run: SmokeRun | None = Field(
        default=None,
        description="Set when the evaluator ran a smoke run (fewer episodes than the task's "
        "protocol, an operator option): the metrics are not the task's official measurement.",
    )


SIMULATOR_PACKAGES = ["mujoco", "gymnasium", "numpy", "pybullet", "ompl"]
"""Recorded in every EvalResult (with the task's own simulator package), installed or not."""


def simulator_versions(task_package: str) -> dict[str, str]:
    """The simulator stack's versions, for the result (``not installed`` where absent)."""
    return package_versions([*SIMULATOR_PACKAGES, task_package])


def package_versions(names: list[str]) -> dict[str, str]:
    out = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = "not installed"
    return out


def host_info() -> HostInfo:
    import os

    return HostInfo(
        platform=platform.platform(),
        machine=platform.machine(),
        python=sys.version.split()[0],
        cpu_count=os.cpu_count() or 1,
    )
