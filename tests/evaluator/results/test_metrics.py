"""Metrics computed by name from episode outcomes, and per-episode success in eval sessions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from ale_robotics.evaluator import Evaluator, EvaluatorConfig
from ale_robotics.evaluator.batch.pipeline import summarize
from ale_robotics.evaluator.results.metrics import METRICS, compute
from ale_robotics.evaluator.sessions.types import SessionKind
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.tasks import Registry, TaskMode, default_registry

OUTCOMES = [EpisodeOutcome(0, -4.0, 50, False), EpisodeOutcome(1, -2.0, 50, False)]


def test_summarize_keeps_its_outputs_and_adds_declared_metrics() -> None:
    base = summarize(OUTCOMES)
    assert base == {"mean_return": -3.0, "std_return": 1.0, "mean_episode_length": 50.0}
    assert summarize(OUTCOMES, ["mean_cost"]) == {**base, "mean_cost": 3.0}
    assert summarize(OUTCOMES, ["no_such_metric"]) == base  # configs are checked instead


def test_success_rate_needs_success_on_every_outcome() -> None:
    mixed = [EpisodeOutcome(0, 1.0, 5, True, success=True), EpisodeOutcome(1, 1.0, 5, True)]
    assert "success_rate" not in compute(mixed, ["success_rate"])
    both = [mixed[0], EpisodeOutcome(1, 1.0, 5, True, success=False)]
    assert compute(both)["success_rate"] == 0.5


def test_non_finite_metrics_are_refused() -> None:
    with pytest.raises(ValueError, match="non-finite"):
        compute([EpisodeOutcome(0, float("nan"), 1, True)])


@pytest.mark.parametrize("task_id", default_registry().ids())
def test_every_declared_metric_can_be_computed(task_id: str) -> None:
    """What the evaluator measures is computed by name, so a declared name must exist."""
    task = default_registry().get(task_id)
    if task.mode not in (TaskMode.BATCH, TaskMode.INTERACTIVE):
        pytest.skip("not measured from episode outcomes")
    unknown = {m.name for m in task.metrics} - set(METRICS)
    assert not unknown, f"{task_id} declares metrics the evaluator cannot compute: {unknown}"


class _SucceedWhenPushed(gym.Env[Any, Any]):
    """Reports info['success'] = (last action > 0); 3 steps per episode."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action: Any) -> Any:
        return np.zeros(1, np.float32), 1.0, False, False, {"success": bool(action[0] > 0)}


gym.register("ale-test/SucceedWhenPushed-v0", entry_point=_SucceedWhenPushed)


def test_eval_session_records_success_at_the_last_step(tmp_path: Path) -> None:
    data = json.loads(default_registry().entry("td3-inverted-double-pendulum-v1").raw)
    data["env"] = {"gym_id": "ale-test/SucceedWhenPushed-v0", "max_episode_steps": 3}
    data["eval"].update(episodes=3, base_seeds=[1, 2, 3])
    data["metrics"] = [
        {"name": "success_rate", "direction": "higher_is_better", "role": "primary"},
    ]
    reg = Registry({"t.json": json.dumps(data).encode()})
    ev = Evaluator(EvaluatorConfig(tmp_path / "state", None, workers=1), reg)
    try:
        task = ev.task(data["id"])
        s = ev.sessions.open(task, SessionKind.EVAL, 1, "run-success")
        s.reset([])
        for push in (1.0, 1.0, -1.0, 1.0, 1.0, 1.0, 1.0):  # ep 0: fails at the last step
            s.step(np.array([[push]], np.float32))  # ep 1: succeeds (after an autoreset step)
        s.step(np.array([[1.0]], np.float32))  # ep 2 starts (autoreset), then one step
        s.step(np.array([[1.0]], np.float32))
        ev.sessions.close(s.id)  # ep 2 is abandoned: a failure, though its last step succeeded
        result = ev.result("", "run-success")
    finally:
        ev.stop()
    assert result.state == "SUCCEEDED"
    assert [e.success for e in result.episodes] == [False, True, False]
    assert [e.abandoned for e in result.episodes] == [False, False, True]
    assert result.metrics["success_rate"] == pytest.approx(1 / 3)
