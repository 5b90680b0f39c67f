"""Scoring settings a task config may carry; their home is :mod:`ale_robotics.tasks.scoring_config`.

Re-exported here, where scoring code and older imports look for them.
"""

from __future__ import annotations

from ale_robotics.tasks.scoring_config import (
    AlgorithmAllowlistCheck,
    ArchitectureCheck,
    BudgetCheck,
    Condition,
    ExpectedTensor,
    FaithfulnessGate,
    GateCheck,
    LearningCurveCheck,
    SafetyPenalty,
    ScoringConfig,
    check_name,
)

__all__ = [
    "AlgorithmAllowlistCheck",
    "ArchitectureCheck",
    "BudgetCheck",
    "Condition",
    "ExpectedTensor",
    "FaithfulnessGate",
    "GateCheck",
    "LearningCurveCheck",
    "SafetyPenalty",
    "ScoringConfig",
    "check_name",
]
