"""EvalResult schema 2: typed per-episode outcomes per backend, `official` vs
`read_on_harness_channel`, and version 1 results still read (issue 13, point 4)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from ale_robotics.evaluator.batch.pipeline import summarize
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.model.outcomes import (
    PlanningOutcomes,
    ReplayOutcomes,
    RolloutOutcomes,
    batch_outcomes,
    episode_outcomes,
)
from ale_robotics.model.result import EvalResult

BASE: dict[str, Any] = {
    "job_id": "j",
    "run_id": "r",
    "task_id": "t",
    "task_config_sha256": "0" * 64,
    "state": "SUCCEEDED",
    "secret_sha256": "1" * 64,
    "evaluator_version": "0",
}
PLANNING = [
    EpisodeOutcome(0, 1.0, 40, True, success=True, collided=False, planning_time_s=0.25, reason=""),
    EpisodeOutcome(
        1, 0.0, 7, False, success=False, collided=True, planning_time_s=0.5, reason="collision"
    ),
    EpisodeOutcome(
        2, 0.0, 0, False, success=False, collided=False, planning_time_s=7.0, reason="no path"
    ),
]
REPLAY = [
    EpisodeOutcome(3, -12.0, 50, False, success=True, final_distance=0.01),
    EpisodeOutcome(5, -50.0, 50, False, success=False, final_distance=0.3),
]
ROLLOUT = [EpisodeOutcome(0, 10.5, 11, True), EpisodeOutcome(1, 1000.0, 1000, False)]
METRICS = ["success_rate", "collision_rate", "planning_time", "mean_cost"]


@pytest.mark.parametrize(
    ("backend", "outcomes", "model"),
    [
        ("planner", PLANNING, PlanningOutcomes),
        ("edmp", PLANNING, PlanningOutcomes),
        ("replay", REPLAY, ReplayOutcomes),
        ("gymnasium", ROLLOUT, RolloutOutcomes),
        ("mujoco_rollout", ROLLOUT, RolloutOutcomes),
    ],
)
def test_outcomes_are_typed_by_backend_and_give_back_the_metrics(
    backend: str, outcomes: list[EpisodeOutcome], model: type
) -> None:
    typed = batch_outcomes(backend, list(range(100, 110)), outcomes)
    assert isinstance(typed, model) and typed.backend == backend
    # through JSON (as result.json and the signed event hold them) and back: the same metrics
    result = EvalResult.model_validate_json(EvalResult(**BASE, outcomes=typed).model_dump_json())
    assert result.outcomes == typed
    assert summarize(episode_outcomes(typed), METRICS) == summarize(outcomes, METRICS)
    if isinstance(typed, ReplayOutcomes):
        assert [i.instance for i in typed.instances] == [103, 105]  # public, never hidden


def test_a_planning_backend_must_report_its_measurements() -> None:
    with pytest.raises(ValueError, match="episode 0: the backend reported no planning_time_s"):
        batch_outcomes(
            "planner", [], [EpisodeOutcome(0, 1.0, 1, True, success=True, collided=False)]
        )


def test_new_results_are_not_official_by_default_and_carry_no_version() -> None:
    """The documents that hold a result version it (result.json, the store, the protocol)."""
    result = EvalResult(**BASE)
    assert "schema_version" not in result.model_dump()
    assert result.official is False and result.read_on_harness_channel is False
    assert result.outcomes is None


def test_a_result_with_a_version_of_its_own_is_refused() -> None:
    """No reader of the unreleased layouts that had one: such a document is not ours."""
    with pytest.raises(ValidationError, match="schema_version"):
        EvalResult.model_validate({**BASE, "schema_version": 1, "official": True})
