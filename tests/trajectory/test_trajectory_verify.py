"""The verifier names the first bad event for every kind of tampering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trajectory_helpers import (
    EVALUATOR_INDICES,
    HARNESS_OR_AGENT_INDICES,
    MUTATIONS,
    N_EVENTS,
    PROMOTE,
    RUN_ID,
    SIG_MUTATIONS,
    read_records,
    rehash,
    write_records,
    write_standard_run,
)

from ale_robotics.trajectory import (
    GENESIS_HASH,
    EvaluatorSigner,
    TrajectoryWriter,
    build_event,
    canonical_json,
    format_time,
    verify_file,
)


def test_valid_run_verifies(standard_run: Path, signer: EvaluatorSigner) -> None:
    report = verify_file(standard_run, signer.public_key_hex)
    assert report.ok, report.reason
    assert report.events == N_EVENTS
    assert report.counts == {"agent": 1, "harness": 4, "trusted_evaluator": 7}
    assert report.eval_events == 7
    assert report.first_bad_seq is None
    assert report.run_id == RUN_ID
    assert report.key_source == "argument"
    assert report.head_hash == read_records(standard_run)[-1]["hash"]
    assert report.summary() == "OK: 12 events, chain and signatures verify"


def test_key_taken_from_trajectory_when_not_pinned(
    standard_run: Path, signer: EvaluatorSigner
) -> None:
    report = verify_file(standard_run)
    assert report.ok, report.reason
    assert report.public_key == signer.public_key_hex
    assert report.key_source == "trajectory"


def test_empty_file_is_an_empty_valid_chain(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"")
    report = verify_file(path)
    assert report.ok and report.events == 0 and report.head_hash is None


def test_missing_file_is_reported_not_raised(tmp_path: Path) -> None:
    report = verify_file(tmp_path / "absent.jsonl")
    assert not report.ok
    assert report.first_bad_seq is None
    assert "cannot read" in report.reason
    assert report.summary().startswith("FAIL: cannot read")


def _assert_fails_at(path: Path, index: int, *needles: str, **kwargs: object) -> str:
    report = verify_file(path, **kwargs)  # type: ignore[arg-type]
    assert not report.ok, "tampering went undetected"
    assert report.first_bad_seq == index, report.reason
    assert report.line == index + 1
    assert report.events == index  # everything before it verified
    for needle in needles:
        assert needle in report.reason
    assert report.summary() == f"FAIL at event {index}: {report.reason}"
    return report.reason


# --- editing one field without fixing the hashes -----------------------------------


@pytest.mark.parametrize("field", sorted(MUTATIONS))
@pytest.mark.parametrize("index", range(N_EVENTS))
def test_editing_any_field_of_any_event_fails_at_that_event(
    standard_run: Path, signer: EvaluatorSigner, index: int, field: str
) -> None:
    records = read_records(standard_run)
    MUTATIONS[field](records[index])
    write_records(standard_run, records)
    _assert_fails_at(standard_run, index, public_key=signer.public_key_hex)


@pytest.mark.parametrize("field", sorted(SIG_MUTATIONS))
@pytest.mark.parametrize("index", EVALUATOR_INDICES)
def test_editing_a_signature_fails_at_that_event(
    standard_run: Path, signer: EvaluatorSigner, index: int, field: str
) -> None:
    records = read_records(standard_run)
    SIG_MUTATIONS[field](records[index])
    write_records(standard_run, records)
    _assert_fails_at(standard_run, index, public_key=signer.public_key_hex)


# --- editing and recomputing the whole hash chain (an attacker with write access) ----

EVALUATOR_REHASH_CASES = [
    *(f for f in sorted(MUTATIONS) if f not in ("hash", "prev_hash", "seq", "v")),
    *sorted(SIG_MUTATIONS),
]


@pytest.mark.parametrize("field", EVALUATOR_REHASH_CASES)
@pytest.mark.parametrize("index", EVALUATOR_INDICES)
def test_rehashed_edit_of_an_evaluator_event_fails_at_that_event(
    standard_run: Path, signer: EvaluatorSigner, index: int, field: str
) -> None:
    records = read_records(standard_run)
    (MUTATIONS | SIG_MUTATIONS)[field](records[index])
    write_records(standard_run, rehash(records))
    # Unpinned: the key in the file itself still protects the evaluator's events.
    _assert_fails_at(standard_run, index, expected_run_id=RUN_ID)
    _assert_fails_at(standard_run, index, public_key=signer.public_key_hex)


@pytest.mark.parametrize(
    ("field", "needle"),
    [
        ("seq", "seq is"),
        ("v", "schema"),
        ("run_id", "run_id"),
        ("sig", "carries a signature"),
        ("level.promoted", "missing signature"),
    ],
)
@pytest.mark.parametrize("index", HARNESS_OR_AGENT_INDICES)
def test_rehashed_structural_edit_of_a_harness_or_agent_event_fails(
    standard_run: Path, index: int, field: str, needle: str
) -> None:
    records = read_records(standard_run)
    (MUTATIONS | PROMOTE)[field](records[index])
    write_records(standard_run, rehash(records))
    _assert_fails_at(standard_run, index, needle, expected_run_id=RUN_ID)


# --- deleting, reordering, truncating -----------------------------------------------


@pytest.mark.parametrize("index", range(N_EVENTS - 1))
def test_deleting_an_event_fails_where_it_was(standard_run: Path, index: int) -> None:
    records = read_records(standard_run)
    del records[index]
    write_records(standard_run, records)
    _assert_fails_at(standard_run, index, "seq is")


def test_deleting_the_last_event_needs_the_expected_head(standard_run: Path) -> None:
    records = read_records(standard_run)
    head = records[-1]["hash"]
    assert verify_file(standard_run, expected_head=head).ok
    write_records(standard_run, records[:-1])
    assert verify_file(standard_run).ok  # a shorter chain is a valid chain...
    _assert_fails_at(standard_run, N_EVENTS - 1, "removed from the end", expected_head=head)


@pytest.mark.parametrize("eval_pos", range(len(EVALUATOR_INDICES) - 1))
def test_deleting_an_evaluator_event_is_detected_after_rehash(
    standard_run: Path, eval_pos: int
) -> None:
    records = read_records(standard_run)
    index = EVALUATOR_INDICES[eval_pos]
    del records[index]
    write_records(standard_run, rehash(records, renumber=True))
    # The next evaluator event now sits where the deleted one should be.
    next_index = EVALUATOR_INDICES[eval_pos + 1] - 1
    reason = _assert_fails_at(standard_run, next_index)
    if eval_pos >= 1:
        assert "eval_seq is" in reason


@pytest.mark.parametrize("index", range(N_EVENTS - 1))
def test_swapping_two_adjacent_events_fails_at_the_first(standard_run: Path, index: int) -> None:
    records = read_records(standard_run)
    records[index], records[index + 1] = records[index + 1], records[index]
    write_records(standard_run, records)
    _assert_fails_at(standard_run, index, "seq is")


def test_swapping_evaluator_events_is_detected_after_rehash(standard_run: Path) -> None:
    records = read_records(standard_run)
    records[6], records[7] = records[7], records[6]  # validation <-> evaluation_started
    write_records(standard_run, rehash(records, renumber=True))
    _assert_fails_at(standard_run, 6, "eval_seq is 4, expected 3")


def test_truncating_at_any_byte_fails_at_the_cut_line(standard_run: Path) -> None:
    data = standard_run.read_bytes()
    line_ends = [i + 1 for i, b in enumerate(data) if b == ord("\n")]
    for cut in range(1, len(data), 97):
        standard_run.write_bytes(data[:cut])
        complete = sum(1 for end in line_ends if end <= cut)
        if cut in line_ends:
            assert verify_file(standard_run).ok
        else:
            _assert_fails_at(standard_run, complete, "torn last line")


def test_torn_last_line_is_reported_not_skipped(standard_run: Path) -> None:
    data = standard_run.read_bytes()
    last = data.splitlines(keepends=True)[-1]
    standard_run.write_bytes(data + last[: len(last) // 2])
    _assert_fails_at(standard_run, N_EVENTS, "torn last line")


def test_complete_json_without_final_newline_is_torn(standard_run: Path) -> None:
    standard_run.write_bytes(standard_run.read_bytes()[:-1])
    _assert_fails_at(standard_run, N_EVENTS - 1, "torn")


# --- forged or misplaced evaluator events -------------------------------------------


def _append_raw_event(path: Path, **fields: object) -> None:
    last = read_records(path)[-1]
    event = build_event(
        seq=last["seq"] + 1,
        prev_hash=last["hash"],
        run_id=RUN_ID,
        time=format_time(),
        **fields,  # type: ignore[arg-type]
    )
    with path.open("ab") as f:
        f.write(event.to_line())


def test_unsigned_evaluator_event_fails(standard_run: Path) -> None:
    _append_raw_event(
        standard_run, level="trusted_evaluator", kind="result", payload={"mean_return": 1e9}
    )
    _assert_fails_at(standard_run, N_EVENTS, "missing signature")


def test_event_signed_by_another_key_fails(
    standard_run: Path, other_signer: EvaluatorSigner
) -> None:
    forged = other_signer.sign_event(RUN_ID, "result", {"mean_return": 1e9}, eval_seq=7)
    TrajectoryWriter(standard_run, RUN_ID).append_signed(forged)
    _assert_fails_at(standard_run, N_EVENTS, "unknown key")


def test_event_signed_by_another_key_posing_as_the_real_one_fails(
    standard_run: Path, signer: EvaluatorSigner, other_signer: EvaluatorSigner
) -> None:
    forged = other_signer.sign_event(RUN_ID, "result", {"mean_return": 1e9}, eval_seq=7)
    forged = forged.model_copy(
        update={"sig": forged.sig.model_copy(update={"key_id": signer.key_id})}
    )
    TrajectoryWriter(standard_run, RUN_ID).append_signed(forged)
    _assert_fails_at(standard_run, N_EVENTS, "bad signature")


def test_correctly_signed_next_event_verifies(standard_run: Path, signer: EvaluatorSigner) -> None:
    """The control for the two tests above: same append, right key."""
    event = signer.sign_event(RUN_ID, "note", {"late": True}, eval_seq=7)
    TrajectoryWriter(standard_run, RUN_ID).append_signed(event)
    assert verify_file(standard_run, signer.public_key_hex).ok


def test_second_key_publication_with_another_key_fails(
    standard_run: Path, other_signer: EvaluatorSigner
) -> None:
    forged = other_signer.sign_event(
        RUN_ID, "evaluator_key", other_signer.key_event_payload(), eval_seq=7
    )
    TrajectoryWriter(standard_run, RUN_ID).append_signed(forged)
    _assert_fails_at(standard_run, N_EVENTS, "second evaluator_key publishes a different key")


def test_republishing_the_same_key_is_allowed(standard_run: Path, signer: EvaluatorSigner) -> None:
    again = signer.sign_event(RUN_ID, "evaluator_key", signer.key_event_payload(), eval_seq=7)
    TrajectoryWriter(standard_run, RUN_ID).append_signed(again)
    assert verify_file(standard_run).ok


def test_whole_evaluator_stream_replaced_by_another_key_needs_the_pinned_key(
    tmp_path: Path, signer: EvaluatorSigner, other_signer: EvaluatorSigner
) -> None:
    path = tmp_path / "t.jsonl"
    write_standard_run(path, other_signer)  # a self-consistent forgery
    assert verify_file(path).ok
    _assert_fails_at(path, 2, "is not the expected key", public_key=signer.public_key_hex)


def test_first_evaluator_event_must_publish_the_key(
    tmp_path: Path, signer: EvaluatorSigner
) -> None:
    path = tmp_path / "t.jsonl"
    writer = TrajectoryWriter(path, RUN_ID)
    writer.append("harness", "run_started", {})
    writer.append_signed(signer.sign_event(RUN_ID, "result", {"x": 1}, eval_seq=0))
    _assert_fails_at(path, 1, "must be 'evaluator_key'")


def test_key_event_with_mismatched_key_id_fails(tmp_path: Path, signer: EvaluatorSigner) -> None:
    path = tmp_path / "t.jsonl"
    payload = {**signer.key_event_payload(), "key_id": "0" * 16}
    TrajectoryWriter(path, RUN_ID).append_signed(
        signer.sign_event(RUN_ID, "evaluator_key", payload, eval_seq=0)
    )
    _assert_fails_at(path, 0, "key_id does not belong")


def test_commitment_must_follow_the_key_event(tmp_path: Path, signer: EvaluatorSigner) -> None:
    path = tmp_path / "t.jsonl"
    writer = TrajectoryWriter(path, RUN_ID)
    ev = signer.for_run(RUN_ID)
    writer.append_signed(ev.key_event())
    writer.append_signed(ev.sign("submit_received", {}))
    _assert_fails_at(path, 1, "must be 'seed_commitment'")


def test_malformed_commitment_payload_fails(tmp_path: Path, signer: EvaluatorSigner) -> None:
    path = tmp_path / "t.jsonl"
    writer = TrajectoryWriter(path, RUN_ID)
    ev = signer.for_run(RUN_ID)
    writer.append_signed(ev.key_event())
    writer.append_signed(
        ev.sign("seed_commitment", {"secret_sha256": "00", "seed_commitments": []})
    )
    _assert_fails_at(path, 1, "seed_commitment payload", "secret_sha256")


# --- run_id, encoding, malformed lines ------------------------------------------------


def test_run_id_changing_mid_file_fails(standard_run: Path) -> None:
    records = read_records(standard_run)
    for record in records[4:]:
        record["run_id"] = "run-other"
    write_records(standard_run, rehash(records))
    _assert_fails_at(standard_run, 4, "run_id changes")


def test_trajectory_of_another_run_fails_with_expected_run_id(standard_run: Path) -> None:
    _assert_fails_at(standard_run, 0, "run_id is", expected_run_id="run-other")


def test_reencoded_line_fails_as_non_canonical(standard_run: Path) -> None:
    records = read_records(standard_run)
    lines = [canonical_json(r) for r in records]
    lines[3] = json.dumps(records[3], ensure_ascii=True).encode()  # same content, spaces
    standard_run.write_bytes(b"\n".join(lines) + b"\n")
    _assert_fails_at(standard_run, 3, "canonical form")


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        (b"not json at all", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b"\xff\xfe", "not UTF-8"),
        (b"", "empty line"),
        (b'{"v": NaN}', "NaN is not JSON"),
        (b'{"v": 1e999}', "out of range"),
        (b'{"v": 1, "v": 1}', "duplicate key"),
        (b'{"v": 1}', "schema"),
    ],
)
def test_malformed_line_is_named(standard_run: Path, line: bytes, needle: str) -> None:
    lines = standard_run.read_bytes().splitlines()
    lines[5] = line
    standard_run.write_bytes(b"\n".join(lines) + b"\n")
    _assert_fails_at(standard_run, 5, needle)


def test_first_event_must_start_from_genesis(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    event = build_event(
        seq=0,
        prev_hash="1" * 64,
        run_id=RUN_ID,
        level="harness",
        kind="run_started",
        payload={},
        time=format_time(),
    )
    path.write_bytes(event.to_line())
    _assert_fails_at(path, 0, "64 zeros")
    assert GENESIS_HASH == "0" * 64
