"""Evaluator replicas sharing one job store (``backend``) share what a run needs.

Each replica has a state dir of its own here (as on different hosts; the snapshot
test shares one, as replicas sharing a volume do), holding the first one's secret and
signing key (a store refuses replicas with others, :mod:`.store.identity`):

* a run opened with OpenRun on replica A is known to B, its token works there, and
  CloseRun on B refuses it on A at once (the registry is in the store, not in a
  ``runs.json`` per state dir);
* replicas writing a run's first events at once write one preamble
  (``evaluator_key``, ``seed_commitment``), at 0 and 1, then every event, with no
  gap;
* a submitted job's snapshot is in place under its id before the job exists, so a
  replica claiming it the moment it is queued finds its files.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import random_weights
from pg import pg_cluster
from safetensors.numpy import save_file
from stores import Backend, backend

from ale_robotics.errors import FailedPreconditionError
from ale_robotics.evaluator import Evaluator, EvaluatorConfig
from ale_robotics.model.states import JobState
from ale_robotics.tasks import Registry, TaskSpec
from ale_robotics.trajectory import EvaluatorSigner
from ale_robotics.trajectory.signing import SignedEvaluatorEvent

__all__ = ["backend", "pg_cluster"]

TASK_ID = "td3-inverted-pendulum-v1"

MakeEv = Callable[..., Evaluator]


@pytest.fixture
def make_ev(tmp_path: Path, registry: Registry, backend: Backend) -> Iterator[MakeEv]:
    made: list[Evaluator] = []

    def make(state: str, volume: Path | None = None, **config: Any) -> Evaluator:
        if made and not (tmp_path / state).exists():  # the first replica's secret and key
            (tmp_path / state).mkdir()
            for name in ("secret", "signing_key.pem"):
                (tmp_path / state / name).write_bytes((made[0].state.root / name).read_bytes())
                (tmp_path / state / name).chmod(0o600)
        cfg = EvaluatorConfig(
            tmp_path / state,
            volume,
            task_id=TASK_ID,
            workers=1,
            per_run_tokens=True,
            store_url=backend.url,
            **config,
        )
        ev = Evaluator(cfg, registry)
        made.append(ev)
        return ev

    yield make
    for ev in made:
        ev.stop()


def test_a_run_opened_on_one_replica_is_served_and_closed_by_another(make_ev: MakeEv) -> None:
    a, b = make_ev("a"), make_ev("b")
    opened = a.open_run("run-shared-1", TASK_ID)
    token = opened.agent_token.encode()
    on_b = b.runs.by_token(token)
    assert on_b is not None and on_b.run_id == "run-shared-1" and on_b.task_id == TASK_ID
    with pytest.raises(FailedPreconditionError, match="single use"):
        b.open_run("run-shared-1", TASK_ID)  # the id is taken on every replica
    assert a.runs.by_token(token) is not None
    b.close_run("run-shared-1")
    assert a.runs.by_token(token) is None  # refused on A at once
    run = a.runs.get("run-shared-1")
    assert run is not None and not run.open
    assert not (a.state.root / "runs.json").exists() and not (b.state.root / "runs.json").exists()


def test_replicas_racing_a_runs_first_events_write_one_preamble(
    make_ev: MakeEv, tmp_path: Path, task: TaskSpec
) -> None:
    a, b = make_ev("a"), make_ev("b")  # one secret and key for both (make_ev)
    writers, per_writer = 3, 4
    go = threading.Barrier(2 * writers)

    def write(ev: Evaluator, name: str) -> None:
        go.wait()
        for n in range(per_writer):
            ev.event("run-ev-1", task, "note", {"writer": name, "n": n})

    threads = [
        threading.Thread(target=write, args=(ev, f"{label}{k}"))
        for label, ev in (("a", a), ("b", b))
        for k in range(writers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    events = [json.loads(e) for e in b.store.events("run-ev-1")]
    kinds = [e["kind"] for e in events]
    assert kinds[:2] == ["evaluator_key", "seed_commitment"]
    assert kinds.count("evaluator_key") == 1 and kinds.count("seed_commitment") == 1
    assert kinds[2:] == ["note"] * (2 * writers * per_writer)
    assert [e["sig"]["eval_seq"] for e in events] == list(range(len(events)))
    public_key = EvaluatorSigner.load_or_create(a.state.signing_key_path).public_key_hex
    for e in events:
        SignedEvaluatorEvent.model_validate(e).verify(public_key)
    assert events[1]["payload"]["secret_sha256"] == a.secret_sha256 == b.secret_sha256


def test_a_jobs_snapshot_is_in_place_before_the_job_exists(
    make_ev: MakeEv, tmp_path: Path, task: TaskSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    volume = tmp_path / "vol"
    volume.mkdir()
    save_file(random_weights(task), str(volume / "policy.safetensors"))
    ev = make_ev("state", volume, run_id="run-snap-2")
    snapshots = ev.state.snapshots
    create = ev.store.create
    seen: list[tuple[str | None, list[str]]] = []

    def spy(**kw: Any) -> Any:
        job_id = kw.get("job_id")
        files = sorted(p.name for p in (snapshots / job_id).iterdir()) if job_id else []
        seen.append((job_id, files))
        return create(**kw)

    monkeypatch.setattr(ev.store, "create", spy)
    job, dedup = ev.submit("", "", "", "first")
    assert not dedup and job.state is JobState.QUEUED
    assert seen == [(job.job_id, ["policy.safetensors"])]  # there when the job was created
    again, dedup = ev.submit("", "", "", "first")  # a duplicate: its staged copy is removed
    assert dedup and again.job_id == job.job_id
    assert sorted(p.name for p in snapshots.iterdir()) == [job.job_id]
