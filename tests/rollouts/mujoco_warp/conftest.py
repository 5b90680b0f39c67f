"""The ``mujoco_warp`` kind's tests: this directory on ``sys.path`` (``import warp_tasks``)."""

from __future__ import annotations

import sys
from pathlib import Path

if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
