"""The trusted evaluator: job store, snapshots, validation, native pipeline, gRPC service.

The names below are loaded on first use (PEP 562), not when the package is
imported: the rollout kinds and the task model import small modules of this
package (``evaluator.episode``, ``evaluator.validation``), and an agent's client
that parses a task config must not pay for (or, in a sandbox that hides the
simulator, fail on) the whole evaluator with gRPC and the job store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ale_robotics.lazy import lazy_exports

if TYPE_CHECKING:
    from ale_robotics.evaluator.core import Evaluator, EvaluatorConfig
    from ale_robotics.evaluator.result import EvalResult
    from ale_robotics.evaluator.server import RunningEvaluator, serve

__all__ = ["EvalResult", "Evaluator", "EvaluatorConfig", "RunningEvaluator", "serve"]

_WHERE = {
    "EvalResult": "ale_robotics.evaluator.result",
    "Evaluator": "ale_robotics.evaluator.core",
    "EvaluatorConfig": "ale_robotics.evaluator.core",
    "RunningEvaluator": "ale_robotics.evaluator.server",
    "serve": "ale_robotics.evaluator.server",
}

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
