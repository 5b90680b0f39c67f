"""What Inspect AI loads through the ``inspect_ai`` entry point: the ``ale_task`` task and the
``ale`` sandbox environment, registered by their decorators when imported."""

from ale_robotics.inspect.sandbox import AleSandboxEnvironment
from ale_robotics.inspect.task import ale_task

__all__ = ["AleSandboxEnvironment", "ale_task"]
