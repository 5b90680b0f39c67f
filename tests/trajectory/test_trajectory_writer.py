"""Appends: chain position, refusals, one write + fsync, tail reads, many processes."""

from __future__ import annotations

import math
import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest
from trajectory_helpers import RUN_ID, append_many, read_records, write_records

from ale_robotics.trajectory import (
    GENESIS_HASH,
    CorruptTrajectoryError,
    EvaluatorSigner,
    Event,
    InvalidEventError,
    TornTrajectoryError,
    TrajectoryError,
    TrajectoryWriter,
    canonical_json,
    verify_file,
)


def test_appends_extend_the_chain(tmp_path: Path, signer: EvaluatorSigner) -> None:
    path = tmp_path / "new" / "dir" / "trajectory.jsonl"
    writer = TrajectoryWriter(path, RUN_ID)
    first = writer.append("harness", "run_started", {"task": "t"})
    second = writer.append("agent", "note")
    third = writer.append_signed(signer.for_run(RUN_ID).key_event())
    assert [first.seq, second.seq, third.seq] == [0, 1, 2]
    assert first.prev_hash == GENESIS_HASH
    assert second.prev_hash == first.hash and third.prev_hash == second.hash
    assert second.payload == {}
    lines = path.read_bytes().splitlines()
    assert [Event.from_line(line) for line in lines] == [first, second, third]
    assert all(line == canonical_json(Event.from_line(line).as_dict()) for line in lines)
    assert verify_file(path, signer.public_key_hex).ok


def test_append_signed_keeps_the_signed_content(tmp_path: Path, signer: EvaluatorSigner) -> None:
    signed = signer.sign_event(
        RUN_ID, "result", {"x": 1.5}, eval_seq=0, time="2024-05-06T07:08:09.123456Z"
    )
    event = TrajectoryWriter(tmp_path / "t.jsonl", RUN_ID).append_signed(signed)
    assert (event.time, event.kind, event.payload, event.sig) == (
        signed.time,
        signed.kind,
        signed.payload,
        signed.sig,
    )
    assert event.level == "trusted_evaluator"


def test_evaluator_events_only_come_signed(tmp_path: Path) -> None:
    writer = TrajectoryWriter(tmp_path / "t.jsonl", RUN_ID)
    with pytest.raises(InvalidEventError, match="use append_signed"):
        writer.append("trusted_evaluator", "result", {})  # type: ignore[arg-type]
    assert not (tmp_path / "t.jsonl").exists()


def test_signed_event_for_another_run_is_refused(tmp_path: Path, signer: EvaluatorSigner) -> None:
    writer = TrajectoryWriter(tmp_path / "t.jsonl", RUN_ID)
    writer.append("harness", "run_started")
    other = signer.sign_event("run-other", "result", {}, eval_seq=0)
    with pytest.raises(InvalidEventError, match="is for run 'run-other'"):
        writer.append_signed(other)
    assert len(read_records(tmp_path / "t.jsonl")) == 1


def test_bad_run_id_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidEventError, match="run_id"):
        TrajectoryWriter(tmp_path / "t.jsonl", "../escape")


def test_nan_payload_is_refused_and_nothing_written(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    writer = TrajectoryWriter(path, RUN_ID)
    writer.append("harness", "run_started")
    before = path.read_bytes()
    with pytest.raises(InvalidEventError, match=r"payload.score is nan"):
        writer.append("harness", "score", {"score": math.nan})
    assert path.read_bytes() == before


def test_torn_last_line_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    writer = TrajectoryWriter(path, RUN_ID)
    writer.append("harness", "run_started")
    line = writer.append("harness", "agent_launched").to_line()
    torn = path.read_bytes()[: -len(line) // 2]
    path.write_bytes(torn)
    with pytest.raises(TornTrajectoryError, match="torn line"):
        writer.append("harness", "score")
    assert path.read_bytes() == torn  # evidence kept as it was


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda r: r.update(payload={"edited": True}), "does not match its hash"),
        (lambda r: r.update(seq="x"), "not a valid event"),
    ],
)
def test_tampered_last_event_is_refused(tmp_path: Path, edit: Any, needle: str) -> None:
    path = tmp_path / "t.jsonl"
    writer = TrajectoryWriter(path, RUN_ID)
    writer.append("harness", "run_started")
    records = read_records(path)
    edit(records[-1])
    write_records(path, records)
    with pytest.raises(CorruptTrajectoryError, match=needle):
        writer.append("harness", "score")


def test_file_of_another_run_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    TrajectoryWriter(path, "run-other").append("harness", "run_started")
    with pytest.raises(CorruptTrajectoryError, match="trajectory of run 'run-other'"):
        TrajectoryWriter(path, RUN_ID).append("harness", "run_started")


def test_one_write_and_one_fsync_per_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.jsonl"
    writer = TrajectoryWriter(path, RUN_ID)
    writer.append("harness", "run_started")
    writes: list[bytes] = []
    fsyncs: list[int] = []
    real_write, real_fsync = os.write, os.fsync

    def spy_write(fd: int, data: bytes) -> int:
        writes.append(bytes(data))
        return real_write(fd, data)

    def spy_fsync(fd: int) -> None:
        fsyncs.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "write", spy_write)
    monkeypatch.setattr(os, "fsync", spy_fsync)
    event = writer.append("harness", "score", {"score": 1.0})
    assert writes == [event.to_line()]
    assert len(fsyncs) == 1


def test_short_write_is_cut_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.jsonl"
    writer = TrajectoryWriter(path, RUN_ID)
    writer.append("harness", "run_started")
    before = path.read_bytes()
    real_write = os.write

    def half_write(fd: int, data: bytes) -> int:
        return real_write(fd, data[: len(data) // 2])

    monkeypatch.setattr(os, "write", half_write)
    with pytest.raises(TrajectoryError, match="short write"):
        writer.append("harness", "score")
    assert path.read_bytes() == before
    monkeypatch.setattr(os, "write", real_write)
    assert writer.append("harness", "score").seq == 1


def test_failed_write_is_cut_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.jsonl"
    writer = TrajectoryWriter(path, RUN_ID)
    writer.append("harness", "run_started")
    before = path.read_bytes()

    def failing_write(fd: int, data: bytes) -> int:
        os.ftruncate(fd, len(before) + 5)  # as if a few bytes landed before the error
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", failing_write)
    with pytest.raises(TrajectoryError, match="No space left"):
        writer.append("harness", "score")
    assert path.read_bytes() == before


def test_only_the_tail_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.jsonl"
    writer = TrajectoryWriter(path, RUN_ID)
    writer.append("harness", "big", {"blob": "x" * 2_000_000})
    writer.append("harness", "small")
    read_bytes = 0
    real_pread = os.pread

    def spy_pread(fd: int, n: int, offset: int) -> bytes:
        nonlocal read_bytes
        read_bytes += n
        return real_pread(fd, n, offset)

    monkeypatch.setattr(os, "pread", spy_pread)
    assert writer.append("harness", "next").seq == 2
    assert read_bytes <= 70_000


@pytest.mark.parametrize("size", [10, 65_535, 65_536, 200_000])
def test_long_last_lines_are_read_whole(tmp_path: Path, size: int) -> None:
    path = tmp_path / "t.jsonl"
    writer = TrajectoryWriter(path, RUN_ID)
    writer.append("harness", "first", {"blob": "y" * size})
    writer.append("harness", "long", {"blob": "x" * size})
    assert writer.append("harness", "after").seq == 2
    assert verify_file(path).ok


def test_concurrent_processes_build_one_valid_chain(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    ctx = multiprocessing.get_context("spawn")
    workers, count = 3, 40
    start = ctx.Event()
    procs = [
        ctx.Process(target=append_many, args=(str(path), w, count, start)) for w in range(workers)
    ]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    report = verify_file(path)
    assert report.ok, report.reason
    assert report.events == workers * count
    records = read_records(path)
    for w in range(workers):
        assert [r["payload"]["i"] for r in records if r["payload"]["worker"] == w] == list(
            range(count)
        )
