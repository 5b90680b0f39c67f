"""What every step of a run is given: the run's fixed facts and where it is (its phase).

Apart from :mod:`.run` because the steps that end a run are modules of their own
(:mod:`.verdict` scores it, :mod:`.stopped_run` records a run stopped without a score)
and all of them read the same context; :mod:`.run` makes it and drives the run.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ale_robotics.harness.agent.access import AgentAccess
from ale_robotics.harness.agent.context import AgentRunContext
from ale_robotics.tasks.registry import Registry, default_registry

if TYPE_CHECKING:
    from ale_robotics.evaluator.execution.local import LocalExecutor
    from ale_robotics.gateway.usage import ModelUsage
    from ale_robotics.harness.report import InspectRecord, PlotsDrawing

__all__ = ["RunContext", "RunPhase"]


@dataclass
class RunPhase:
    """Where the run is, for a ``run_interrupted`` event and an interrupted result.json."""

    name: str = "setup"
    agent_exit_code: int | None = None
    cancel: Callable[[], list[str]] | None = None
    """Cancels the run's unfinished jobs on its evaluator; set once one is connected."""
    ahead: Callable[[], None] | None = None
    """Starts the embedded evaluator's workers (``_prestart_workers`` in :mod:`.run`), when
    there is one."""
    plots: PlotsDrawing | None = None
    """The report's plots being drawn, once result.json is written (see :func:`.run.run_task`)."""

    def set(self, name: str) -> None:
        self.name = name

    def wait_for_plots(self) -> None:
        if self.plots is not None:
            self.plots.wait()


@dataclass(frozen=True)
class RunContext(AgentRunContext):
    """One run's fixed facts and its mutable phase, passed to every step of the run."""

    registry: Registry = dataclasses.field(default_factory=default_registry)
    phase: RunPhase = dataclasses.field(default_factory=lambda: RunPhase())
    label: str = ""
    """The run's label (--label, else the agent command's default), for every report."""
    started_at: dt.datetime | None = None
    """When the run started (UTC), for every report: runs are compared and ordered by it."""
    executor: LocalExecutor | None = None
    """The embedded evaluator's executor, made and started before this run (see
    :mod:`.prestart`); None: the evaluator makes its own."""
    agent_access: AgentAccess | None = None
    """A service of the run's caller the agent reaches through its sandbox (an Inspect
    sample's toolbox channel); None: none."""
    inspect: InspectRecord | None = None
    """The Inspect sample that drives the agent, for result.json; None: not Inspect."""
    model_usage: Callable[[], ModelUsage | None] | None = None
    """The caller's account of the agent's model use (an Inspect sample's, whose model calls
    are the caller's), read once the agent phase ended, for result.json; None: none."""
