"""Smoke runs (`ale-robotics run --episodes N`): the first N episodes, labelled everywhere."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ale_robotics.errors import InvalidArgumentError
from ale_robotics.evaluator import Evaluator, EvaluatorConfig
from ale_robotics.evaluator.batch.smoke import smoke_run, smoke_task
from ale_robotics.evaluator.sessions.types import SessionKind
from ale_robotics.harness.run import RunOptions, run_task
from ale_robotics.model.result import SmokeRun
from ale_robotics.tasks import default_registry

REG = default_registry()
TASK = "td3-hopper-v1"


def test_smoke_task_keeps_the_first_base_seeds() -> None:
    task = REG.get(TASK)
    small = smoke_task(task, 3)
    assert small.eval.episodes == 3 and small.eval.base_seeds == task.eval.base_seeds[:3]
    assert smoke_task(task, 99).eval == task.eval
    assert smoke_run(task, 3) == SmokeRun(episodes=3, of=10)
    with pytest.raises(ValueError, match="at least 1"):
        smoke_task(task, 0)


def test_a_replay_task_keeps_its_instances_and_replays_fewer() -> None:
    task = REG.get("fetch-pickplace-trajset-v1")
    small = smoke_task(task, 2)
    assert small.eval.base_seeds == task.eval.base_seeds and small.eval.evaluated_episodes == 2
    assert smoke_run(task, 2).of == task.eval.evaluated_episodes


def test_smoke_evaluator_serves_the_short_task_and_labels_its_result(tmp_path: Path) -> None:
    ev = Evaluator(EvaluatorConfig(tmp_path / "s", None, workers=1, smoke_episodes=2), REG)
    full = Evaluator(EvaluatorConfig(tmp_path / "s", None, workers=1), REG)  # same secret
    try:
        task = ev.task(TASK)
        assert task.eval.episodes == 2 and full.task(TASK).eval.episodes == 10
        seeds = ev.hidden_seeds(task, "run-smoke")
        assert seeds == full.hidden_seeds(full.task(TASK), "run-smoke")[:2]
        s = ev.sessions.open(task, SessionKind.EVAL, 2, "run-smoke")
        assert s.budget == 2
        s.reset([])
        while not s.eval_complete:
            s.step(np.zeros(s.action_shape, s.action_dtype))
        result = ev.result("", "run-smoke")
    finally:
        ev.stop()
        full.stop()
    assert result.state == "SUCCEEDED" and len(result.episodes) == 2
    assert result.smoke_run == SmokeRun(episodes=2, of=10)
    final = [e for e in result.events if e["kind"] == "result"][-1]
    assert final["payload"]["smoke_run"] == {"episodes": 2, "of": 10}


def test_smoke_episodes_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        EvaluatorConfig(tmp_path, None, smoke_episodes=0)


def test_episodes_needs_the_embedded_evaluator(tmp_path: Path) -> None:
    opts = RunOptions(TASK, "true", run_dir=tmp_path / "r", evaluator="unix:///x", episodes=2)
    with pytest.raises(InvalidArgumentError, match="smoke run"):
        run_task(opts)  # refused before anything is created
    assert not (tmp_path / "r").exists()
