"""One frozen submission file, as the evaluator's snapshot recorded it.

The record only: freezing a submission (the safe copy out of the agent's volume) is
:func:`ale_robotics.evaluator.batch.snapshot.snapshot_submission`. Rollout kinds read these
records to load their artifacts, so the record sits here, below both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from ale_robotics.tasks.contract import FileFormat

__all__ = ["SnapshotFile"]


class SnapshotFile:
    """A frozen copy of one contract file."""

    def __init__(self, role: str, name: str, fmt: FileFormat, path: Path, sha256: str) -> None:
        self.role = role
        self.name = name
        self.format = fmt
        self.path = path
        self.sha256 = sha256
