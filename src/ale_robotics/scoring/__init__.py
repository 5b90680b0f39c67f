"""Scoring: normalize evaluator-measured metrics against paper targets."""

from ale_robotics.scoring.config import ScoringConfig

__all__ = ["ScoringConfig"]
