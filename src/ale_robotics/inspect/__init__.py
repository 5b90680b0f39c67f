"""Inspect AI integration: any ALE task as an Inspect task, scored by the evaluator.

* :func:`ale_task` (:mod:`.task`): an ALE task as an Inspect ``Task`` (one sample, the
  task's brief; Inspect's ReAct agent with bash, python and its text editor by default), also
  ``inspect eval ale_robotics/ale_task -T task_id=...``;
* the ``ale`` sandbox environment (:mod:`.sandbox`): each sample one ordinary ALE run
  whose agent is the sample's tool calls, run in the run's sandbox by the toolbox
  (:mod:`.toolbox`, over :mod:`.channel`; the run itself: :mod:`.sample_run`);
* :func:`ale_scorer` (:mod:`.scorer`): the run ended as the harness ends it, its official
  score read on the harness channel.

Needs the ``inspect`` extra (``pip install 'ale-robotics[inspect]'``). The names below load
on first use: the toolbox, which runs in the agent's sandbox, imports none of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ale_robotics.lazy import lazy_exports

if TYPE_CHECKING:
    from ale_robotics.inspect.sandbox import AleSandboxConfig, AleSandboxEnvironment
    from ale_robotics.inspect.scorer import ale_scorer
    from ale_robotics.inspect.task import ale_agent, ale_task

__all__ = ["AleSandboxConfig", "AleSandboxEnvironment", "ale_agent", "ale_scorer", "ale_task"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AleSandboxConfig": "ale_robotics.inspect.sandbox",
        "AleSandboxEnvironment": "ale_robotics.inspect.sandbox",
        "ale_scorer": "ale_robotics.inspect.scorer",
        "ale_agent": "ale_robotics.inspect.task",
        "ale_task": "ale_robotics.inspect.task",
    },
)
