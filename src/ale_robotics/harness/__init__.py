"""The trusted harness: runs an agent on a task and reads the official result.

The names below are loaded on first use (PEP 562), not when the package is imported:
readers of run reports (:mod:`ale_robotics.runs`, the HTML report) import
:mod:`.report` and must not pay for the evaluator, gRPC and the agent sandbox that
:mod:`.run` (and :mod:`.verdict`) bring in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ale_robotics.lazy import lazy_exports

if TYPE_CHECKING:
    from ale_robotics.harness.report import RunReport
    from ale_robotics.harness.run import RunOptions, run_task
    from ale_robotics.harness.verdict import RunOutcome

__all__ = ["RunOptions", "RunOutcome", "RunReport", "run_task"]

_WHERE = {
    "RunOptions": "ale_robotics.harness.run",
    "RunOutcome": "ale_robotics.harness.verdict",
    "RunReport": "ale_robotics.harness.report",
    "run_task": "ale_robotics.harness.run",
}

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
