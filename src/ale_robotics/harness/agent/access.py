"""What the agent reaches of the harness through its sandbox, besides the evaluator.

Apart from :mod:`.proc` (which shows it to the agent) because its implementations
live elsewhere: the run's model gateway (:class:`.model_gateway.ModelAccess`) and an Inspect
sample's toolbox channel (:class:`ale_robotics.inspect.channel.ToolboxAccess`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from ale_robotics.sandboxes.base import AgentWrap

__all__ = ["AgentAccess"]


class AgentAccess(Protocol):
    """A service of the harness the agent reaches through a socket its sandbox shows it.

    The run's model gateway (:class:`.model_gateway.ModelAccess`), or the toolbox channel
    of an Inspect sample (:class:`ale_robotics.inspect.channel.ToolboxAccess`): a
    directory shown writable at its own path (a container mounts it elsewhere), the
    variables that tell the agent about it, and the wrapper of the agent command that
    connects the two (told where the sandbox shows the directory).
    """

    @property
    def socket_dir(self) -> Path: ...

    @property
    def env(self) -> Mapping[str, str]: ...

    @property
    def wrap(self) -> AgentWrap:
        """Wraps the agent command to connect it (:class:`~ale_robotics.sandboxes.AgentWrap`)."""
        ...

    def stored_bytes(self) -> int:
        """Bytes the service keeps on the host for the agent (the model transcript): they
        count against the run's disk quota."""
        ...

    def quota_breach(self) -> int | None:
        """The bytes the agent would have made the service keep when it refused a request
        at the run's disk quota (None: it refused none): a quota breach like any other."""
        ...

    def last_call_unix(self) -> float:
        """When the agent last called the service (seconds since the epoch; 0.0: never):
        a model call is activity (:mod:`ale_robotics.harness.agent.activity`)."""
        ...

    def last_refusal(self) -> tuple[float, str] | None:
        """When the service last refused the agent, and why (None: it never did)."""
        ...
