"""The score report carries the target's statistic and comparability notes next to the score."""

from __future__ import annotations

import json

import pytest

from ale_robotics.scoring import ScoreReport, score
from ale_robotics.tasks import default_registry
from ale_robotics.tasks.manifest import Statistic

IDP = "td3-inverted-double-pendulum-v1"


def test_report_carries_statistic_derivation_and_notes() -> None:
    reg = default_registry()
    target = reg.target(IDP)
    assert target is not None
    report = score(reg.get(IDP), {"mean_return": 8745.44}, target)
    assert report.score == pytest.approx(1.0)
    assert report.target_statistic is Statistic.FINAL_LAST_10_EVALUATIONS
    assert report.comparability == target.comparability
    assert report.target_derivation == target.derivation and "8745.4431" in report.target_derivation
    doc = json.loads(report.model_dump_json())
    assert "schema_version" not in doc  # result.json's version covers the score
    assert doc["target_statistic"] == "final_last_10_evaluations"
    assert doc["comparability"]["paper"]["env"] == "InvertedDoublePendulum-v1 (OpenAI gym)"
    assert doc["comparability"]["ours"]["env"] == "InvertedDoublePendulum-v5 (Gymnasium 1.4.0)"
    assert len(doc["comparability"]["notes"]) >= 2
    assert ScoreReport.model_validate_json(report.model_dump_json()) == report


def test_explanation_names_the_statistic_in_one_clause() -> None:
    reg = default_registry()
    for task_id in ("td3-hopper-v1", "tdmpc2-cheetah-run-v1"):
        target = reg.target(task_id)
        assert target is not None
        report = score(reg.get(task_id), {"mean_return": target.value / 2}, target)
        assert f"({target.statistic.clause}; {target.source.paper}" in report.explanation
        assert "\n" not in report.explanation
    assert "final performance, evaluation at the step budget" in report.explanation


def test_every_scored_task_report_has_its_notes() -> None:
    reg = default_registry()
    for task_id in reg.ids():
        target = reg.target(task_id)
        task = reg.get(task_id)
        report = score(task, {task.primary_metric.name: 1.0}, target)
        if target is None:
            assert report.target_statistic is None and report.comparability is None
        else:
            assert report.target_statistic is target.statistic and report.target_statistic.is_final
            assert report.comparability is not None and report.comparability.notes
