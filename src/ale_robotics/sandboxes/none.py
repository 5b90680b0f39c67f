"""``--sandbox none``: the agent as a plain process of this host, not confined at all.

It sees the network and whatever the harness's user can read (the evaluator's secret
included), so the command line warns before such a run. What it keeps of a sandbox: the
run's cgroup (caps and measurements) and the harness's watch over its budget and disk
quota. ``--sandbox auto`` falls back to it where no confining sandbox can start.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Iterator
from typing import ClassVar

from ale_robotics.sandboxes.base import AgentLaunch, Confinement, Sandbox
from ale_robotics.sandboxes.process import ProcessConfinement, agent_env, workspace_argv, wrapped

__all__ = ["NoSandbox"]


class NoSandbox(Sandbox):
    """The agent unconfined (see the module docstring)."""

    name: ClassVar[str] = "none"
    isolates: ClassVar[bool] = False
    auto_rank: ClassVar[int | None] = 100

    @contextlib.contextmanager
    def prepare(self, launch: AgentLaunch) -> Iterator[Confinement]:
        argv = wrapped(workspace_argv(shlex.split(launch.agent_cmd), launch.workspace), launch)
        box = ProcessConfinement(argv, agent_env(launch), launch)
        try:
            yield box
        finally:
            box.close()
