"""The checks of result.json's claims against the signed events: job, outcome, training,
score, and :func:`check_claims`, which runs them all (see :mod:`ale_robotics.claims`)."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic

from ale_robotics.claims.report import AuditReport
from ale_robotics.claims.signed import (
    SignedEvents,
    event_label,
    files_text,
    first_diff,
    list_diff,
    load_signed,
    metric_diffs,
    outcome_state,
    payload_dict,
    payload_list,
    same,
)
from ale_robotics.errors import AleError
from ale_robotics.harness.evidence import gate_evidence
from ale_robotics.harness.report import RunReport, StoppedRunReport, submission_sha256
from ale_robotics.model.result import CurvePoint, EvalResult, Floor, TrainingUsage
from ale_robotics.scoring import ScoreReport, score
from ale_robotics.tasks.registry import Registry, default_registry
from ale_robotics.tasks.spec import TaskMode, TaskSpec
from ale_robotics.trajectory import COMMITMENT_EVENT_KIND, Event

__all__ = [
    "ScoreEvidence",
    "check_claims",
    "check_job",
    "check_outcome",
    "check_score",
    "check_training",
    "score_digest",
]


def check_job(
    report: AuditReport, result: EvalResult, signed: SignedEvents | None, task: TaskSpec
) -> None:
    """The job result.json names is one the evaluator signed events for, on the same task."""
    if signed is None:
        report.add("signed job", False, "not checked: the trajectory does not verify")
        return
    if not signed.job:
        report.add(
            "signed job",
            False,
            f"result.json names job {result.job_id!r}, which no signed evaluator event mentions",
        )
        return
    problems = []
    commitment = signed.first(COMMITMENT_EVENT_KIND)
    for event in (commitment, signed.last_of_job("submission_received")):
        if event is not None and event.payload.get("task_id", result.task_id) != result.task_id:
            problems.append(
                f"result.json task {result.task_id!r} differs from {event_label(event)}: "
                f"{event.payload['task_id']!r}"
            )
    opened = "session_opened" if task.mode is TaskMode.INTERACTIVE else "submission_received"
    if signed.last_of_job(opened) is None:
        problems.append(f"no signed `{opened}` event for job {result.job_id!r}")
    report.add(
        "signed job",
        not problems,
        "; ".join(problems)
        or f"job {result.job_id} of task {result.task_id}: {len(signed.job)} signed events",
    )
    if task.mode is TaskMode.INTERACTIVE:
        return
    received = signed.last_of_job("submission_received")
    if received is None:
        return
    files = payload_dict(received.payload, "files")
    matches = same(result.submission_files, files)
    report.add(
        "signed submission",
        matches,
        f"result.json submission_files match {event_label(received)}"
        if matches
        else f"result.json submission_files {files_text(result.submission_files)} differ from "
        f"{event_label(received)}: {files_text(files)}",
    )


def check_outcome(
    report: AuditReport, doc: RunReport, result: EvalResult, signed: SignedEvents | None
) -> Event | None:
    """result.json's state, failure, metrics and episode returns against the signed outcome."""
    if signed is None:
        report.add("signed result", False, "not checked: the trajectory does not verify")
        return None
    outcome = signed.outcome()
    if outcome is None:
        report.add(
            "signed result",
            False,
            f"the signed `result` event of job {result.job_id!r} is missing (nor is there a "
            "failed `validation`): the evaluator never signed an outcome for this job",
        )
        return None
    p = outcome.payload
    where = event_label(outcome)
    state = outcome_state(outcome)
    problems = []
    for what, claimed in (("eval_result.state", result.state), ("job_state", doc.job_state)):
        if claimed != state:
            problems.append(f"result.json {what} {str(claimed)!r} differs from {where}: {state!r}")
    if outcome.kind == "validation":
        if "reason" in p and result.failure_reason != p["reason"]:
            problems.append(f"result.json failure_reason differs from {where}: {p['reason']!r}")
    else:
        problems += _result_event_problems(result, p, where, state)
    if result.official and (result.smoke_run is not None or not result.read_on_harness_channel):
        problems.append(
            "result.json eval_result.official is true for a result that is a smoke run or was "
            "not read on the harness channel"
        )
    top = None if doc.smoke_run is None else doc.smoke_run.model_dump()
    inner = None if result.smoke_run is None else result.smoke_run.model_dump()
    if top != inner:
        problems.append(f"result.json smoke_run {top} differs from eval_result.smoke_run {inner}")
    report.add(
        "signed result",
        not problems,
        "; ".join(problems)
        or (
            f"state {state} and failure reason match {where}"
            if outcome.kind == "validation"
            else f"state {state}, metrics, episode returns and outcomes match {where}"
        ),
    )
    return outcome


def _result_event_problems(
    result: EvalResult, p: Mapping[str, Any], where: str, state: str
) -> list[str]:
    """Where result.json's result differs from the signed ``result`` event's payload ``p``:
    failure, metrics, episode returns, per-episode outcomes, smoke run, officialness."""
    problems: list[str] = []
    if "failure_source" in p and result.failure_source != p["failure_source"]:
        problems.append(
            f"result.json failure_source {str(result.failure_source)!r} differs from {where}: "
            f"{p['failure_source']!r}"
        )
    if "reason" in p and result.failure_reason != p["reason"]:
        problems.append(f"result.json failure_reason differs from {where}: {p['reason']!r}")
    signed_metrics = payload_dict(p, "metrics")
    for name, claimed_v, signed_v in metric_diffs(result.metrics, signed_metrics):
        problems.append(f"result.json metrics {name} {claimed_v} differs from {where}: {signed_v}")
    if "episode_returns" in p or state == "SUCCEEDED":
        returns = [e.episode_return for e in result.episodes]
        diff = list_diff(returns, payload_list(p, "episode_returns"))
        if diff is not None:
            problems.append(
                f"result.json episode returns differ from {where}'s episode_returns: {diff}"
            )
    claimed_outcomes = None if result.outcomes is None else result.outcomes.model_dump(mode="json")
    diff = first_diff(claimed_outcomes, p.get("outcomes"))
    if diff is not None:
        problems.append(
            f"result.json eval_result.outcomes differ from {where}'s outcomes "
            f"(result.json vs signed): {diff.lstrip('.')}"
        )
    claimed_floor = None if result.floor is None else result.floor.model_dump(mode="json")
    diff = first_diff(claimed_floor, p.get("floor"))
    if diff is not None:
        problems.append(
            f"result.json eval_result.floor differs from {where}'s floor "
            f"(result.json vs signed): {diff.lstrip('.') or 'one of them has none'}"
        )
    signed_smoke = p.get("smoke_run")
    claimed_smoke = None if result.smoke_run is None else result.smoke_run.model_dump()
    if not same(claimed_smoke, signed_smoke):
        problems.append(
            f"result.json eval_result.smoke_run {claimed_smoke} differs from {where}: "
            f"{signed_smoke}"
        )
    if result.official and signed_smoke is not None:
        problems.append(
            f"result.json eval_result.official is true, but {where} signs a smoke run "
            f"({signed_smoke}): a smoke run is never official"
        )
    return problems


@dataclass
class ScoreEvidence:
    """What the faithfulness gate reads, and where the audit got it from."""

    files: dict[str, str]
    shapes: dict[str, list[int]]
    note: str
    learning_curve: list[CurvePoint] = field(default_factory=list)
    """The learning curve of the signed checkpoint events (result.json's is a claim)."""
    training: TrainingUsage | None = None
    """The practice-step count of the signed ``result`` event (batch results)."""

    @classmethod
    def claimed(cls, result: EvalResult) -> ScoreEvidence:
        return cls(
            dict(result.evidence_files),
            dict(result.tensor_shapes),
            "gate evidence as result.json gives it (evidence files kept only where they hash "
            "to the signed submission; tensor shapes are unsigned and not recomputed)",
            learning_curve=list(result.learning_curve),
            training=result.training,
        )


def check_training(
    report: AuditReport, result: EvalResult, outcome: Event | None
) -> TrainingUsage | None:
    """A batch result's training count against the signed ``result`` event's; returns the
    signed one (None when the evaluator signed none: its simulator was the agent's)."""
    signed_raw = None
    if outcome is not None and outcome.kind == "result":
        signed_raw = outcome.payload.get("training")
    claimed = None if result.training is None else result.training.model_dump(mode="json")
    if signed_raw is None and claimed is None:
        return None
    where = "no signed result" if outcome is None else event_label(outcome)
    ok = same(claimed, signed_raw)
    report.add(
        "training steps",
        ok,
        f"result.json's training {'matches' if ok else 'differs from'} {where}: "
        + (
            f"{claimed} vs {signed_raw}"
            if not ok
            else f"{result.training and result.training.summary()}"
        ),
    )
    if not isinstance(signed_raw, dict):
        return None
    try:
        return TrainingUsage.model_validate(signed_raw)
    except pydantic.ValidationError:
        return None


def score_digest(r: ScoreReport) -> dict[str, object]:
    """The parts of a score report that follow from the metrics, target and evidence
    (not the explanation text, which a smoke run prefixes, nor the gate's reasons)."""
    return {
        "status": r.status,
        "score": r.score,
        "primary_measured": r.primary_measured,
        "measured": dict(r.measured),
        "target_value": r.target_value,
        "floor": r.floor,
        "floor_normalized": r.floor_normalized,
        "ratio": r.ratio,
        "base_score": r.base_score,
        "penalties": [(p.metric, p.factor) for p in r.penalties],
        "conditions": [(c.metric, c.met) for c in r.conditions],
        "gate": None
        if r.gate is None
        else (r.gate.passed, [(c.name, c.passed) for c in r.gate.checks]),
    }


def _with_signed_floor(report: ScoreReport, outcome: Event) -> ScoreReport:
    """``report`` with the floor of the signed ``result`` event beside it, as the harness
    puts result.json's there (harness/verdict.py)."""
    raw = outcome.payload.get("floor")
    if not isinstance(raw, dict):
        return report
    try:
        floor = Floor.model_validate(raw)
    except pydantic.ValidationError:
        return report
    value = floor.metrics.get(report.primary_metric)
    return report if value is None else report.with_floor(value, floor.policy)


def check_score(
    report: AuditReport,
    doc: RunReport,
    result: EvalResult,
    signed: SignedEvents | None,
    outcome: Event | None,
    task: TaskSpec,
    reg: Registry,
    evidence: ScoreEvidence,
) -> None:
    """Recompute the score as the harness does (harness/verdict.py), from the signed outcome."""
    if outcome is None:
        why = "the trajectory does not verify" if signed is None else "no signed outcome"
        report.add("score", False, f"not recomputed: {why} of job {result.job_id!r}")
        return
    gated = task.genre == "reproduction" or task.scoring.gate is not None
    received = None if signed is None else signed.last_of_job("submission_received")
    signed_files = {} if received is None else payload_dict(received.payload, "files")
    state = outcome_state(outcome)
    try:
        target = reg.target(task.id)
        if state == "SUCCEEDED":
            metrics = payload_dict(outcome.payload, "metrics")
            with tempfile.TemporaryDirectory(prefix="ale-audit-gate-") as tmp:
                basis = result.model_copy(
                    update={
                        "evidence_files": evidence.files,
                        "tensor_shapes": evidence.shapes,
                        "submission_files": signed_files,
                        "learning_curve": evidence.learning_curve,
                        "training": evidence.training,
                    }
                )
                # the harness's own measurements (wall clock, CPU) as result.json records
                # them: the harness is their only witness, the audit has nothing to re-run
                measured = gate_evidence(basis, Path(tmp), task=task, harness=doc.harness_evidence)
                again = _with_signed_floor(score(task, metrics, target, measured), outcome)
            source = f"{event_label(outcome)}'s metrics"
        else:
            again = score(task, {}, target, no_result=f"submission {state.lower()}")
            source = f"{event_label(outcome)}'s state {state}"
    except AleError as exc:
        report.add("score", False, f"not recomputed: {exc.message}")
        return
    mine, theirs = score_digest(again), score_digest(doc.score)
    diffs = [f"{k} {theirs[k]!r} vs {mine[k]!r}" for k in mine if not same(mine[k], theirs[k])]
    note = f"; {evidence.note}" if gated and state == "SUCCEEDED" else ""
    shown = "None" if again.score is None else f"{again.score:.6g}"
    report.add(
        "score",
        not diffs,
        (
            f"result.json's score differs from the one recomputed from {source} with the "
            f"registry's target (result.json vs recomputed): {'; '.join(diffs)}"
            if diffs
            else f"{again.status}, score {shown}: recomputed from {source} with the registry's "
            "target"
        )
        + note,
    )


def check_claims(
    run_dir: Path,
    doc: RunReport | StoppedRunReport,
    *,
    public_key: str | None = None,
    registry: Registry | None = None,
) -> AuditReport:
    """Check what ``doc`` (``run_dir``'s ``result.json``) claims against the run's verified
    signed events (module docstring); never raises for a bad run directory.

    ``public_key`` pins the evaluator's key (64 hex); without it the key the trajectory
    publishes is used, which shows the signed events are consistent, not who signed them.
    A stopped run (interrupted, failed) claims no score: only its trajectory is checked.
    """
    report = AuditReport(run_id=doc.run_id)
    traj, events = load_signed(
        run_dir / "trajectory.jsonl",
        public_key,
        doc.run_id,
        doc.trajectory_head or None,
        doc.trajectory_events or None,
    )
    report.add("trajectory", traj.ok, traj.summary())
    report.public_key = traj.public_key if traj.ok else None
    if isinstance(doc, StoppedRunReport):
        report.stopped = doc
        return report
    result = doc.eval_result
    if result is None:
        claimed = doc.score.score
        ok = not doc.official and (claimed is None or claimed == 0.0)
        report.add(
            "result",
            ok,
            "no evaluator result: the score is "
            + ("none" if claimed is None else f"{claimed:.6g}")
            + ("" if ok else ", and only a signed result can give one (or make a run official)"),
        )
        return report
    signed = None if events is None else SignedEvents(events, result.job_id)
    reg = registry or default_registry()
    try:
        task = reg.entry(result.task_id).spec
    except AleError as exc:
        report.add("task config", False, exc.message)
        return report
    check_job(report, result, signed, task)
    outcome = check_outcome(report, doc, result, signed)
    _check_summary_fields(report, doc, result)
    evidence = ScoreEvidence.claimed(result)
    if task.mode is not TaskMode.INTERACTIVE:
        evidence.training = check_training(report, result, outcome)
    check_score(report, doc, result, signed, outcome, task, reg, evidence)
    return report


def _check_summary_fields(report: AuditReport, doc: RunReport, result: EvalResult) -> None:
    """What listings read from the top of result.json, against the result it summarizes
    (which :func:`check_outcome` checked against the signed events)."""
    problems = []
    official = result.read_on_harness_channel and result.smoke_run is None
    if doc.official and not (official and doc.smoke_run is None):
        problems.append(
            "result.json official is true, but its result is a smoke run or was not read on "
            "the harness channel"
        )
    digest = submission_sha256(result.submission_files)
    if doc.submission_sha256 != digest:
        problems.append(
            f"result.json submission_sha256 {doc.submission_sha256!r} is not the digest of "
            f"its submission_files ({digest!r})"
        )
    report.add(
        "listed facts",
        not problems,
        "; ".join(problems) or "official flag and submission digest follow from the result",
    )
