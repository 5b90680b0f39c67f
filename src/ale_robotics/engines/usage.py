"""Which engine a task's results come from, as a result names it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ale_robotics.engines.launch import WorkerLaunch, worker_launch
from ale_robotics.engines.registry import engine_of_kind
from ale_robotics.model.result import EngineUsed

if TYPE_CHECKING:
    from ale_robotics.tasks.spec import TaskSpec

__all__ = ["engine_used", "require_engine"]


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
