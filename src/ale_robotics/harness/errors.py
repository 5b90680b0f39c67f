"""The harness's own failure: a run that could not be completed, through no fault of the agent.

Defined in :mod:`ale_robotics.sandboxes.errors` (the sandboxes, below the harness, raise
it too) and exported here, where the harness's callers look for it.
"""

from __future__ import annotations

from ale_robotics.sandboxes.errors import HarnessError

__all__ = ["HarnessError"]
