"""The agent-side SDK (batch mode): :class:`AleClient` and its result types."""

from ale_robotics.client.sdk import ENV_VARS, AleClient, JobStatus, TaskView

__all__ = ["ENV_VARS", "AleClient", "JobStatus", "TaskView"]
