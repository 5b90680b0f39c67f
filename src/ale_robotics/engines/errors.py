"""What goes wrong with an engine environment, each saying what to do.

::

    FailedPreconditionError (ale_robotics.errors)
    └── EngineUnavailable      an engine cannot be built or used here (no interpreter of its
        │                      version, no constraints file, an install that failed its checks)
        └── EngineNotInstalled a task's engine is not built here: the command that builds it
"""

from __future__ import annotations

from ale_robotics.errors import FailedPreconditionError

__all__ = ["EngineNotInstalled", "EngineUnavailable", "install_command"]


def install_command(name: str) -> str:
    """The command that builds the engine ``name`` (once; cached afterwards)."""
    return f"ale-robotics engines install {name}"


class EngineUnavailable(FailedPreconditionError):
    """An engine that cannot be built or used here; the message names the cause and the fix."""


class EngineNotInstalled(EngineUnavailable):
    """The engine a task runs in has not been built on this host."""

    def __init__(self, engine: str, task_id: str | None = None) -> None:
        who = f"task {task_id} runs" if task_id else "this rollout kind runs"
        super().__init__(
            f"{who} in the engine environment {engine!r}, which is not installed here: "
            f"run '{install_command(engine)}' (or 'make engines') once, then try again"
        )
        self.engine = engine
