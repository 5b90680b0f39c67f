"""The embedded evaluator's rollout workers, started before the rest of the harness loads.

A warm rollout worker takes about 0.4 s of one core to start (its interpreter, numpy,
the task model, the rollout kind, the simulator and one env of the task: see
:meth:`.LocalExecutor.prestart`). Started once the agent was launched, that time
overlapped the agent's own start-up on a host with few cores, and the first job often
still waited for the worker. Before the agent, the harness does nothing but import
and set up, on one core: a worker started then uses a core that would otherwise be
idle. :func:`prestarted_executor` makes the embedded evaluator's executor that early,
once the task is known and the harness process is hardened (the worker inherits its
working directory and environment), and :func:`.run.run_task` hands it to the
evaluator (:func:`.evaluator.server.serve`), which owns it from then on.

This module imports little: it runs before the evaluator's modules are imported (the
executor's own, which the worker needs, are imported here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ale_robotics.evaluator.execution import LocalExecutor
    from ale_robotics.harness.options import RunOptions
    from ale_robotics.tasks.spec import TaskSpec

__all__ = ["prestarted_executor"]


def prestarted_executor(opts: RunOptions, task: TaskSpec) -> LocalExecutor | None:
    """The local executor the run's embedded evaluator will use, its workers starting.

    The same executor :class:`~ale_robotics.evaluator.core.Evaluator` would open for the
    config :func:`.run.run_task` gives it (``--executor local``, ``--workers``, default
    limits), warmed up for ``task`` as that evaluator runs it (cut to ``--episodes`` in
    a smoke run). None when the run has no embedded local executor (``--evaluator``,
    ``--evaluator-image``, ``--executor ray``): those start their workers their own way.
    The caller shuts it down if the run ends before an evaluator took it over (a second
    shutdown is a no-op).
    """
    if opts.evaluator is not None or opts.evaluator_image is not None or opts.executor != "local":
        return None
    from ale_robotics.evaluator.batch.smoke import smoke_task
    from ale_robotics.evaluator.execution import LocalExecutor

    executor = LocalExecutor(opts.workers)  # what make_executor("local", workers=...) makes
    executor.prestart(task if opts.episodes is None else smoke_task(task, opts.episodes))
    return executor
