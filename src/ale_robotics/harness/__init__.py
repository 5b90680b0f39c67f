"""The trusted harness: runs an agent on a task and reads the official result.

The names below are loaded on first use (PEP 562), not when the package is imported:
readers of run reports (:mod:`ale_robotics.runs`, the HTML report) import
:mod:`.report` and must not pay for the evaluator, gRPC and the agent sandbox that
:mod:`.run` brings in.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ale_robotics.harness.report import RunReport
    from ale_robotics.harness.run import RunOptions, RunOutcome, run_task

__all__ = ["RunOptions", "RunOutcome", "RunReport", "run_task"]

_WHERE = {
    "RunOptions": "ale_robotics.harness.run",
    "RunOutcome": "ale_robotics.harness.run",
    "RunReport": "ale_robotics.harness.report",
    "run_task": "ale_robotics.harness.run",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
