"""Scoring: normalize evaluator-measured metrics against paper targets.

The report models (:class:`ScoreReport` and its parts) are loaded on first use
(PEP 562): they need :mod:`ale_robotics.tasks`, whose spec module imports
:mod:`ale_robotics.scoring.config` while it is itself being imported, so an
eager import here would be circular. Everything else is imported eagerly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ale_robotics.scoring.config import (
    AlgorithmAllowlistCheck,
    ArchitectureCheck,
    BudgetCheck,
    Condition,
    DeclaredFinalValue,
    ExpectedTensor,
    FaithfulnessGate,
    GateCheck,
    LearningCurveCheck,
    SafetyPenalty,
    ScoringConfig,
)
from ale_robotics.scoring.gate import (
    MAX_EVIDENCE_BYTES,
    CheckResult,
    GateEvidence,
    GateOutcome,
    run_gate,
)
from ale_robotics.scoring.score import UNSCORED_PHRASE, check_scorable, penalty_factor, score

if TYPE_CHECKING:
    from ale_robotics.scoring.report import (
        ConditionResult,
        PenaltyResult,
        ScoreReport,
        ScoreStatus,
    )

__all__ = [
    "MAX_EVIDENCE_BYTES",
    "UNSCORED_PHRASE",
    "AlgorithmAllowlistCheck",
    "ArchitectureCheck",
    "BudgetCheck",
    "CheckResult",
    "Condition",
    "ConditionResult",
    "DeclaredFinalValue",
    "ExpectedTensor",
    "FaithfulnessGate",
    "GateCheck",
    "GateEvidence",
    "GateOutcome",
    "LearningCurveCheck",
    "PenaltyResult",
    "SafetyPenalty",
    "ScoreReport",
    "ScoreStatus",
    "ScoringConfig",
    "check_scorable",
    "penalty_factor",
    "run_gate",
    "score",
]

_LAZY = frozenset({"ConditionResult", "PenaltyResult", "ScoreReport", "ScoreStatus"})


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from ale_robotics.scoring import report

        return getattr(report, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
