"""The audit's measurements: a batch job re-run on the recomputed seeds, an eval session's
episodes against its signed summaries.

Split from :mod:`.run` (which calls these once the claims are checked) because they are
the audit's one expensive part: the only checks that run the task's rollouts again.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pydantic

from ale_robotics.claims import AuditReport
from ale_robotics.claims import ScoreEvidence as _Evidence
from ale_robotics.claims import SignedEvents as _Signed
from ale_robotics.claims import event_label as _label
from ale_robotics.claims import first_diff as _first_diff
from ale_robotics.claims import metric_diffs as _metric_diffs
from ale_robotics.claims import payload_dict as _dict
from ale_robotics.claims import same as _same
from ale_robotics.evaluator.batch.evidence import collect_evidence
from ale_robotics.evaluator.batch.pipeline import summarize
from ale_robotics.evaluator.batch.plan import episode_plan, load_artifact
from ale_robotics.evaluator.batch.snapshot import snapshot_submission
from ale_robotics.evaluator.execution import make_executor
from ale_robotics.evaluator.results.metrics import HOST_TIMED, task_metrics
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.model.kind_registry import get_kind
from ale_robotics.model.outcomes import (
    BatchOutcomes,
    batch_outcomes,
    episode_outcomes,
    outcome_entries,
)
from ale_robotics.model.result import EpisodeRecord, EvalResult
from ale_robotics.model.rollout_kind import Artifact
from ale_robotics.seeds import HiddenSeed
from ale_robotics.submission.rejected import SubmissionRejected
from ale_robotics.tasks.spec import TaskSpec
from ale_robotics.trajectory import Event

__all__ = ["audit_batch", "audit_eval_session", "check_signed_outcomes"]

_Outcomes = pydantic.TypeAdapter[Any](BatchOutcomes)


def audit_batch(
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
    if not source.is_dir():
        report.add(
            "submission files",
            False,
            f"not checked, not re-run: {source} is not a directory (a run on a shared "
            f"evaluator keeps its submission in the evaluator's SUBMISSION_DIR/{result.run_id}:"
            " pass it as the submission dir)",
        )
        return evidence
    verified = _verified_artifact(report, received, task, source, evidence)
    if verified is None:
        return evidence
    artifact, evidence = verified
    if signed_outcomes is not None:  # what the signed outcomes recorded of the host's timing
        artifact = get_kind(task.eval.rollout).rerun_artifact(artifact, signed_outcomes)
    runs = episode_plan(task, seeds)
    # the factory the evaluator builds its executor with (.evaluator.config.open_executor)
    pool = make_executor("local", workers=workers)
    try:
        outcomes = pool.run(
            task, artifact, [seed for _, seed in runs], indices=[i for i, _ in runs]
        )
    finally:
        pool.shutdown()
    timed = _check_rerun_metrics(report, result, signed, outcome, task, outcomes)
    _check_rerun_episodes(report, result, outcomes, compare_lengths=not timed)
    if signed_outcomes is not None:
        _check_rerun_outcomes(report, signed_outcomes, outcomes, task, outcome)
    return evidence


def _verified_artifact(
    report: AuditReport,
    received: Event,
    task: TaskSpec,
    source: Path,
    evidence: _Evidence,
) -> tuple[Artifact, _Evidence] | None:
    """The artifact of ``source``'s files when they are the evaluated ones (their hashes
    those of the signed ``submission_received`` event), with the gate evidence rebuilt
    from them; None (the failed check added) when they are not, or no longer load."""
    assert task.contract is not None
    expected = _dict(received.payload, "files")
    with tempfile.TemporaryDirectory(prefix="ale-audit-") as tmp:
        try:
            files = snapshot_submission(source, "", task.contract, Path(tmp) / "snap")
        except SubmissionRejected as exc:
            report.add("submission files", False, str(exc))
            return None
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
            return None
        report.add(
            "submission files",
            True,
            f"identical to the evaluated snapshot recorded by {_label(received)}",
        )
        try:
            artifact = load_artifact(files, task)
        except SubmissionRejected as exc:
            report.add("metrics", False, f"the evaluated files no longer load: {exc}")
            return None
        blobs, shapes = collect_evidence(files, artifact)
        evidence = _Evidence(
            blobs,
            shapes,
            "gate evidence rebuilt from the verified submission files",
            learning_curve=evidence.learning_curve,
            training=evidence.training,
        )
    return artifact, evidence


def _check_rerun_metrics(
    report: AuditReport,
    result: EvalResult,
    signed: _Signed | None,
    outcome: Event | None,
    task: TaskSpec,
    outcomes: list[EpisodeOutcome],
) -> list[str]:
    """The re-run's metrics against the signed ones, exactly, but for the host-timed ones
    (re-measured and shown, never compared); returns the host-timed names."""
    again = task_metrics(outcomes, task)
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
            f"re-measured on this host, not compared (timed: host-dependent), vs {ref_name}: "
            + ", ".join(
                f"{k} {again[k]:.4g} vs {reference.get(k, float('nan')):.4g}" for k in timed
            ),
        )
    return timed


def check_signed_outcomes(
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
    again = task_metrics(episode_outcomes(signed_outcomes), task)
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


def audit_eval_session(
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
