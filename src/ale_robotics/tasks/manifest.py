"""The release manifest: paper targets, task versions and compute budgets, with their sources.

No paper value lives in code. A manifest entry is bound to the exact task config
it was written for by the config file's SHA-256, so a target can never be
silently applied to a task whose protocol changed underneath it.

Every target names its statistic (a task scores one final policy, so only a
final-performance statistic may be a target; a paper's peak-over-training value
is refused) and what is not comparable between the paper's setup and ours
(docs/architecture.md#rules-a-score-must-obey). Schema version 2 added both; a version-1 manifest is
refused with a message naming its version, since the statistic and notes cannot
be inferred from it.
"""

from __future__ import annotations

import hashlib
import json
import os
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ale_robotics.errors import ConfigError
from ale_robotics.paths import state_home
from ale_robotics.tasks.spec import Direction

__all__ = [
    "BUNDLED_MANIFEST",
    "MANIFEST_SCHEMA_VERSION",
    "STATISTIC_DESCRIPTIONS",
    "Comparability",
    "ComputeBudget",
    "ManifestEntry",
    "PaperTarget",
    "ReleaseManifest",
    "Setup",
    "Statistic",
    "TargetSource",
    "active_manifest",
    "config_sha256",
    "load_manifest",
    "synced_manifest_path",
]

BUNDLED_MANIFEST = "release-v0.5.json"

MANIFEST_SCHEMA_VERSION: Literal[2] = 2
"""The manifest schema this code reads. 2: every target has ``statistic`` and ``comparability``."""


class Statistic(StrEnum):
    """How a paper's number summarizes training; only final statistics can be targets."""

    FINAL_LAST_10_EVALUATIONS = "final_last_10_evaluations"
    FINAL_AT_BUDGET = "final_at_budget"
    PEAK_OVER_TRAINING = "peak_over_training"

    @property
    def is_final(self) -> bool:
        """Whether the statistic describes the end of training (what a task's one policy is)."""
        return self is not Statistic.PEAK_OVER_TRAINING

    @property
    def description(self) -> str:
        return STATISTIC_DESCRIPTIONS[self]

    @property
    def label(self) -> str:
        """A few words for a table cell: 'final, last 10 evals'."""
        return STATISTIC_LABELS[self]

    @property
    def clause(self) -> str:
        """One short clause for a sentence: 'final performance, mean of the last 10 evaluations'."""
        return STATISTIC_CLAUSES[self]


STATISTIC_LABELS: dict[Statistic, str] = {
    Statistic.FINAL_LAST_10_EVALUATIONS: "final, last 10 evals",
    Statistic.FINAL_AT_BUDGET: "final, at budget",
    Statistic.PEAK_OVER_TRAINING: "peak over training",
}

STATISTIC_CLAUSES: dict[Statistic, str] = {
    Statistic.FINAL_LAST_10_EVALUATIONS: "final performance, mean of the last 10 evaluations",
    Statistic.FINAL_AT_BUDGET: "final performance, evaluation at the step budget",
    Statistic.PEAK_OVER_TRAINING: "peak performance over training",
}

STATISTIC_DESCRIPTIONS: dict[Statistic, str] = {
    Statistic.FINAL_LAST_10_EVALUATIONS: (
        "final performance: mean over seeds of the average of each seed's last 10 evaluations "
        "of training"
    ),
    Statistic.FINAL_AT_BUDGET: (
        "final performance: mean over seeds of the evaluation at the training budget's step"
    ),
    Statistic.PEAK_OVER_TRAINING: (
        "peak performance: maximum over training of the seed-averaged evaluation; biased high "
        "against one final policy, so never a target"
    ),
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TargetSource(_Strict):
    paper: str = Field(description="Short citation, e.g. 'Fujimoto et al. 2018 (TD3)'.")
    location: str = Field(
        description="Table cell (method column/row and environment row/column as the table "
        "lays them out), figure or data file the value is read from."
    )
    page: str = Field(default="", description="Page number or path within the source.")
    data_commit: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{40}$",
        description="Git commit of the published data the value is derived from, if any.",
    )

    @field_validator("paper", "location")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("a paper target needs a source: paper and table/figure/file")
        return v


class Setup(_Strict):
    """One side of a comparison: an environment and the simulator it ran on."""

    env: str = Field(min_length=1, description="Environment id and suite, with its version.")
    simulator: str = Field(min_length=1, description="Simulator and bindings, with versions.")


class Comparability(_Strict):
    """What differs between the setup the paper's number came from and the task's."""

    paper: Setup
    ours: Setup
    notes: list[str] = Field(
        min_length=1,
        description="Each difference that can move the number (reward terms, dynamics, "
        "protocol), or one note saying none is known.",
    )

    @field_validator("notes")
    @classmethod
    def _no_blank_note(cls, v: list[str]) -> list[str]:
        if any(not n.strip() for n in v):
            raise ValueError("a comparability note cannot be blank")
        return v


class PaperTarget(_Strict):
    metric: str
    value: float
    direction: Direction
    source: TargetSource
    statistic: Statistic = Field(
        description="How the paper's value summarizes training; a final statistic."
    )
    comparability: Comparability
    confidence: Literal["confirmed", "approximate"] = "confirmed"
    derivation: str = Field(
        default="",
        description="In words, how the value was computed when no table prints it; required "
        "for an approximate value, and needs the source's data_commit.",
    )
    note: str = ""

    @model_validator(mode="after")
    def _final_and_derived(self) -> PaperTarget:
        if not self.statistic.is_final:
            raise ValueError(
                f"statistic {self.statistic.value!r} is a peak over training: a task scores one "
                "final policy, so its target must be a final statistic "
                f"({', '.join(s.value for s in Statistic if s.is_final)})"
            )
        if self.confidence == "approximate" and not self.derivation.strip():
            raise ValueError("an approximate target needs a derivation saying how it was computed")
        if self.derivation.strip() and self.source.data_commit is None:
            raise ValueError("a target derived from published data needs the data's commit")
        return self


class ComputeBudget(_Strict):
    wall_clock_s: float = Field(gt=0, description="Agent's wall-clock budget for the run.")
    training_steps: int | None = Field(default=None, gt=0)
    max_submissions: int = Field(default=3, gt=0)
    cpus: float | None = Field(
        default=None, gt=0, description="CPUs the agent may use (its cgroup's quota); None: all."
    )
    memory_bytes: int | None = Field(
        default=None, gt=0, description="Memory the agent may use (its cgroup's limit); None: all."
    )
    model_tokens: int | None = Field(
        default=None,
        gt=0,
        description="Model tokens (input + output) the agent may use through the run's model "
        "gateway; None: unmetered unless 'run --model-budget-tokens' sets a budget.",
    )


class ManifestEntry(_Strict):
    version: int = Field(gt=0)
    config_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    target: PaperTarget | None = Field(
        default=None, description="None while no sourced value is confirmed: the task is unscored."
    )
    compute_budget: ComputeBudget
    superseded_by: str | None = Field(
        default=None,
        description=(
            "The id of the task's newer version, when one replaced it (a change to how the "
            "evaluator measures, like its shard layout). The old version stays installed so "
            "that its recorded runs can be re-run and compared with each other; new runs "
            "should use the newer one. Scores compare within a version only."
        ),
    )


class ReleaseManifest(_Strict):
    schema_version: Literal[2] = MANIFEST_SCHEMA_VERSION
    release: str
    tasks: dict[str, ManifestEntry]


def config_sha256(data: bytes) -> str:
    """Hash of a task config file as shipped (its exact bytes)."""
    return hashlib.sha256(data).hexdigest()


def synced_manifest_path() -> Path:
    """Where ``ale-robotics registry sync`` puts the operator's manifest (``ALE_MANIFEST`` wins)."""
    env = os.environ.get("ALE_MANIFEST")
    if env:
        return Path(env)
    return state_home() / "manifest.json"


def active_manifest() -> tuple[ReleaseManifest, str]:
    """The synced manifest if there is one, else the bundled one; with where it came from."""
    path = synced_manifest_path()
    if path.exists():
        return load_manifest(path), str(path)
    return load_manifest(), f"bundled {BUNDLED_MANIFEST}"


def load_manifest(path: Path | None = None) -> ReleaseManifest:
    """Read a manifest file, or the one bundled with the package when ``path`` is None."""
    if path is None:
        raw = (resources.files("ale_robotics.tasks") / "manifests" / BUNDLED_MANIFEST).read_bytes()
        where = f"bundled {BUNDLED_MANIFEST}"
    else:
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read manifest {path}: {exc.strerror}") from exc
        where = str(path)
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"manifest {where} is invalid: {exc}") from exc
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != MANIFEST_SCHEMA_VERSION:
        raise ConfigError(
            f"manifest {where} has schema_version {version!r}; this ale-robotics reads "
            f"schema_version {MANIFEST_SCHEMA_VERSION} (every target names its statistic and "
            f"comparability, which version 1 lacks): start from the bundled {BUNDLED_MANIFEST} "
            "and sync that, or remove the synced file to use the bundled manifest"
        )
    try:
        return ReleaseManifest.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"manifest {where} is invalid: {exc}") from exc
