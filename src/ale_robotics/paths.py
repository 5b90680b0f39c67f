"""Per-user locations (XDG base directories), shared by the harness and the registry."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["state_home"]


def state_home() -> Path:
    """``$XDG_STATE_HOME/ale-robotics`` (default ``~/.local/state/ale-robotics``)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "ale-robotics"
