"""The task config's ``training`` section: where training simulates, and checkpoints.

Each rule is checked on the shipped configs it was written for, edited one field at a
time, so that a refusal is tied to the field that broke it. The walker2d config's
``scoring`` section is left out of the edited copies: the gate's own rules are tested
with the gate (tests/scoring), and none of these depends on it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from ale_robotics.tasks import TaskMode, default_registry
from ale_robotics.tasks.spec import CheckpointSettings, TaskSpec, TrainingSettings

CONFIGS = Path(__file__).resolve().parents[2] / "src" / "ale_robotics" / "tasks" / "configs"
REPRO = "td3-walker2d-repro-v1"
EVALUATOR_SIDE = {
    REPRO,
    "td3-walker2d-repro-v2",
    "td3-walker2d-repro-v3",
    "tdmpc2-cheetah-run-v1",
    "tdmpc2-walker-run-v1",
    "tdmpc2-mw-push-v1",
    "tdmpc2-cheetah-run-v2",
    "tdmpc2-walker-run-v2",
    "tdmpc2-mw-push-v2",
}


def _config(task_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIGS / f"{task_id}.json").read_text(encoding="utf-8"))
    data.pop("scoring", None)
    return data


def _refused(data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as err:
        TaskSpec.model_validate(data)
    return str(err.value)


def test_shipped_configs_declare_where_they_train() -> None:
    """The four tasks whose evidence must be the evaluator's keep the simulator there; the
    reproduction task also takes checkpoints, disjoint from its evaluation seeds."""
    for task_id in EVALUATOR_SIDE:
        task = TaskSpec.model_validate(_config(task_id))
        assert task.training is not None and task.training.simulator == "evaluator", task_id
        assert task.simulator_in_evaluator and task.evaluator_counts_training
        assert task.offers_practice_sessions, task_id
    repro = TaskSpec.model_validate(_config(REPRO))
    assert repro.mode is TaskMode.BATCH and not repro.offers_eval_sessions
    assert repro.training is not None
    assert repro.training.checkpoints == CheckpointSettings(
        episodes=3, base_seeds=[7301, 7302, 7303], max_checkpoints=50
    )
    assert not set(repro.training.checkpoints.base_seeds) & set(repro.eval.base_seeds)
    assert repro.session is not None and repro.session.practice_allowed
    for word in ("practice sessions", "SubmitCheckpoint", "cannot be imported"):
        assert word in repro.description, word


def test_other_tasks_keep_the_simulator_on_the_agent_side() -> None:
    reg = default_registry()
    for task_id in reg.ids():
        if task_id in EVALUATOR_SIDE:
            continue
        task = TaskSpec.model_validate(_config(task_id))
        assert task.training is None and not task.simulator_in_evaluator, task_id
        assert task.offers_eval_sessions == (task.mode is TaskMode.INTERACTIVE)
        if task.mode is not TaskMode.INTERACTIVE:
            assert not task.offers_practice_sessions and not task.evaluator_counts_training


def test_training_defaults_to_the_agent_side_without_checkpoints() -> None:
    assert TrainingSettings() == TrainingSettings(simulator="agent", checkpoints=None)
    with pytest.raises(ValidationError, match="simulator"):
        TrainingSettings.model_validate({"simulator": "cloud"})
    with pytest.raises(ValidationError, match="extra"):
        TrainingSettings.model_validate({"simulator": "agent", "checkpoint": {}})


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"episodes": 2, "base_seeds": [1, 2, 3]}, "has 3 entries; training.checkpoints.episodes"),
        ({"episodes": 2, "base_seeds": [5, 5]}, "base_seeds must be distinct"),
        ({"episodes": 0, "base_seeds": []}, "greater than 0"),
        ({"episodes": 1, "base_seeds": [1], "max_checkpoints": 0}, "greater than 0"),
    ],
)
def test_checkpoint_settings_are_refused_with_the_field_named(
    settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        CheckpointSettings.model_validate(settings)


def test_checkpoint_seeds_must_not_be_evaluation_seeds() -> None:
    data = _config(REPRO)
    data["training"]["checkpoints"]["base_seeds"] = [7301, 7205, 7209]  # 7205, 7209: eval's
    message = _refused(data)
    assert "training.checkpoints.base_seeds [7205, 7209] are also eval.base_seeds" in message


def test_evaluator_side_training_needs_practice_sessions() -> None:
    data = _config(REPRO)
    del data["session"]
    assert "give the task a 'session' section with practice_allowed true" in _refused(data)
    data = _config("tdmpc2-cheetah-run-v1")
    data["session"]["practice_allowed"] = False
    assert "can only train through practice sessions" in _refused(data)


def test_a_batch_task_offers_no_session_unless_the_evaluator_simulates() -> None:
    data = _config(REPRO)
    data["training"] = {"simulator": "agent"}
    message = _refused(data)
    assert "a batch task offers no sessions, so its 'session' settings would be ignored" in message
    del data["session"]
    assert TaskSpec.model_validate(data).offers_practice_sessions is False


def test_checkpoints_need_a_batch_task_with_a_policy_and_the_evaluator_simulator() -> None:
    ckpt = {"episodes": 1, "base_seeds": [99]}
    hopper = _config("td3-hopper-v1")  # interactive
    hopper["training"] = {"simulator": "evaluator", "checkpoints": ckpt}
    assert "apply only to batch tasks with a 'policy'" in _refused(hopper)

    trajset = _config("fetch-pickplace-trajset-v1")  # batch, no policy (replayed actions)
    assert trajset["mode"] == "batch" and "policy" not in trajset
    trajset["training"] = {"simulator": "evaluator", "checkpoints": ckpt}
    trajset["session"] = copy.deepcopy(_config(REPRO)["session"])
    assert "not to a batch task without one" in _refused(trajset)

    agent_side = _config(REPRO)
    del agent_side["session"]
    agent_side["training"]["simulator"] = "agent"
    message = _refused(agent_side)
    assert "training.checkpoints need training.simulator 'evaluator'" in message


def test_round_trip_keeps_the_training_section() -> None:
    task = TaskSpec.model_validate(_config(REPRO))
    again = TaskSpec.model_validate_json(task.model_dump_json())
    assert again == task and again.training == task.training


def test_the_budget_of_an_evaluator_side_batch_task_is_counted_and_enforced() -> None:
    """Its agent can only train in practice sessions, so the evaluator counts its budget
    as for an interactive task (a batch task that simulates on its own side: declared)."""
    reg = default_registry()
    repro = reg.training_budget(REPRO)
    assert repro is not None and repro.enforced
    assert (repro.steps, repro.agent_steps, repro.action_repeat) == (1_000_000, 1_000_000, 1)
    assert "declared, not counted" not in repro.describe()
    assert "one env of one Step call of a practice session" in repro.describe()
    pendulum = reg.training_budget("td3-inverted-pendulum-v1")
    assert pendulum is not None and not pendulum.enforced
