"""The trusted harness: runs an agent on a task and reads the official result."""

from ale_robotics.harness.report import RunReport
from ale_robotics.harness.run import RunOptions, RunOutcome, run_task

__all__ = ["RunOptions", "RunOutcome", "RunReport", "run_task"]
