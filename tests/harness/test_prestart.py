"""The embedded evaluator's workers start before the harness loads the evaluator.

``prestarted_executor`` makes the local executor an embedded evaluator would open for
the run, with its workers starting, and ``serve``/``Evaluator`` take it as theirs; for
a run without an embedded local executor it makes nothing.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ale_robotics.evaluator.core import Evaluator, EvaluatorConfig
from ale_robotics.evaluator.execution import LocalExecutor
from ale_robotics.harness.options import RunOptions
from ale_robotics.harness.prestart import prestarted_executor
from ale_robotics.tasks import Registry, TaskSpec

_OPTS = RunOptions(task_id="td3-inverted-pendulum-v1", agent_cmd="true", workers=1)


def _wait_for_workers(ex: LocalExecutor, timeout: float = 60.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pids := ex.worker_pids():
            return pids
        time.sleep(0.01)
    raise AssertionError("no worker started")


@pytest.mark.parametrize(
    "change",
    [
        {"evaluator": "unix:///tmp/elsewhere/agent.sock"},
        {"evaluator_image": "ale-robotics/evaluator"},
        {"executor": "ray"},
    ],
)
def test_no_executor_without_an_embedded_local_one(task: TaskSpec, change: dict[str, str]) -> None:
    assert prestarted_executor(_OPTS.model_copy(update=change), task) is None


def test_the_executor_is_the_evaluators_with_its_workers_started(
    task: TaskSpec, registry: Registry, tmp_path: Path
) -> None:
    ex = prestarted_executor(_OPTS, task)
    assert isinstance(ex, LocalExecutor)
    try:
        assert ex.workers == 1
        (pid,) = _wait_for_workers(ex)  # started before any evaluator exists
        config = EvaluatorConfig(tmp_path / "state", tmp_path / "sub", task_id=task.id, workers=1)
        evaluator = Evaluator(config, registry, executor=ex)
        assert evaluator.pool is ex
        assert ex.prestart(task) == 0  # the evaluator's own prestart keeps them as they are
        assert ex.worker_pids() == [pid]
        evaluator.stop()
        assert ex.worker_pids() == []  # the evaluator owns it: its stop shuts it down
    finally:
        ex.shutdown()  # a second shutdown is harmless


def test_a_smoke_run_warms_up_for_the_smoke_task(task: TaskSpec) -> None:
    ex = prestarted_executor(_OPTS.model_copy(update={"episodes": 2}), task)
    assert ex is not None
    try:
        assert ex._warm_task_json is not None
        assert TaskSpec.model_validate_json(ex._warm_task_json).eval.episodes == 2
    finally:
        ex.shutdown()


def test_an_executor_of_another_kind_is_refused(registry: Registry, tmp_path: Path) -> None:
    config = EvaluatorConfig(tmp_path / "state", None, executor="ray")
    ex = LocalExecutor(1)
    with pytest.raises(ValueError, match="'local' executor for a 'ray' config"):
        Evaluator(config, registry, executor=ex)
