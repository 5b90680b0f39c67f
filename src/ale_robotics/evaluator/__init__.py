"""The trusted evaluator: job store, snapshots, validation, native pipeline, gRPC service."""

from ale_robotics.evaluator.core import Evaluator, EvaluatorConfig
from ale_robotics.evaluator.result import EvalResult
from ale_robotics.evaluator.server import RunningEvaluator, serve

__all__ = ["EvalResult", "Evaluator", "EvaluatorConfig", "RunningEvaluator", "serve"]
