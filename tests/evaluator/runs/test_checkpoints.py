"""Checkpoints' pieces below the RPC: the snapshots the reclaim keeps, the seed commitments
of the preamble, the learning curve read from signed events, results stored before it; a
checkpoint taken by an in-process evaluator without evaluating it, evaluated on settle."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import random_weights
from safetensors.numpy import save_file

from ale_robotics.errors import FailedPreconditionError
from ale_robotics.evaluator import EvaluatorConfig
from ale_robotics.evaluator.batch.snapshot import RECLAIM_MIN_AGE_S, reclaim_snapshots
from ale_robotics.evaluator.core import Evaluator
from ale_robotics.evaluator.runs import checkpoints as checkpoints_module
from ale_robotics.evaluator.runs.checkpoints import (
    CheckpointRecord,
    checkpoint_log,
    checkpoint_task,
    failed_points,
    learning_curve,
    snapshot_dir,
)
from ale_robotics.evaluator.state.ledger import RunLedger
from ale_robotics.evaluator.store import SqliteJobStore
from ale_robotics.model.result import EvalResult
from ale_robotics.seeds import derive_seeds, new_secret
from ale_robotics.tasks import Registry, TaskSpec
from ale_robotics.trajectory import EvaluatorSigner

REPRO = "td3-walker2d-repro-v1"


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then), follow_symlinks=False)


def test_the_reclaim_keeps_checkpoint_snapshots_however_old(tmp_path: Path) -> None:
    """A checkpoint's snapshot is never a job's, and the audit re-runs it: it is kept,
    while an unknown dir as old is reclaimed as before."""
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    kept = snapshot_dir(snapshots, "0123456789abcdef")
    orphan = snapshots / "job-0123456789abcdef"
    for folder in (kept, orphan):
        folder.mkdir()
        (folder / "policy.safetensors").write_bytes(b"weights")
        _age(folder / "policy.safetensors", RECLAIM_MIN_AGE_S * 100)
        _age(folder, RECLAIM_MIN_AGE_S * 100)
    with SqliteJobStore(tmp_path / "jobs.sqlite3") as store:
        assert reclaim_snapshots(snapshots, store) == [orphan.name]
    assert kept.name == "ckpt-0123456789abcdef"
    assert (kept / "policy.safetensors").read_bytes() == b"weights"


def test_the_preamble_commits_to_the_checkpoint_seeds(
    tmp_path: Path, registry: Registry, task: TaskSpec
) -> None:
    repro = registry.get(REPRO)
    secret = new_secret()
    with SqliteJobStore(tmp_path / "jobs.sqlite3") as store:
        ledger = RunLedger(store, EvaluatorSigner.generate(), secret)
        ledger.event("run-a", repro, "note", {})
        ledger.event("run-b", task, "note", {})  # a task without checkpoints
        a = [json.loads(e) for e in store.events("run-a")][1]["payload"]
        b = [json.loads(e) for e in store.events("run-b")][1]["payload"]
    assert repro.training is not None and repro.training.checkpoints is not None
    seeds = derive_seeds(repro.training.checkpoints.base_seeds, "run-a", secret)
    assert a["checkpoint_seed_commitments"] == [s.commitment for s in seeds]
    assert [s.commitment for s in ledger.checkpoint_seeds(repro, "run-a")] == [
        s.commitment for s in seeds
    ]
    assert not set(a["seed_commitments"]) & set(a["checkpoint_seed_commitments"])
    assert "checkpoint_seed_commitments" not in b
    assert ledger.checkpoint_seeds(task, "run-b") == []


def test_the_checkpoint_task_runs_the_checkpoint_protocol_on_the_policy_only(
    registry: Registry, task: TaskSpec
) -> None:
    repro = registry.get(REPRO)
    ctask = checkpoint_task(repro)
    assert ctask.eval.base_seeds == [7301, 7302, 7303] and ctask.eval.episodes == 3
    assert ctask.eval.envs_per_shard == repro.eval.envs_per_shard
    assert ctask.contract is not None
    assert [f.role for f in ctask.contract.files] == ["policy"]
    assert ctask.contract.tensors == repro.contract.tensors  # type: ignore[union-attr]
    with pytest.raises(FailedPreconditionError, match="offers no checkpoints"):
        checkpoint_task(task)


def _event(kind: str, payload: dict[str, object]) -> dict[str, object]:
    return {"kind": kind, "payload": payload}


def test_the_learning_curve_is_the_signed_checkpoints_in_order() -> None:
    def record(index: int, steps: int, mean: float) -> dict[str, object]:
        return CheckpointRecord.model_validate(
            {
                "checkpoint_id": f"{index:016x}",
                "index": index,
                "client_token": f"t{index}",
                "files": {"policy.safetensors": f"{index:064x}"},
                "practice_steps": steps,
                "episodes": [
                    {
                        "index": 0,
                        "seed_commitment": "c" * 64,
                        "episode_return": mean,
                        "length": 10,
                        "terminated": True,
                    }
                ],
                "metrics": {"mean_return": mean, "std_return": 0.0},
            }
        ).model_dump(mode="json")

    events = [
        _event("seed_commitment", {}),
        _event("checkpoint", record(0, 0, -3.5)),
        _event("result", {}),
        _event("checkpoint", record(1, 500, 12.0)),
    ]
    curve = learning_curve(events)
    assert [(p.index, p.practice_steps, p.mean_return, p.episodes) for p in curve] == [
        (0, 0, -3.5, 1),
        (1, 500, 12.0, 1),
    ]
    assert curve[1].policy_sha256 == f"{1:064x}"
    assert learning_curve([_event("checkpoint", {"index": "not a record"})]) == []


def test_results_without_a_curve_load_with_an_empty_one() -> None:
    """A result of a task without checkpoints leaves the curve out: it reads as empty."""
    doc = {
        "job_id": "job-0123456789abcdef",
        "run_id": "run-1",
        "task_id": "td3-inverted-pendulum-v1",
        "task_config_sha256": "0" * 64,
        "state": "SUCCEEDED",
        "secret_sha256": "1" * 64,
        "evaluator_version": "0.4.0",
    }
    plain = EvalResult.model_validate_json(json.dumps(doc))
    assert plain.learning_curve == [] and plain.training is None


# ------------------------------------------------- taken now, evaluated later --

RUN = "run-ckpt-unit"


@pytest.fixture
def walker(tmp_path: Path, registry: Registry) -> Iterator[tuple[Evaluator, Path]]:
    """An in-process evaluator bound to one run of the walker task (no listeners)."""
    volume = tmp_path / "volume"
    volume.mkdir()
    ev = Evaluator(
        EvaluatorConfig(tmp_path / "state", volume, task_id=REPRO, run_id=RUN, workers=1),
        registry,
    )
    try:
        yield ev, volume
    finally:
        ev.stop()


def _policy(task: TaskSpec, folder: Path, seed: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    save_file(random_weights(task, seed=seed, scale=0.3), str(folder / "policy.safetensors"))


def test_a_checkpoint_is_answered_before_anything_is_evaluated(
    walker: tuple[Evaluator, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """SubmitCheckpoint only takes the checkpoint: no rollout runs before its answer, so no
    answer (its content, its time) can follow one. The rollouts run when the run's result
    is built (settle), in index order. Before, every answer waited for its rollouts."""
    ev, volume = walker
    task = ev.task(REPRO)
    calls: list[int] = []
    real = checkpoints_module.run_checkpoint

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(len(calls))
        return real(*args, **kwargs)

    monkeypatch.setattr(checkpoints_module, "run_checkpoint", counted)
    _policy(task, volume / "a", seed=1)
    _policy(task, volume / "b", seed=2)
    first = ev.submit_checkpoint(REPRO, RUN, "a", "t-a")
    assert calls == []  # answered, nothing evaluated
    second = ev.submit_checkpoint(REPRO, RUN, "b", "t-b")
    assert calls == []
    assert (first.index, first.checkpoints_left, second.index, second.checkpoints_left) == (
        0,
        49,
        1,
        48,
    )
    kinds = [e["kind"] for e in ev.ledger.events(RUN)]
    assert kinds[2:] == ["checkpoint_received", "checkpoint_received"]
    ev.checkpoints.settle(RUN, task)
    assert calls == [0, 1]
    assert [r.index for r in ev.checkpoints.records(RUN)] == [0, 1]
    ev.checkpoints.settle(RUN, task)  # nothing left: evaluated once
    assert calls == [0, 1]


def test_a_failure_of_the_evaluator_is_recorded_as_its_own(
    walker: tuple[Evaluator, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    ev, volume = walker
    task = ev.task(REPRO)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("out of something")

    monkeypatch.setattr(checkpoints_module, "run_checkpoint", broken)
    _policy(task, volume, seed=1)
    ev.submit_checkpoint(REPRO, RUN, "", "t")
    ev.checkpoints.settle(RUN, task)
    (failed,) = [e["payload"] for e in ev.ledger.events(RUN) if e["kind"] == "checkpoint_failed"]
    assert (failed["source"], failed["rule"]) == ("infrastructure", "evaluator_error")
    assert "not the policy's fault" in failed["reason"]
    assert failed_points(ev.ledger.events(RUN))[0].source == "infrastructure"


def _taken(index: int, **extra: object) -> dict[str, object]:
    return {
        "checkpoint_id": f"{index:016x}",
        "index": index,
        "client_token": f"t{index}",
        "files": {"policy.safetensors": f"{index:064x}"},
        "practice_steps": 10 * index,
        **extra,
    }


def test_the_checkpoint_log_reads_received_outcomes_and_older_runs() -> None:
    measured = {
        "episodes": [
            {
                "index": 0,
                "seed_commitment": "c" * 64,
                "episode_return": 5.0,
                "length": 5,
                "terminated": True,
            }
        ],
        "metrics": {"mean_return": 5.0, "std_return": 0.0},
    }
    failure = {"source": "submission", "rule": "non_finite_action", "reason": "nan"}
    events = [
        _event("checkpoint_received", _taken(0)),
        _event("checkpoint_received", _taken(1)),
        _event("checkpoint_received", _taken(2, files={}, rejected="policy.pt: missing")),
        _event("checkpoint", _taken(0, **measured)),
        _event("checkpoint_failed", _taken(1, **failure)),
    ]
    log = checkpoint_log(events)
    assert [r.index for r in log.received] == [0, 1, 2]
    assert [r.index for r in log.pending()] == [2]
    assert log.by_token("t1") is not None and log.by_token("t9") is None
    # the failure is no point of the curve (no return), only listed apart
    assert [p.index for p in learning_curve(events)] == [0]
    (failed,) = failed_points(events)
    assert (failed.index, failed.rule, failed.practice_steps) == (1, "non_finite_action", 10)
    assert failed.policy_sha256 == f"{1:064x}"
    # a run of a release before checkpoint_received: its checkpoint events stand in
    older = checkpoint_log([_event("checkpoint", _taken(0, **measured))])
    assert [r.index for r in older.received] == [0] and older.pending() == []
