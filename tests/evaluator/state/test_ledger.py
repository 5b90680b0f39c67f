"""The run ledger (evaluator/state/ledger.py): the secret's only holder, the preamble written once.

Every later event of a run is checked against its first two (the key, the seed
commitment), so they must open the run's log exactly once and commit to the
seeds the ledger derives from its own secret.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ale_robotics import __version__
from ale_robotics.evaluator.state.ledger import RunLedger
from ale_robotics.evaluator.store import SqliteJobStore
from ale_robotics.model.states import JobState
from ale_robotics.seeds import derive_seeds, new_secret, secret_commitment
from ale_robotics.submission.rejected import SubmissionRejected
from ale_robotics.tasks import TaskSpec
from ale_robotics.trajectory import EvaluatorSigner, InvalidEventError, SignedEvaluatorEvent

RUN = "run-ledger-1"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteJobStore]:
    with SqliteJobStore(tmp_path / "jobs.sqlite3") as s:
        yield s


@pytest.fixture
def signer() -> EvaluatorSigner:
    return EvaluatorSigner.generate()


def _events(store: SqliteJobStore, run_id: str = RUN) -> list[dict[str, Any]]:
    return [json.loads(e) for e in store.events(run_id)]


def test_the_preamble_opens_each_run_once(
    store: SqliteJobStore, signer: EvaluatorSigner, task: TaskSpec
) -> None:
    secret = new_secret()
    ledger = RunLedger(store, signer, secret)
    assert ledger.event(RUN, task, "first", {"n": 1})
    assert ledger.event(RUN, task, "second", {"n": 2})
    events = _events(store)
    assert [e["kind"] for e in events] == [
        "evaluator_key",
        "seed_commitment",
        "first",
        "second",
    ]
    assert [e["sig"]["eval_seq"] for e in events] == [0, 1, 2, 3]
    for e in events:
        SignedEvaluatorEvent.model_validate(e).verify(signer.public_key_hex)
    key, commitment = events[0]["payload"], events[1]["payload"]
    assert key == {**signer.key_event_payload(), "evaluator_version": __version__}
    assert list(commitment) == ["task_id", "secret_sha256", "seed_commitments"]
    assert commitment["task_id"] == task.id
    assert commitment["secret_sha256"] == secret_commitment(secret) == ledger.secret_sha256
    assert commitment["seed_commitments"] == [
        s.commitment for s in derive_seeds(task.eval.base_seeds, RUN, secret)
    ]
    # another run gets a preamble of its own, with its own seeds
    ledger.event("run-ledger-2", task, "first", {})
    other = _events(store, "run-ledger-2")
    assert [e["kind"] for e in other] == ["evaluator_key", "seed_commitment", "first"]
    assert other[1]["payload"]["seed_commitments"] != commitment["seed_commitments"]
    assert ledger.events(RUN) == events and ledger.has_events(RUN)
    assert not ledger.has_events("run-never")


def test_seeds_come_from_the_ledgers_secret(
    store: SqliteJobStore, signer: EvaluatorSigner, task: TaskSpec
) -> None:
    secret = new_secret()
    ledger = RunLedger(store, signer, secret)
    assert ledger.hidden_seeds(task, RUN) == derive_seeds(task.eval.base_seeds, RUN, secret)
    other = RunLedger(store, signer, new_secret())
    assert [s.value for s in other.hidden_seeds(task, RUN)] != [
        s.value for s in ledger.hidden_seeds(task, RUN)
    ]
    assert not hasattr(ledger, "secret")  # the raw secret is never offered


def test_an_event_of_a_job_no_longer_held_is_refused(
    store: SqliteJobStore, signer: EvaluatorSigner, task: TaskSpec
) -> None:
    ledger = RunLedger(store, signer, new_secret())
    job, _ = store.create(
        run_id=RUN, task_id=task.id, client_token="t", episodes_total=1, files={}
    )  # queued: nobody holds it
    assert not ledger.event(RUN, task, "validation", {"job_id": job.job_id}, held_job=job.job_id)
    assert not [e for e in _events(store) if e["kind"] == "validation"]
    held, _ = store.create(
        run_id=RUN,
        task_id=task.id,
        client_token="u",
        episodes_total=1,
        files={},
        state=JobState.RUNNING,
    )
    assert ledger.event(RUN, task, "validation", {"job_id": held.job_id}, held_job=held.job_id)
    assert _events(store)[-1]["payload"] == {"job_id": held.job_id}


def test_the_rejection_event_names_the_file_and_the_rule(
    store: SqliteJobStore, signer: EvaluatorSigner, task: TaskSpec
) -> None:
    ledger = RunLedger(store, signer, new_secret())
    exc = SubmissionRejected("policy.safetensors", "no symlinks", "is a symlink")
    ledger.rejection_event(RUN, task, "job-1", exc)
    last = _events(store)[-1]
    assert last["kind"] == "validation"
    assert last["payload"] == {
        "job_id": "job-1",
        "passed": False,
        "file": "policy.safetensors",
        "rule": "no symlinks",
        "reason": str(exc),
    }


def test_a_key_event_at_another_position_is_refused(signer: EvaluatorSigner) -> None:
    """What the ledger's preamble makers rely on when the store hands them eval_seq."""
    assert signer.for_run(RUN, 0).key_event(extra={"evaluator_version": "x"}).sig.eval_seq == 0
    with pytest.raises(InvalidEventError, match="eval_seq 0"):
        signer.for_run(RUN, 2).key_event()
    with pytest.raises(InvalidEventError, match="replace the key's own"):
        signer.for_run(RUN, 0).key_event(extra={"public_key": "00" * 32})
