"""Evaluator and harness evidence of the scoring tests: a faithful run and issue 17's forgery."""

from __future__ import annotations

from ale_robotics.scoring import CurveEvidence, EvaluatorEvidence, HarnessEvidence

__all__ = ["EVALUATOR", "FORGED_EVALUATOR", "HARNESS", "POLICY_SHA"]

POLICY_SHA = "ab" * 32
"""SHA-256 of the submitted policy in the default evidence (the last checkpoint's too)."""

EVALUATOR = EvaluatorEvidence(
    practice_steps=1_000_000,
    practice_steps_budget=1_000_000,
    curve=[
        CurveEvidence(practice_steps=400_000, mean_return=2100.0, policy_sha256="01" * 32),
        CurveEvidence(practice_steps=700_000, mean_return=3900.0, policy_sha256="02" * 32),
        CurveEvidence(practice_steps=1_000_000, mean_return=4500.0, policy_sha256=POLICY_SHA),
    ],
    submitted_policy_sha256=POLICY_SHA,
)
"""What the evaluator observed of a faithful 1M-step run: three checkpoints, the last one
the submitted policy."""

HARNESS = HarnessEvidence(
    wall_s=3000.0, wall_budget_s=3600.0, agent_cpu_s=2900.0, cpu_budget_s=None
)
"""What the harness measured of that run's agent (no CPU budget)."""

FORGED_EVALUATOR = EvaluatorEvidence(
    practice_steps=0, practice_steps_budget=1_000_000, curve=[], submitted_policy_sha256=POLICY_SHA
)
"""The forged agent of issue 17: no practice step, no checkpoint, whatever its files say."""
