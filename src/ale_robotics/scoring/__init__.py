"""Scoring: normalize evaluator-measured metrics against paper targets.

This package sits above the task model (:mod:`ale_robotics.tasks`), which
imports nothing from it: the scoring settings a task config carries live in
:mod:`ale_robotics.tasks.scoring_config`, imported from there.
"""

from __future__ import annotations

from ale_robotics.scoring.gate import (
    EVIDENCE_WORDS,
    CheckResult,
    CurveEvidence,
    EvaluatorEvidence,
    EvidenceKind,
    GateEvidence,
    GateOutcome,
    HarnessEvidence,
    run_gate,
)
from ale_robotics.scoring.gate_checks import MAX_EVIDENCE_BYTES
from ale_robotics.scoring.report import (
    ConditionResult,
    PenaltyResult,
    ScoreReport,
    ScoreStatus,
)
from ale_robotics.scoring.score import UNSCORED_PHRASE, check_scorable, penalty_factor, score

__all__ = [
    "EVIDENCE_WORDS",
    "MAX_EVIDENCE_BYTES",
    "UNSCORED_PHRASE",
    "CheckResult",
    "ConditionResult",
    "CurveEvidence",
    "EvaluatorEvidence",
    "EvidenceKind",
    "GateEvidence",
    "GateOutcome",
    "HarnessEvidence",
    "PenaltyResult",
    "ScoreReport",
    "ScoreStatus",
    "check_scorable",
    "penalty_factor",
    "run_gate",
    "score",
]
