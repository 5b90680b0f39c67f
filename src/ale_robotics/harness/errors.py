"""The harness's own failure: a run that could not be completed, through no fault of the agent."""

from __future__ import annotations

from ale_robotics.errors import AleError

__all__ = ["HarnessError"]


class HarnessError(AleError):
    """The run could not be completed (infrastructure, not the agent's score)."""
