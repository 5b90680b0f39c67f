"""The audit of a run's checkpoints (tasks with ``training.checkpoints``): each signed
checkpoint re-evaluated from its snapshot, each failed one re-run to fail the same way,
and result.json's learning curve and failed checkpoints against the signed events.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pydantic

from ale_robotics.claims import AuditReport
from ale_robotics.claims import SignedEvents as _Signed
from ale_robotics.claims import event_label as _label
from ale_robotics.claims import files_text as _files_text
from ale_robotics.claims import first_diff as _first_diff
from ale_robotics.claims import payload_list as _list
from ale_robotics.claims import same as _same
from ale_robotics.evaluator.batch.pipeline import summarize
from ale_robotics.evaluator.batch.plan import load_artifact
from ale_robotics.evaluator.batch.snapshot import snapshot_submission
from ale_robotics.evaluator.runs.checkpoints import (
    CHECKPOINT_EVENT,
    FAILED_EVENT,
    RECEIVED_EVENT,
    CheckpointRecord,
    FailedCheckpointRecord,
    ReceivedCheckpoint,
    checkpoint_settings,
    checkpoint_task,
    evaluate_checkpoint,
    run_checkpoint,
    snapshot_dir,
)
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.model.result import CurvePoint, EvalResult
from ale_robotics.seeds import HiddenSeed, derive_seeds
from ale_robotics.submission.rejected import SubmissionRejected
from ale_robotics.tasks.spec import TaskSpec
from ale_robotics.trajectory import COMMITMENT_EVENT_KIND, Event

__all__ = ["audit_checkpoints", "check_failed_checkpoints", "check_learning_curve"]


@dataclass(frozen=True)
class _Checkpoints:
    """A run's signed checkpoint events that parse: the measured and the failed ones (each
    with its event), and the ``eval_seq`` each checkpoint was received at (its
    ``checkpoint_received``; a run of an older release has none: its outcome's)."""

    measured: list[tuple[Event, CheckpointRecord]]
    failed: list[tuple[Event, FailedCheckpointRecord]]
    received_at: dict[str, int]

    def taken_seq(self, event: Event, checkpoint_id: str) -> int:
        return self.received_at.get(checkpoint_id, _eval_seq(event))


def _parse_signed(
    report: AuditReport, signed: _Signed, kind: str, model: type[pydantic.BaseModel]
) -> list[tuple[Event, Any]]:
    out: list[tuple[Event, Any]] = []
    for event in (e for e in signed.events if e.kind == kind):
        try:
            out.append((event, model.model_validate(event.payload)))
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            report.add(
                "checkpoints", False, f"{_label(event)} does not parse: {loc}: {first['msg']}"
            )
    return out


def audit_checkpoints(
    report: AuditReport,
    result: EvalResult,
    signed: _Signed | None,
    task: TaskSpec,
    secret: bytes,
    state_dir: Path | None,
) -> _Checkpoints | None:
    """Re-evaluate every signed checkpoint from its snapshot; one check per checkpoint.

    Returns the signed checkpoints that parse (verified or not: each failure is a
    check of its own), or None without a verified trajectory.
    """
    ckpt = checkpoint_settings(task)
    assert ckpt is not None
    if signed is None:
        report.add("checkpoints", False, "not checked: the trajectory does not verify")
        return None
    seeds = derive_seeds(ckpt.base_seeds, result.run_id, secret)
    mine = [s.commitment for s in seeds]
    commitment = signed.first(COMMITMENT_EVENT_KIND)
    published = (
        [] if commitment is None else _list(commitment.payload, "checkpoint_seed_commitments")
    )
    where = "a missing seed_commitment event" if commitment is None else _label(commitment)
    report.add(
        "checkpoint seed commitments",
        published == mine,
        f"{len(mine)} recomputed checkpoint seeds "
        f"{'match' if published == mine else 'differ from'} the checkpoint_seed_commitments "
        f"of {where}",
    )
    received: list[tuple[Event, ReceivedCheckpoint]] = _parse_signed(
        report, signed, RECEIVED_EVENT, ReceivedCheckpoint
    )
    parsed: list[tuple[Event, CheckpointRecord]] = _parse_signed(
        report, signed, CHECKPOINT_EVENT, CheckpointRecord
    )
    failed: list[tuple[Event, FailedCheckpointRecord]] = _parse_signed(
        report, signed, FAILED_EVENT, FailedCheckpointRecord
    )
    outcomes = sorted([*parsed, *failed], key=lambda p: _eval_seq(p[0]))
    # a run of an older release signed no checkpoint_received: its outcomes stand in
    taken: list[Any] = [r for _, r in received] or [r for _, r in outcomes]
    problems = []
    if [r.index for r in taken] != list(range(len(taken))):
        problems.append(f"indices {[r.index for r in taken]} are not 0, 1, 2, ... in order")
    if len({r.checkpoint_id for r in taken}) != len(taken):
        problems.append("a checkpoint id is signed twice")
    steps = [r.practice_steps for r in taken]
    if steps != sorted(steps):
        problems.append(f"practice steps {steps} decrease (the evaluator's count never does)")
    if len(taken) > ckpt.max_checkpoints:
        problems.append(f"{len(taken)} checkpoints, over max_checkpoints {ckpt.max_checkpoints}")
    if received:
        # each outcome repeats its checkpoint as received, once, in index order
        done = [r for _, r in outcomes]
        if [r.index for r in done] != list(range(len(done))) or not all(
            o.same_checkpoint(r) for o, r in zip(done, taken, strict=False)
        ):
            problems.append(
                f"the outcomes (indices {[r.index for r in done]}) are not the received "
                "checkpoints, once each, in order"
            )
    pending = len(taken) - len(outcomes)
    report.add(
        "checkpoints",
        not problems,
        "; ".join(problems)
        or f"{len(taken)} signed checkpoints, in order: {len(parsed)} measured, "
        f"{len(failed)} failed"
        + (f", {pending} never evaluated (no result after)" if pending > 0 else ""),
    )
    ctask = checkpoint_task(task)
    for event, record in parsed:
        ok, detail = _audit_checkpoint(event, record, ctask, seeds, state_dir)
        report.add(f"checkpoint {record.index}", ok, detail)
    for event, failure in failed:
        ok, detail = _audit_failed_checkpoint(event, failure, ctask, seeds, state_dir)
        report.add(f"checkpoint {failure.index}", ok, detail)
    return _Checkpoints(parsed, failed, {r.checkpoint_id: _eval_seq(e) for e, r in received})


def _audit_failed_checkpoint(
    event: Event,
    record: FailedCheckpointRecord,
    ctask: TaskSpec,
    seeds: Sequence[HiddenSeed],
    state_dir: Path | None,
) -> tuple[bool, str]:
    """One signed failure: re-run from its snapshot, it must fail by the same rule. A
    checkpoint whose file could not even be snapshotted (no files) has nothing to re-run,
    and a failure of the evaluator's own is reported as declared: neither can raise a
    score (a failed checkpoint is never a point of the curve)."""
    where = _label(event)
    if record.source == "infrastructure":
        return True, f"{where}: the evaluator's own failure, as declared: {record.reason}"
    if not record.files:
        return True, f"{where}: no policy file could be snapshotted: {record.reason}"
    if state_dir is None:
        return False, (
            f"not re-run: pass the state dir of the evaluator that ran the run (it holds the "
            f"snapshot snapshots/ckpt-{record.checkpoint_id} of {where})"
        )
    folder = snapshot_dir(state_dir / "snapshots", record.checkpoint_id)
    if not folder.is_dir():
        return False, f"the snapshot {folder} of {where} is missing: it cannot be re-run"
    received = ReceivedCheckpoint.model_validate(
        record.model_dump(include=set(ReceivedCheckpoint.model_fields) - {"rejected"})
    )
    again = evaluate_checkpoint(received, folder, ctask, seeds)
    if not isinstance(again, FailedCheckpointRecord):
        return False, (
            f"the re-run of {where} from its snapshot did not fail: mean_return "
            f"{again.metrics.mean_return!r} on {len(again.episodes)} checkpoint seeds"
        )
    if (again.source, again.rule) != (record.source, record.rule):
        return False, (
            f"the re-run of {where} failed by {again.rule} ({again.source}), not by the "
            f"signed {record.rule} ({record.source}): {again.reason}"
        )
    return True, f"re-run from its snapshot fails as {where} signs: {again.reason}"


def _audit_checkpoint(
    event: Event,
    record: CheckpointRecord,
    ctask: TaskSpec,
    seeds: Sequence[HiddenSeed],
    state_dir: Path | None,
) -> tuple[bool, str]:
    """One signed checkpoint: its seeds, its metrics from its episodes, then a re-run of its
    snapshot compared exactly with its episodes and metrics."""
    assert ctask.contract is not None
    where = _label(event)
    indices = [e.index for e in record.episodes]
    if indices != list(range(len(seeds))):
        return False, f"{where} holds episodes {indices}; the task's checkpoints run {len(seeds)}"
    wrong = [e.index for e in record.episodes if e.seed_commitment != seeds[e.index].commitment]
    if wrong:
        return False, f"{where}: the seed commitments of episodes {wrong} are not the run's"
    signed_outcomes = [
        EpisodeOutcome(e.index, e.episode_return, e.length, e.terminated) for e in record.episodes
    ]
    again = summarize(signed_outcomes)
    for name in ("mean_return", "std_return"):
        if not _same(again[name], getattr(record.metrics, name)):
            return False, (
                f"{where}: {name} {getattr(record.metrics, name)!r} is not what its episodes "
                f"give ({again[name]!r})"
            )
    if state_dir is None:
        return False, (
            f"not re-run: pass the state dir of the evaluator that ran the run (it holds the "
            f"snapshot snapshots/ckpt-{record.checkpoint_id} of {where})"
        )
    folder = snapshot_dir(state_dir / "snapshots", record.checkpoint_id)
    if not folder.is_dir():
        return (
            False,
            f"the snapshot {folder} of {where} is missing: the checkpoint cannot be re-run",
        )
    with tempfile.TemporaryDirectory(prefix="ale-audit-ckpt-") as tmp:
        try:
            files = snapshot_submission(folder, "", ctask.contract, Path(tmp) / "snap")
        except (SubmissionRejected, OSError) as exc:
            return False, f"the snapshot {folder} of {where} cannot be read: {exc}"
        hashes = {f.name: f.sha256 for f in files}
        if hashes != record.files:
            return False, (
                f"the snapshot {folder} holds {_files_text(hashes)}, not the files {where} "
                f"signs: {_files_text(record.files)}"
            )
        try:
            artifact = load_artifact(files, ctask)
        except SubmissionRejected as exc:
            return False, f"the snapshot of {where} no longer loads: {exc}"
    try:
        rerun = run_checkpoint(ctask, artifact, seeds)
    except Exception as exc:  # a policy fault: the evaluator never signs a faulty checkpoint
        return False, f"the re-run of {where} failed: {type(exc).__name__}: {exc}"
    mine = [(o.index, o.ret, o.length, o.terminated) for o in rerun]
    theirs = [(e.index, e.episode_return, e.length, e.terminated) for e in record.episodes]
    if len(mine) != len(theirs):
        return False, f"the re-run ran {len(mine)} episodes, {where} signs {len(theirs)}"
    for a, b in zip(mine, theirs, strict=True):
        if not _same(a, b):
            return False, (
                f"the re-run differs from {where}'s episodes: episode {a[0]} re-run "
                f"(return {a[1]!r}, length {a[2]}, terminated {a[3]}) vs signed "
                f"(return {b[1]!r}, length {b[2]}, terminated {b[3]})"
            )
    metrics = summarize(rerun)
    return True, (
        f"re-run from its snapshot on {len(rerun)} checkpoint seeds matches {where}: "
        f"practice_steps {record.practice_steps}, mean_return {metrics['mean_return']!r}"
    )


def check_learning_curve(
    report: AuditReport,
    result: EvalResult,
    signed: _Signed | None,
    outcome: Event | None,
    checkpoints: _Checkpoints | None,
) -> list[CurvePoint]:
    """result.json's learning curve against the signed checkpoints; returns the signed curve.

    The evaluator builds the curve when it builds the result, right before it signs
    the ``result`` event, once it has evaluated every checkpoint received so far: so
    the curve holds every measured checkpoint received (or, in older runs, signed)
    before the job's last ``progress_summary`` (which precedes the build), in order,
    and may hold those measured between it and the ``result`` event. Anything else
    (a point missing, added, reordered or edited) fails.
    """
    if checkpoints is None or outcome is None or outcome.kind != "result":
        ok = not result.learning_curve
        report.add(
            "learning curve",
            ok,
            "no signed result or checkpoints: result.json has no curve either"
            if ok
            else "result.json has a learning curve, but no verified signed result and "
            "checkpoints to check it against",
        )
        return []
    assert signed is not None
    result_seq = _eval_seq(outcome)
    progress = signed.last_of_job("progress_summary")
    built_after = -1 if progress is None else _eval_seq(progress)
    before = [(e, r) for e, r in checkpoints.measured if _eval_seq(e) < result_seq]
    must = [
        r.curve_point()
        for e, r in before
        if checkpoints.taken_seq(e, r.checkpoint_id) < built_after
    ]
    may = [r.curve_point() for _, r in before]
    claimed = list(result.learning_curve)
    n = len(claimed)
    ok = n >= len(must) and _same(
        [c.model_dump() for c in claimed], [c.model_dump() for c in may[:n]]
    )
    if ok:
        detail = f"{n} points match the signed checkpoint events signed before {_label(outcome)}"
    else:
        diff = _first_diff([c.model_dump() for c in claimed], [c.model_dump() for c in may])
        detail = (
            f"result.json's learning_curve ({n} points) is not the signed checkpoints before "
            f"{_label(outcome)} ({len(may)} points, at least {len(must)} of them): {diff}"
        )
    report.add("learning curve", ok, detail)
    return claimed if ok else must


def check_failed_checkpoints(
    report: AuditReport,
    result: EvalResult,
    signed: _Signed | None,
    outcome: Event | None,
    checkpoints: _Checkpoints | None,
) -> None:
    """result.json's ``failed_checkpoints`` against the signed ``checkpoint_failed`` events,
    by the learning curve's rule (every one received before the build, maybe later ones)."""
    if checkpoints is None or outcome is None or outcome.kind != "result":
        ok = not result.failed_checkpoints
        report.add(
            "failed checkpoints",
            ok,
            "no signed result or checkpoints: result.json lists no failed checkpoint either"
            if ok
            else "result.json lists failed checkpoints, but no verified signed result and "
            "checkpoints to check them against",
        )
        return
    assert signed is not None
    progress = signed.last_of_job("progress_summary")
    built_after = -1 if progress is None else _eval_seq(progress)
    before = [(e, r) for e, r in checkpoints.failed if _eval_seq(e) < _eval_seq(outcome)]
    must = [
        r.failed_point().model_dump()
        for e, r in before
        if checkpoints.taken_seq(e, r.checkpoint_id) < built_after
    ]
    may = [r.failed_point().model_dump() for _, r in before]
    claimed = [c.model_dump() for c in result.failed_checkpoints]
    ok = len(claimed) >= len(must) and claimed == may[: len(claimed)]
    report.add(
        "failed checkpoints",
        ok,
        f"{len(claimed)} match the signed checkpoint_failed events signed before {_label(outcome)}"
        if ok
        else f"result.json's failed_checkpoints ({len(claimed)}) are not the signed ones before "
        f"{_label(outcome)} ({len(may)}, at least {len(must)} of them): "
        f"{_first_diff(claimed, may)}",
    )


def _eval_seq(event: Event) -> int:
    return -1 if event.sig is None else event.sig.eval_seq
