"""``engine.json``: what a finished engine build is, written last by the install."""

from __future__ import annotations

from pathlib import Path

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

__all__ = ["RECORD_NAME", "InstalledEngine", "read_record"]

RECORD_NAME = "engine.json"


class InstalledEngine(BaseModel):
    """One built engine environment (``<home>/<engine>/<key>/engine.json``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int = Field(default=1, description="Version of this document.")
    name: str = Field(description="The engine's name.")
    key: str = Field(description="The build's key (engine, Python MAJOR.MINOR, pins).")
    python: str = Field(description="The environment's interpreter (venv/bin/python).")
    python_version: str = Field(description="Its MAJOR.MINOR.MICRO.")
    sys_path: list[str] = Field(
        description="The interpreter's own sys.path (isolated mode): what a worker imports "
        "from, after the ale_robotics overlay."
    )
    versions: dict[str, str] = Field(
        description="Every distribution installed, by normalized name: equal to the pins."
    )
    constraints_sha256: str = Field(description="SHA-256 of the constraints file installed.")
    system_versions: dict[str, str] = Field(
        default_factory=dict,
        description="Versions of the engine's system packages (Debian's) when it was built.",
    )
    built_at: AwareDatetime
    install_s: float = Field(description="Seconds to create the venv and install the pins.")
    warm_up_s: float = Field(default=0.0, description="Seconds of the engine's warm-up.")
    size_bytes: int = Field(description="Bytes on disk of the build, caches included.")


def read_record(directory: Path) -> InstalledEngine | None:
    """The record of the build in ``directory``, or None (unfinished, missing, unreadable)."""
    try:
        return InstalledEngine.model_validate_json((directory / RECORD_NAME).read_bytes())
    except (OSError, ValueError):
        return None
