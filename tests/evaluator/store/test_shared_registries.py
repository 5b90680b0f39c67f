"""The run registry and the training ledger on a shared store: what every replica sees.

Each case runs on every store kind (``backend``) with one store per simulated
replica: a run opened on one replica is known to all, its token works on all and
is refused by all from the moment any one closes it; practice steps charged on any
replica count against the one budget, which no number of replicas charging at
once can pass. Files of releases before the store kept them are imported once.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import pytest
from stores import Backend

from ale_robotics.errors import FailedPreconditionError, ResourceExhaustedError
from ale_robotics.evaluator.runs.registry import RunRegistry
from ale_robotics.evaluator.runs.training_budget import TrainingLedger
from ale_robotics.tasks.registry import TrainingBudget
from ale_robotics.tasks.spec import TrainingStepUnit


def _budget(steps: int, *, enforced: bool = True) -> TrainingBudget:
    return TrainingBudget(
        steps=steps,
        unit=TrainingStepUnit.AGENT_STEP,
        action_repeat=1,
        simulator="mujoco",
        enforced=enforced,
    )


# -------------------------------------------------------------------- runs --


def test_a_run_opened_on_one_replica_works_on_the_other(backend: Backend, tmp_path: Path) -> None:
    volume = tmp_path / "vol"
    volume.mkdir()
    a, b = RunRegistry(backend.open(owner="a")), RunRegistry(backend.open(owner="b"))
    assert not b.known("run-1") and b.get("run-1") is None
    opened = a.open("run-1", "task-v1", volume)
    assert opened.agent_token and opened.submission_dir == volume / "run-1"
    assert opened.submission_dir.is_dir()
    assert b.known("run-1")
    seen = b.by_token(opened.agent_token.encode())
    assert seen is not None and seen.run_id == "run-1" and seen.task_id == "task-v1"
    assert seen.agent_token == ""  # never stored, never handed out again
    assert seen.submission_dir == volume / "run-1" and seen.open
    assert b.get("run-1") == seen
    assert b.by_token(b"not-a-token") is None


def test_no_run_is_answered_without_asking_the_store(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session outside any run has run id "": checked on every Step, never a stored run."""
    store = backend.open(owner="a")
    runs = RunRegistry(store)
    asked: list[str] = []
    real = store.get_run

    def get_run(run_id: str):  # type: ignore[no-untyped-def]
        asked.append(run_id)
        return real(run_id)

    monkeypatch.setattr(store, "get_run", get_run)
    assert not runs.known("") and runs.get("") is None
    assert asked == []
    assert not runs.known("run-9")  # any other id is read from the store, every replica's
    assert asked == ["run-9"]


def test_closing_a_run_on_one_replica_refuses_its_token_on_every_other_at_once(
    backend: Backend,
) -> None:
    a, b = RunRegistry(backend.open(owner="a")), RunRegistry(backend.open(owner="b"))
    token = a.open("run-1", "task-v1", None).agent_token.encode()
    assert a.by_token(token) is not None  # a has looked it up: nothing of it may linger
    current = a.get("run-1")
    assert current is not None and current.open
    closed = b.close("run-1")
    assert not closed.open and closed.closed_unix > 0
    assert a.by_token(token) is None
    got = a.get("run-1")
    assert got is not None and not got.open  # a sees it closed at once, not its old copy
    assert a.known("run-1")  # still known: its id stays used
    assert a.close("run-1") == got  # idempotent, on any replica
    with pytest.raises(FailedPreconditionError, match="never opened"):
        a.close("run-2")


def test_a_run_id_is_single_use_across_replicas(backend: Backend, tmp_path: Path) -> None:
    a, b = RunRegistry(backend.open(owner="a")), RunRegistry(backend.open(owner="b"))
    a.open("run-1", "task-v1", None)
    with pytest.raises(FailedPreconditionError, match="single use"):
        b.open("run-1", "task-v1", None)
    go = threading.Barrier(2)
    outcomes: list[str] = []

    def race(reg: RunRegistry) -> None:
        go.wait()
        try:
            reg.open("run-2", "task-v1", None)
            outcomes.append("opened")
        except FailedPreconditionError:
            outcomes.append("refused")

    threads = [threading.Thread(target=race, args=(r,)) for r in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["opened", "refused"]


def test_the_loser_of_a_race_for_a_run_id_leaves_no_directory(
    backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another replica (its own volume here) recorded the run between this one's check
    and its insert: refused, and the directory just made is removed."""
    volume = tmp_path / "vol"
    volume.mkdir()
    a, b = RunRegistry(backend.open(owner="a")), RunRegistry(backend.open(owner="b"))
    monkeypatch.setattr(b, "known", lambda run_id: False)  # b checked before a recorded it
    a.open("run-1", "task-v1", None)
    with pytest.raises(FailedPreconditionError, match="single use"):
        b.open("run-1", "task-v1", volume)
    assert list(volume.iterdir()) == []


def test_only_the_tokens_digest_is_stored(backend: Backend, tmp_path: Path) -> None:
    store = backend.open()
    opened = RunRegistry(store).open("run-1", "task-v1", None)
    record = store.get_run("run-1")
    assert record is not None
    assert record.token_sha256 == hashlib.sha256(opened.agent_token.encode()).hexdigest()
    assert opened.agent_token not in repr(record)
    if backend.kind == "sqlite":  # nowhere in the file either (nor in its WAL)
        for path in Path(backend.url).parent.glob("jobs.sqlite3*"):
            assert opened.agent_token.encode() not in path.read_bytes()
    with pytest.raises(ValueError, match="SHA-256"):
        store.add_run(record.__class__("run-2", "t", opened.agent_token, "", 1.0))


def _legacy_runs(path: Path, **runs: dict[str, object]) -> None:
    """A ``runs.json`` as releases before schema 3 wrote it."""
    path.write_text(json.dumps({"runs": runs}, indent=1, sort_keys=True), encoding="utf-8")


# --------------------------------------------------------- practice steps --


def test_practice_steps_charged_on_any_replica_count_against_one_budget(
    backend: Backend,
) -> None:
    a, b = TrainingLedger(backend.open(owner="a")), TrainingLedger(backend.open(owner="b"))
    budget = _budget(10)
    a.charge("run-1", 6, budget)
    assert b.used("run-1") == 6
    with pytest.raises(ResourceExhaustedError) as err:
        b.charge("run-1", 5, budget)
    assert "run run-1 has taken 6 of its 10 agent steps" in str(err.value)
    assert "would make it 11, so it is refused" in str(err.value)
    assert a.used("run-1") == 6  # refused: nothing counted
    b.charge("run-1", 4, budget)
    with pytest.raises(ResourceExhaustedError, match="used up, so this Reset is refused"):
        a.check("run-1", budget)
    usage = a.usage("run-1", budget)
    assert (usage.agent_steps, usage.agent_steps_budget, usage.enforced) == (10, 10, True)
    a.charge("run-1", 100, _budget(10, enforced=False))  # declared only: counted, not refused
    a.charge("run-1", 1, None)
    assert b.used("run-1") == 111 and b.used("run-2") == 0
    a.save()  # nothing to flush: every charge is already stored


def test_replicas_charging_at_once_never_take_a_budget_twice(backend: Backend) -> None:
    ledgers = [TrainingLedger(backend.open(owner=f"replica-{i}")) for i in range(2)]
    budget, per_thread, threads_per_ledger = _budget(50), 40, 2
    go = threading.Barrier(len(ledgers) * threads_per_ledger)
    granted: list[int] = []
    lock = threading.Lock()

    def practice(ledger: TrainingLedger) -> None:
        go.wait()
        mine = 0
        for _ in range(per_thread):
            try:
                ledger.charge("run-1", 1, budget)
                mine += 1
            except ResourceExhaustedError:
                pass
        with lock:
            granted.append(mine)

    threads = [
        threading.Thread(target=practice, args=(ledger,))
        for ledger in ledgers
        for _ in range(threads_per_ledger)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(granted) == 50 == ledgers[0].used("run-1")
