"""Audit a finished run once the evaluator's secret is revealed.

``result.json`` is written by the harness into a directory that whoever handles
the run afterwards can edit, so the audit treats it as a *claim*. The source of
truth is the evaluator's signed events in ``trajectory.jsonl``: once
:func:`~ale_robotics.trajectory.verify_file` has verified the chain and every
signature, each claim of ``result.json`` is checked against them, and every
mismatch names the signed event it contradicts (kind and position):

* the trajectory chain and signatures; the secret against its commitment (the
  published one and the signed ``seed_commitment`` event's); every hidden seed
  against its commitment; the task config hash;
* the job: ``result.json``'s job must be one the evaluator signed events for,
  of the same task;
* the submission: ``result.json``'s ``submission_files`` and the files on disk
  against the signed ``submission_received`` event's hashes;
* the outcome: state, failure, metrics, per-episode returns and outcomes and
  smoke-run flag against the signed ``result`` event (a rejection against the
  signed failed ``validation`` event), and ``official`` never set on a smoke run;
* the per-episode outcomes of a batch job (``EvalResult.outcomes``: per-problem
  success, collision and planning time, per-instance success...): the signed
  ones must be the task's backend's, one per episode, and reproduce the signed
  metrics exactly;
* the measurement: a batch job is re-run on the recomputed seeds and its
  metrics compared with the *signed* metrics, its episodes with
  ``result.json``'s and its per-episode outcomes with the signed ones (fields a
  host reproduces only approximately, such as planning times, are re-measured
  and shown, never compared; see ``host_dependent`` in ``model/result.py``).
  An interactive eval session cannot be re-run without the
  agent that drove it, so there ``result.json``'s episodes are checked against
  the signed ``episode_summary`` events and the metrics recomputed from those;
* the checkpoints of a task with ``training.checkpoints`` (SubmitCheckpoint):
  the checkpoint seeds recomputed against the signed ``checkpoint_seed_commitments``;
  every ``checkpoint_received`` (indices 0, 1, 2..., within ``max_checkpoints``)
  with at most one outcome each, in order, repeating it; then each signed
  ``checkpoint`` event re-evaluated from its snapshot in the
  evaluator's state dir (``STATE_DIR/snapshots/ckpt-<id>``, files checked against
  the signed hashes) on those seeds, its episodes and metrics compared exactly,
  and each ``checkpoint_failed`` one re-run to fail by the same rule;
  ``result.json``'s ``learning_curve`` and ``failed_checkpoints`` against those
  signed events, and its
  ``training`` (the evaluator's practice-step count) against the signed ``result``
  event. A missing snapshot or a checkpoint that does not reproduce fails;
* the score: recomputed from the signed metrics with the registry's target and
  the gate evidence (rebuilt from the verified submission files where the
  audit has them, with the signed learning curve and training count), and
  compared with ``result.json``'s score report.

Without a verified trajectory nothing is trusted: the checks that need signed
events fail saying so rather than falling back to ``result.json``.

The checks that need neither the secret nor a re-run (the trajectory, the job, the
submission hashes, the outcome, the training count, the score) live in
:mod:`ale_robotics.claims`, where every listing of runs uses them too.

A run that was interrupted or failed (its ``result.json`` is a
:class:`~ale_robotics.harness.report.StoppedRunReport`) has no score, so there
is nothing to audit: the report says so in ``fatal`` and only checks its
trajectory against what the stopped run recorded.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pydantic

from ale_robotics.claims import AuditCheck, AuditReport
from ale_robotics.claims import ScoreEvidence as _Evidence
from ale_robotics.claims import SignedEvents as _Signed
from ale_robotics.claims import check_job as _check_job
from ale_robotics.claims import check_outcome as _check_outcome
from ale_robotics.claims import check_score as _check_score
from ale_robotics.claims import check_training as _check_training
from ale_robotics.claims import event_label as _label
from ale_robotics.claims import files_text as _files_text
from ale_robotics.claims import first_diff as _first_diff
from ale_robotics.claims import load_signed as _load_trajectory
from ale_robotics.claims import metric_diffs as _metric_diffs
from ale_robotics.claims import payload_dict as _dict
from ale_robotics.claims import payload_list as _list
from ale_robotics.claims import same as _same
from ale_robotics.errors import AleError
from ale_robotics.evaluator.batch.evidence import collect_evidence
from ale_robotics.evaluator.batch.pipeline import summarize
from ale_robotics.evaluator.batch.plan import episode_plan, load_artifact
from ale_robotics.evaluator.batch.smoke import smoke_task
from ale_robotics.evaluator.batch.snapshot import snapshot_submission
from ale_robotics.evaluator.execution import make_executor
from ale_robotics.evaluator.results.metrics import HOST_TIMED
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
from ale_robotics.harness.report import RunReport, StoppedRunReport, load_run_report
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.model.outcomes import (
    BatchOutcomes,
    batch_outcomes,
    episode_outcomes,
    outcome_entries,
)
from ale_robotics.model.result import CurvePoint, EpisodeRecord, EvalResult, SmokeRun
from ale_robotics.seeds import HiddenSeed, derive_seeds
from ale_robotics.submission.rejected import SubmissionRejected
from ale_robotics.tasks.registry import Registry, default_registry
from ale_robotics.tasks.spec import TaskMode, TaskSpec
from ale_robotics.trajectory import COMMITMENT_EVENT_KIND, Event, verify_file

__all__ = [
    "AuditCheck",
    "AuditReport",
    "audit_run",
    "load_report",
    "read_secret",
    "stopped_summary",
]

_Outcomes = pydantic.TypeAdapter[Any](BatchOutcomes)


def read_secret(path: Path) -> bytes:
    """The secret as the evaluator stores it (32 raw bytes), or as 64 hex digits."""
    data = path.read_bytes()
    text = data.strip()
    if len(text) == 64:
        try:
            return bytes.fromhex(text.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            pass
    return data


def audit_run(
    run_dir: Path,
    secret: bytes,
    *,
    submission_dir: Path | None = None,
    public_key: str | None = None,
    registry: Registry | None = None,
    workers: int | None = None,
    state_dir: Path | None = None,
) -> AuditReport:
    """Check everything ``run_dir``'s result.json claims; never raises for a bad run directory.

    A run without a readable result.json (interrupted before the harness wrote
    it) gives a report whose ``fatal`` says why, with one failing check.
    ``state_dir``: the state dir of the evaluator that ran the run, whose
    ``snapshots/ckpt-<id>/`` hold the run's checkpoints (needed to re-evaluate
    them; without it the checkpoint checks of a task with checkpoints fail).
    """
    reg = registry or default_registry()
    loaded = load_report(run_dir / "result.json")
    if isinstance(loaded, str):
        report = AuditReport(run_id=run_dir.name, fatal=loaded)
        report.add("result.json", False, loaded)
        return report
    if isinstance(loaded, StoppedRunReport):
        return _audit_stopped(run_dir, loaded, public_key)
    doc = loaded
    report = AuditReport(run_id=doc.run_id)
    result = doc.eval_result
    if result is None:
        report.add("result", False, "the run has no evaluator result to audit")
        return report

    traj, events = _load_trajectory(
        run_dir / "trajectory.jsonl",
        public_key,
        result.run_id,
        doc.trajectory_head or None,
        doc.trajectory_events or None,
    )
    report.add("trajectory", traj.ok, traj.summary())
    signed = None if events is None else _Signed(events, result.job_id)

    _check_secret(report, secret, result, signed)
    try:
        task_entry = reg.entry(result.task_id)
    except AleError as exc:
        report.add("task config", False, exc.message)
        return report
    report.add(
        "task config",
        task_entry.sha256 == result.task_config_sha256,
        f"installed config sha256 {task_entry.sha256[:12]}..., evaluated "
        f"{result.task_config_sha256[:12]}...",
    )
    full_task = task_entry.spec
    task = full_task
    _check_job(report, result, signed, full_task)
    outcome = _check_outcome(report, doc, result, signed)
    smoke = _smoke(result, outcome)
    if smoke is not None:  # the evaluator ran (and committed to) the first N only
        task = smoke_task(task, smoke.episodes)
        report.add(
            "smoke run",
            True,
            f"a smoke run of {smoke.episodes} of {smoke.of} episodes: "
            "checked as such, not an official result",
        )
    seeds = derive_seeds(task.eval.base_seeds, result.run_id, secret)
    commitment = None if signed is None else signed.first(COMMITMENT_EVENT_KIND)
    published = [] if commitment is None else list(_list(commitment.payload, "seed_commitments"))
    mine = [s.commitment for s in seeds]
    where = (
        _label(commitment)
        if commitment is not None
        else "no verified seed_commitment event"
        if signed is None
        else "a missing seed_commitment event"
    )
    report.add(
        "seed commitments",
        published == mine
        and all(0 <= e.index < len(mine) for e in result.episodes)
        and all(e.seed_commitment == mine[e.index] for e in result.episodes),
        f"{len(mine)} recomputed seeds against {where} and the result's episodes",
    )

    evidence = _Evidence.claimed(result)
    if checkpoint_settings(full_task) is not None:
        curve = _audit_checkpoints(report, result, signed, full_task, secret, state_dir)
        evidence.learning_curve = _check_learning_curve(report, result, signed, outcome, curve)
        _check_failed_checkpoints(report, result, signed, outcome, curve)
    if task.mode is not TaskMode.INTERACTIVE:
        evidence.training = _check_training(report, result, outcome)
    if result.state == "SUCCEEDED":
        if task.mode is TaskMode.INTERACTIVE:
            _audit_eval_session(report, result, signed, outcome, task)
        else:
            outcomes = _check_signed_outcomes(report, result, outcome, task)
            source = submission_dir or run_dir / "submission"
            evidence = _audit_batch(
                report, result, signed, outcome, task, seeds, source, workers, outcomes
            )
    else:
        report.add("metrics", True, f"job {result.state}: no metrics to re-run")
    _check_score(report, doc, result, signed, outcome, full_task, reg, evidence)
    return report


# ------------------------------------------------------------ reading ---


def load_report(path: Path) -> RunReport | StoppedRunReport | str:
    """A ``result.json``: a completed or a stopped run's report, or why there is none."""
    try:
        return load_run_report(path)
    except FileNotFoundError:
        return (
            f"{path} does not exist: the run was interrupted before the harness wrote its "
            "report, so there is no result to audit"
        )
    except (OSError, UnicodeDecodeError) as exc:
        return f"cannot read {path}: {exc}"
    except (json.JSONDecodeError, RecursionError) as exc:
        return f"{path} is not valid JSON: {exc}"
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        return f"{path} is not a run report: {where}: {first['msg']}"


def stopped_summary(doc: StoppedRunReport) -> str:
    """How a stopped run ended, in a few words: 'SIGINT during agent'."""
    if doc.state == "interrupted":
        return f"{doc.signal or 'stopped'} during {doc.phase}"
    return f"during {doc.phase}: {doc.reason}"


def _audit_stopped(run_dir: Path, doc: StoppedRunReport, public_key: str | None) -> AuditReport:
    """Nothing to audit; the trajectory still checked against what the run recorded."""
    report = AuditReport(
        run_id=doc.run_id,
        fatal=f"run {doc.run_id} was {doc.state} ({stopped_summary(doc)}): nothing was "
        "scored, nothing to audit",
        stopped=doc,
    )
    traj = verify_file(
        run_dir / "trajectory.jsonl",
        public_key,
        expected_run_id=doc.run_id,
        expected_head=doc.trajectory_head or None,
        expected_events=doc.trajectory_events or None,
    )
    report.add("trajectory", traj.ok, traj.summary())
    return report


# ---------------------------------------------------------- comparing ---


# -------------------------------------------------------------- checks ---


def _check_secret(
    report: AuditReport, secret: bytes, result: EvalResult, signed: _Signed | None
) -> None:
    """SHA256(secret) against result.json's secret_sha256 and the signed commitment's."""
    secret_sha = hashlib.sha256(secret).hexdigest()
    commitment = None if signed is None else signed.first(COMMITMENT_EVENT_KIND)
    parts = [
        f"SHA256(secret) {'matches' if secret_sha == result.secret_sha256 else 'differs from'} "
        "the published secret_sha256"
    ]
    ok = secret_sha == result.secret_sha256
    if commitment is not None:
        same = commitment.payload.get("secret_sha256") == secret_sha
        ok = ok and same
        parts.append(f"{'matches' if same else 'differs from'} {_label(commitment)}")
    else:
        ok = False
        parts.append("no verified seed_commitment event to check it against")
    report.add("secret commitment", ok, "; ".join(parts))


def _smoke(result: EvalResult, outcome: Event | None) -> SmokeRun | None:
    """The smoke run the evaluator signed, else result.json's claim (checked by the seeds)."""
    if outcome is not None and outcome.kind == "result":
        raw = outcome.payload.get("smoke_run")
        if raw is None:
            return None
        try:
            return SmokeRun.model_validate(raw)
        except pydantic.ValidationError:
            return result.smoke_run
    return result.smoke_run


def _audit_batch(
    report: AuditReport,
    result: EvalResult,
    signed: _Signed | None,
    outcome: Event | None,
    task: TaskSpec,
    seeds: Sequence[HiddenSeed],
    source: Path,
    workers: int | None,
    signed_outcomes: BatchOutcomes | None = None,
) -> _Evidence:
    """Check the files against the signed hashes, re-run them, compare with the signed metrics
    (and the re-run's per-episode outcomes with the signed ones)."""
    assert task.contract is not None
    evidence = _Evidence.claimed(result)
    received = None if signed is None else signed.last_of_job("submission_received")
    if received is None:
        why = "the trajectory does not verify" if signed is None else "it is missing"
        report.add(
            "submission files",
            False,
            f"not checked, not re-run: no signed `submission_received` event of job "
            f"{result.job_id!r} to check the files against ({why})",
        )
        return evidence
    expected = _dict(received.payload, "files")
    with tempfile.TemporaryDirectory(prefix="ale-audit-") as tmp:
        try:
            files = snapshot_submission(source, "", task.contract, Path(tmp) / "snap")
        except SubmissionRejected as exc:
            report.add("submission files", False, str(exc))
            return evidence
        hashes = {f.name: f.sha256 for f in files}
        if hashes != expected:
            diffs = [
                f"{name} sha256 {str(hashes.get(name, 'missing'))[:16]}... differs from "
                f"{_label(received)}: {str(expected.get(name, 'missing'))[:16]}..."
                for name in sorted(set(hashes) | set(expected))
                if hashes.get(name) != expected.get(name)
            ]
            report.add(
                "submission files",
                False,
                f"{source} does not hold the evaluated files: {'; '.join(diffs)} (not re-run; "
                "pass --submission with the evaluated files)",
            )
            return evidence
        report.add(
            "submission files",
            True,
            f"identical to the evaluated snapshot recorded by {_label(received)}",
        )
        try:
            artifact = load_artifact(files, task)
        except SubmissionRejected as exc:
            report.add("metrics", False, f"the evaluated files no longer load: {exc}")
            return evidence
        blobs, shapes = collect_evidence(files, artifact)
        evidence = _Evidence(
            blobs,
            shapes,
            "gate evidence rebuilt from the verified submission files",
            learning_curve=evidence.learning_curve,
            training=evidence.training,
        )
    runs = episode_plan(task, seeds)
    # the factory the evaluator builds its executor with (.evaluator.config.open_executor)
    pool = make_executor("local", workers=workers)
    try:
        outcomes = pool.run(
            task, artifact, [seed for _, seed in runs], indices=[i for i, _ in runs]
        )
    finally:
        pool.shutdown()
    again = summarize(outcomes, (m.name for m in task.metrics))
    reference, ref_name = _reference_metrics(result, signed, outcome)
    exact = {k: v for k, v in again.items() if k not in HOST_TIMED}
    claimed = {k: v for k, v in reference.items() if k not in HOST_TIMED}
    report.add(
        "metrics",
        reference is not None and _same(exact, claimed),
        f"re-run vs {ref_name}: "
        + ", ".join(f"{k} {again[k]!r} vs {reference.get(k)!r}" for k in sorted(exact)),
    )
    timed = sorted(k for k in again if k in HOST_TIMED)
    if timed:
        report.add(
            "timed metrics",
            True,
            f"re-measured on this host, not compared (wall-clock, host-dependent), vs {ref_name}: "
            + ", ".join(
                f"{k} {again[k]:.4g} vs {reference.get(k, float('nan')):.4g}" for k in timed
            ),
        )
    _check_rerun_episodes(report, result, outcomes, compare_lengths=not timed)
    if signed_outcomes is not None:
        _check_rerun_outcomes(report, signed_outcomes, outcomes, task, outcome)
    return evidence


def _check_signed_outcomes(
    report: AuditReport, result: EvalResult, outcome: Event | None, task: TaskSpec
) -> BatchOutcomes | None:
    """The signed per-episode outcomes of a batch job: the task's backend's, one per episode
    of result.json, and reproducing the signed metrics exactly (the same measurement)."""
    if outcome is None or outcome.kind != "result":
        report.add("outcomes", False, "not checked: no signed `result` event")
        return None
    where = _label(outcome)
    raw = outcome.payload.get("outcomes")
    if raw is None:
        report.add("outcomes", False, f"{where} holds no per-episode outcomes")
        return None
    try:
        signed_outcomes: BatchOutcomes = _Outcomes.validate_python(raw)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        report.add("outcomes", False, f"{where}'s outcomes do not parse: {loc}: {first['msg']}")
        return None
    entries = outcome_entries(signed_outcomes)
    problems = []
    if signed_outcomes.backend != task.eval.rollout:
        problems.append(
            f"{where}'s outcomes are of backend {signed_outcomes.backend!r}; the task's is "
            f"{task.eval.rollout!r}"
        )
    indices = [e.index for e in entries]
    if indices != [e.index for e in result.episodes]:
        problems.append(
            f"{where}'s outcomes are of episodes {indices}; result.json's episodes are "
            f"{[e.index for e in result.episodes]}"
        )
    again = summarize(episode_outcomes(signed_outcomes), (m.name for m in task.metrics))
    for name, mine, theirs in _metric_diffs(again, _dict(outcome.payload, "metrics")):
        problems.append(
            f"{name} recomputed from {where}'s outcomes is {mine}; its metrics say {theirs}"
        )
    report.add(
        "outcomes",
        not problems,
        "; ".join(problems)
        or f"{len(entries)} per-episode outcomes ({signed_outcomes.backend}) signed by {where} "
        "reproduce its metrics: "
        + ", ".join(f"{k} {again[k]!r}" for k in sorted(again)),
    )
    return signed_outcomes


def _check_rerun_outcomes(
    report: AuditReport,
    signed_outcomes: BatchOutcomes,
    rerun: Sequence[EpisodeOutcome],
    task: TaskSpec,
    outcome: Event | None,
) -> None:
    """The re-run's per-episode outcomes against the signed ones: every field exactly, except
    the host-dependent ones (wall-clock planning times...), which are re-measured and shown."""
    where = "the signed outcomes" if outcome is None else f"{_label(outcome)}'s outcomes"
    again = {
        e.index: e
        for e in outcome_entries(batch_outcomes(task.eval.rollout, task.eval.base_seeds, rerun))
    }
    theirs = {e.index: e for e in outcome_entries(signed_outcomes)}
    problems = []
    if again.keys() != theirs.keys():
        problems.append(f"{where} are of episodes {sorted(theirs)}, the re-run ran {sorted(again)}")
    loose: set[str] = set()
    for index in sorted(again.keys() & theirs.keys()):
        a, b = again[index], theirs[index]
        skip = type(a).host_dependent
        loose |= skip
        mine = a.model_dump(exclude=set(skip))
        signed_fields = b.model_dump(exclude=set(skip))
        diff = _first_diff(mine, signed_fields)
        if type(a) is not type(b) or diff is not None:
            problems.append(f"episode {index} of the re-run differs from {where}: {diff}")
    shown = []
    common = sorted(again.keys() & theirs.keys())
    for name in sorted(loose):
        values = [(getattr(again[i], name), getattr(theirs[i], name)) for i in common]
        if values and all(isinstance(x, int | float) for pair in values for x in pair):
            re_mean = float(np.mean([x for x, _ in values]))
            signed_mean = float(np.mean([y for _, y in values]))
            shown.append(f"{name} mean {re_mean:.4g} re-run vs {signed_mean:.4g} signed")
        else:
            same = sum(x == y for x, y in values)
            shown.append(f"{name} the same for {same} of {len(values)}")
    note = (
        f"; re-measured on this host, not compared (host-dependent): {', '.join(shown)}"
        if shown
        else ""
    )
    report.add(
        "re-run outcomes",
        not problems,
        "; ".join(problems[:3])
        or f"{len(theirs)} per-episode outcomes of the re-run match {where}" + note,
    )


def _reference_metrics(
    result: EvalResult, signed: _Signed | None, outcome: Event | None
) -> tuple[dict[str, Any], str]:
    """The metrics a recomputation must match: the signed ones; result.json's only as a label
    for a run whose signed record is missing (that case already fails elsewhere)."""
    if outcome is not None and outcome.kind == "result":
        return _dict(outcome.payload, "metrics"), f"{_label(outcome)}'s metrics"
    why = "the trajectory does not verify" if signed is None else "no signed result"
    return dict(result.metrics), f"result.json's metrics (unsigned: {why})"


def _check_rerun_episodes(
    report: AuditReport,
    result: EvalResult,
    outcomes: Iterable[EpisodeOutcome],
    *,
    compare_lengths: bool,
) -> None:
    """result.json's per-episode records against the re-run (the signed result has returns only).

    A planning task's episode length counts collision checks within a time
    limit, which is host-dependent like its timed metrics, so there only the
    returns and flags are compared.
    """
    again = {o.index: o for o in outcomes}
    claimed = {e.index: e for e in result.episodes}
    problems = []
    if again.keys() != claimed.keys():
        problems.append(
            f"result.json has episodes {sorted(claimed)}, the re-run ran {sorted(again)}"
        )
    for index in sorted(again.keys() & claimed.keys()):
        o, e = again[index], claimed[index]
        mine = (o.ret, o.length if compare_lengths else None, o.terminated, o.success)
        theirs = (
            e.episode_return,
            e.length if compare_lengths else None,
            e.terminated,
            e.success,
        )
        if not _same(mine, theirs):
            problems.append(
                f"result.json episode {index} (return {e.episode_return!r}, length {e.length}, "
                f"terminated {e.terminated}) differs from the re-run (return {o.ret!r}, "
                f"length {o.length}, terminated {o.terminated})"
            )
    what = "returns, lengths and flags" if compare_lengths else "returns and flags"
    report.add(
        "episodes",
        not problems,
        "; ".join(problems[:3]) or f"{len(claimed)} episodes' {what} match the re-run",
    )


def _audit_eval_session(
    report: AuditReport,
    result: EvalResult,
    signed: _Signed | None,
    outcome: Event | None,
    task: TaskSpec,
) -> None:
    """Episodes against the signed ``episode_summary`` events; metrics recomputed from those."""
    if signed is None:
        report.add("episodes", False, "not checked: the trajectory does not verify")
        report.add("metrics", False, "not recomputed: the trajectory does not verify")
        return
    summaries: dict[int, tuple[Event, EpisodeRecord | None]] = {}
    for event in signed.job:
        if event.kind != "episode_summary":
            continue
        fields = {k: v for k, v in event.payload.items() if k not in ("job_id", "session_id")}
        try:
            record: EpisodeRecord | None = EpisodeRecord.model_validate(fields)
        except pydantic.ValidationError:
            record = None
        index = record.index if record is not None else event.payload.get("index")
        if isinstance(index, int):
            summaries[index] = (event, record)
    claimed = {e.index: e for e in result.episodes}
    problems = []
    for index in sorted(claimed.keys() - summaries.keys()):
        problems.append(f"result.json episode {index} has no signed `episode_summary` event")
    for index in sorted(summaries.keys() - claimed.keys()):
        problems.append(f"{_label(summaries[index][0])} (episode {index}) is not in result.json")
    for index in sorted(claimed.keys() & summaries.keys()):
        event, record = summaries[index]
        e = claimed[index]
        if record is None:
            problems.append(f"{_label(event)} does not hold an episode record")
        elif not _same(e.model_dump(), record.model_dump()):
            problems.append(
                f"result.json episode {index} (return {e.episode_return!r}, length {e.length}) "
                f"differs from {_label(event)}: return {record.episode_return!r}, "
                f"length {record.length}"
            )
    report.add(
        "episodes",
        not problems,
        "; ".join(problems[:3])
        or f"{len(claimed)} episodes match the trajectory's signed episode_summary events",
    )
    records = [r for _, r in summaries.values() if r is not None]
    again = summarize(
        [
            EpisodeOutcome(r.index, r.episode_return, r.length, r.terminated, success=r.success)
            for r in sorted(records, key=lambda r: r.index)
        ],
        (m.name for m in task.metrics),
    )
    reference, ref_name = _reference_metrics(result, signed, outcome)
    report.add(
        "metrics",
        outcome is not None and _same(again, reference),
        f"recomputed from the signed episode_summary events vs {ref_name}: "
        + ", ".join(f"{k} {again[k]!r} vs {reference.get(k)!r}" for k in sorted(again)),
    )


# --------------------------------------------------------- checkpoints ---


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


def _audit_checkpoints(
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


def _check_learning_curve(
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


def _check_failed_checkpoints(
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


# --------------------------------------------------------------- score ---
