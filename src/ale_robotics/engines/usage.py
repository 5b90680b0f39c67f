"""Which engine a task's results come from, as a result names it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ale_robotics.engines.launch import WorkerLaunch, worker_launch
from ale_robotics.engines.registry import engine_of_kind
from ale_robotics.model.result import EngineUsed

if TYPE_CHECKING:
    from ale_robotics.tasks.spec import TaskSpec

__all__ = ["AGENT_PYTHON_VAR", "AgentEngine", "agent_engine", "engine_used", "require_engine"]

AGENT_PYTHON_VAR = "ALE_ENGINE_PYTHON"
"""Set in the agent's environment when its task's engine is shown to it: the engine's Python."""


@dataclass(frozen=True)
class AgentEngine:
    """An engine shown to a task's agent, read-only, to train with (:func:`agent_engine`)."""

    name: str
    python: Path
    """The engine's interpreter (its venv's ``bin/python``)."""
    paths: tuple[Path, ...]
    """What the sandbox must show for it to run: the build (venv, caches) and the
    interpreter installation the venv was made from."""


def require_engine(task: TaskSpec) -> WorkerLaunch | None:
    """How ``task``'s workers start when its kind runs in an engine (None: the evaluator's
    own environment); :class:`~.errors.EngineNotInstalled` naming the install command when
    that engine is not built here. What a run, a submission and the executor check first."""
    engine = engine_of_kind(task.eval.rollout)
    return None if engine is None else worker_launch(engine, task.id)


def engine_used(task: TaskSpec) -> EngineUsed | None:
    """The engine that ran ``task``'s episodes, with its device and the versions of its
    simulator stack; None for a task run in the evaluator's own environment. Called once
    its episodes ran, so its build exists (a build removed since is named by its key)."""
    from ale_robotics.engines.build import installed
    from ale_robotics.engines.home import engine_key
    from ale_robotics.engines.launch import engine_device

    engine = engine_of_kind(task.eval.rollout)
    if engine is None:
        return None
    record = installed(engine)
    if record is None:
        return EngineUsed(name=engine.name, key=engine_key(engine))
    return EngineUsed(
        name=engine.name,
        key=record.key,
        device=engine_device(engine, record.python, record.key),
        python=record.python_version,
        versions={
            d: record.versions.get(d) or record.system_versions.get(d, "not installed")
            for d in engine.reported
        },
    )


def agent_engine(task: TaskSpec) -> AgentEngine | None:
    """The engine ``task``'s agent trains with, when its kind's engine says agents do
    (:attr:`~.base.Engine.agent_trains_with`) and the agent simulates for itself; None
    otherwise, or when the engine is not built (the run is refused before, naming why)."""
    from ale_robotics.engines.build import installed
    from ale_robotics.engines.home import build_dir

    engine = engine_of_kind(task.eval.rollout)
    if engine is None or not engine.agent_trains_with or task.simulator_in_evaluator:
        return None
    record = installed(engine)
    if record is None:
        return None
    python = Path(record.python)
    base = python.resolve().parent.parent  # <prefix>/bin/python3.X -> <prefix>
    return AgentEngine(engine.name, python, (build_dir(engine), base))
