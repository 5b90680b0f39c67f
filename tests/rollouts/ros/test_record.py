"""What a ``ros`` job records: its outcomes (the control loop's fields), their metrics, and
the schedules a re-run imposes. No graph here: outcomes are made by hand."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import numpy as np
import pydantic
import pytest
import ros_support

from ale_robotics.evaluator.results.metrics import HOST_TIMED, task_metrics
from ale_robotics.model.control_loop import ControlLoop
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.model.kind_registry import get_kind
from ale_robotics.model.outcomes import (
    BatchOutcomes,
    ControlLoopOutcomes,
    episode_outcomes,
)
from ale_robotics.model.snapshot import SnapshotFile
from ale_robotics.rollouts.ros.kind import SCHEDULE_KEY
from ale_robotics.submission.rejected import SubmissionRejected
from ale_robotics.tasks.contract import FileFormat

KIND = get_kind("ros")


def _loop(holds: tuple[tuple[int, int, int], ...], p99: float, start: float) -> ControlLoop:
    return ControlLoop(
        holds=holds,
        late=len(holds),
        missing=1,
        latency_p50_us=300.0,
        latency_p99_us=p99,
        latency_max_us=p99 * 2,
        max_tick_lag_us=150.0,
        graph_start_s=start,
    )


OUTCOMES = [
    EpisodeOutcome(0, 1000.0, 1000, False, control=_loop((), 900.0, 4.0)),
    EpisodeOutcome(1, 250.5, 200, True, control=_loop(((5, 2, 4), (50, 8, -1)), 2100.0, 6.0)),
]


def test_the_record_keeps_the_loop_and_gives_it_back() -> None:
    record = KIND.outcome_record([7401, 7402], OUTCOMES)
    assert isinstance(record, ControlLoopOutcomes) and record.backend == "ros"
    doc = json.loads(record.model_dump_json())
    assert doc["episodes"][1]["holds"] == [[5, 2, 4], [50, 8, -1]]
    assert doc["episodes"][1]["held_steps"] == 10
    again: Any = pydantic.TypeAdapter[Any](BatchOutcomes).validate_python(doc)
    assert again == record
    assert episode_outcomes(again) == OUTCOMES


def test_the_metrics_of_the_loop() -> None:
    task = ros_support.ros_task()
    metrics = task_metrics(OUTCOMES, task)
    assert metrics["held_command_rate"] == 10 / 1200
    assert metrics["command_latency_p50_ms"] == pytest.approx(0.3)
    assert metrics["command_latency_p99_ms"] == pytest.approx((0.9 + 2.1) / 2)
    assert metrics["graph_start_s"] == 5.0
    assert metrics["mean_return"] == (1000.0 + 250.5) / 2


def test_the_schedule_is_exact_and_the_timing_host_dependent() -> None:
    """An audit compares the held steps (a re-run imposes them) and only shows the timing."""
    assert {"command_latency_p50_ms", "command_latency_p99_ms", "graph_start_s"} <= HOST_TIMED
    assert "held_command_rate" not in HOST_TIMED
    entry = type(KIND.outcome_record([1, 2], OUTCOMES).entries()[0])
    assert {"holds", "held_steps", "episode_return", "length"}.isdisjoint(entry.host_dependent)
    assert {"late_commands", "missing_commands", "graph_start_s"} <= entry.host_dependent


def test_an_outcome_without_a_loop_has_no_loop_metrics() -> None:
    """Nothing is invented for an episode the loop did not measure."""
    bare = [EpisodeOutcome(0, 10.0, 5, True)]
    record = KIND.outcome_record([1], bare)
    assert record.entries()[0].holds is None  # type: ignore[union-attr]
    metrics = task_metrics(episode_outcomes(record), ros_support.ros_task())
    assert "held_command_rate" not in metrics and "graph_start_s" not in metrics


def test_a_rerun_imposes_each_signed_schedule() -> None:
    task = ros_support.ros_task()
    weights = ros_support.weights(task)
    record = KIND.outcome_record([1, 2], OUTCOMES)
    rerun = KIND.rerun_artifact(weights, record)
    assert rerun[f"{SCHEDULE_KEY}0"].shape == (0, 3)
    assert rerun[f"{SCHEDULE_KEY}1"].tolist() == [[5, 2, 4], [50, 8, -1]]
    assert {k: v for k, v in rerun.items() if not k.startswith(SCHEDULE_KEY)} == weights
    assert get_kind("gymnasium").rerun_artifact(weights, record) is weights  # the default


def test_a_submission_cannot_bring_a_schedule(tmp_path: Any) -> None:
    """The schedule keys are the evaluator's: a submission holding one fails the contract's
    exact key set, so no agent chooses which of its steps an episode holds."""
    from safetensors.numpy import save_file

    task = ros_support.ros_task()
    assert task.contract is not None
    weights = ros_support.weights(task)
    weights[f"{SCHEDULE_KEY}0"] = np.zeros((1000, 3), dtype=np.int64)
    path = tmp_path / "policy.safetensors"
    save_file(weights, str(path))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    file = SnapshotFile("policy", "policy.safetensors", FileFormat.SAFETENSORS, path, digest)
    with pytest.raises(SubmissionRejected, match=re.escape(f"{SCHEDULE_KEY}0")):
        KIND.load_artifact([file], task)
