"""The trusted evaluator: job store, snapshots, validation, native pipeline, gRPC service.

The names below are loaded on first use (PEP 562), not when the package is
imported: importing one small module of this package must not pay for the whole
evaluator with gRPC and the job store. The data it records and reports (episode
outcomes, job states, ``EvalResult``) is in :mod:`ale_robotics.model`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ale_robotics.lazy import lazy_exports

if TYPE_CHECKING:
    from ale_robotics.evaluator.core import Evaluator, EvaluatorConfig
    from ale_robotics.evaluator.server.listeners import RunningEvaluator, serve

__all__ = ["Evaluator", "EvaluatorConfig", "RunningEvaluator", "serve"]

_WHERE = {
    "Evaluator": "ale_robotics.evaluator.core",
    "EvaluatorConfig": "ale_robotics.evaluator.core",
    "RunningEvaluator": "ale_robotics.evaluator.server.listeners",
    "serve": "ale_robotics.evaluator.server.listeners",
}

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
