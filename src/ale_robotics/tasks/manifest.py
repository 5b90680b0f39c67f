"""The release manifest: paper targets, task versions and compute budgets, with their sources.

No paper value lives in code. A manifest entry is bound to the exact task config
it was written for by the config file's SHA-256, so a target can never be
silently applied to a task whose protocol changed underneath it.
"""

from __future__ import annotations

import hashlib
import json
import os
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ale_robotics.errors import ConfigError
from ale_robotics.paths import state_home
from ale_robotics.tasks.spec import Direction

__all__ = [
    "BUNDLED_MANIFEST",
    "ComputeBudget",
    "ManifestEntry",
    "PaperTarget",
    "ReleaseManifest",
    "TargetSource",
    "active_manifest",
    "config_sha256",
    "load_manifest",
    "synced_manifest_path",
]

BUNDLED_MANIFEST = "release-v0.5.json"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TargetSource(_Strict):
    paper: str = Field(description="Short citation, e.g. 'Fujimoto et al. 2018 (TD3)'.")
    location: str = Field(description="Table, figure or file the value is read from.")
    page: str = Field(default="", description="Page number or path within the source.")

    @field_validator("paper", "location")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("a paper target needs a source: paper and table/figure/file")
        return v


class PaperTarget(_Strict):
    metric: str
    value: float
    direction: Direction
    source: TargetSource
    confidence: Literal["confirmed", "approximate"] = "confirmed"
    note: str = ""


class ComputeBudget(_Strict):
    wall_clock_s: float = Field(gt=0, description="Agent's wall-clock budget for the run.")
    training_steps: int | None = Field(default=None, gt=0)
    max_submissions: int = Field(default=3, gt=0)


class ManifestEntry(_Strict):
    version: int = Field(gt=0)
    config_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    target: PaperTarget | None = Field(
        default=None, description="None while no sourced value is confirmed: the task is unscored."
    )
    compute_budget: ComputeBudget


class ReleaseManifest(_Strict):
    schema_version: Literal[1] = 1
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
        return ReleaseManifest.model_validate(json.loads(raw))
    except (ValidationError, json.JSONDecodeError) as exc:
        raise ConfigError(f"manifest {where} is invalid: {exc}") from exc
