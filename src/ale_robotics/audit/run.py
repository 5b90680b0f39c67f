"""The audit of one run: its result.json read, each claim checked, in order.

:func:`audit_run` is the audit's entry point (the checks it makes are listed in the
package's docstring, :mod:`ale_robotics.audit`); the re-runs of a batch job and an eval
session's episodes are :mod:`.rerun`'s, the checkpoints' :mod:`.checkpoints`'.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pydantic

from ale_robotics.audit.checkpoints import (
    audit_checkpoints,
    check_failed_checkpoints,
    check_learning_curve,
)
from ale_robotics.audit.rerun import audit_batch, audit_eval_session, check_signed_outcomes
from ale_robotics.claims import AuditReport
from ale_robotics.claims import ScoreEvidence as _Evidence
from ale_robotics.claims import SignedEvents as _Signed
from ale_robotics.claims import check_job as _check_job
from ale_robotics.claims import check_outcome as _check_outcome
from ale_robotics.claims import check_score as _check_score
from ale_robotics.claims import check_training as _check_training
from ale_robotics.claims import event_label as _label
from ale_robotics.claims import load_signed as _load_trajectory
from ale_robotics.claims import payload_list as _list
from ale_robotics.errors import AleError
from ale_robotics.evaluator.batch.smoke import smoke_task
from ale_robotics.evaluator.runs.checkpoints import (
    checkpoint_settings,
)
from ale_robotics.harness.report import RunReport, StoppedRunReport, load_run_report
from ale_robotics.model.outcomes import (
    BatchOutcomes,
)
from ale_robotics.model.result import EvalResult, SmokeRun
from ale_robotics.seeds import HiddenSeed, derive_seeds
from ale_robotics.tasks.registry import Registry, default_registry
from ale_robotics.tasks.spec import TaskMode, TaskSpec
from ale_robotics.trajectory import COMMITMENT_EVENT_KIND, Event, verify_file

__all__ = ["audit_run", "load_report", "read_secret", "stopped_summary"]


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
    full_task = _check_task_config(report, reg, result)
    if full_task is None:
        return report
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
    _check_seed_commitments(report, result, signed, seeds)

    evidence = _Evidence.claimed(result)
    if checkpoint_settings(full_task) is not None:
        curve = audit_checkpoints(report, result, signed, full_task, secret, state_dir)
        evidence.learning_curve = check_learning_curve(report, result, signed, outcome, curve)
        check_failed_checkpoints(report, result, signed, outcome, curve)
    if task.mode is not TaskMode.INTERACTIVE:
        evidence.training = _check_training(report, result, outcome)
    if result.state == "SUCCEEDED":
        if task.mode is TaskMode.INTERACTIVE:
            audit_eval_session(report, result, signed, outcome, task)
        else:
            outcomes = check_signed_outcomes(report, result, outcome, task)
            source = submission_dir or run_dir / "submission"
            evidence = audit_batch(
                report, result, signed, outcome, task, seeds, source, workers, outcomes
            )
    else:
        report.add("metrics", True, f"job {result.state}: no metrics to re-run")
    _check_score(report, doc, result, signed, outcome, full_task, reg, evidence)
    return report


def _check_task_config(report: AuditReport, reg: Registry, result: EvalResult) -> TaskSpec | None:
    """The installed task config, checked against the evaluated one's hash; None (the check
    failed) when the task is not installed."""
    try:
        task_entry = reg.entry(result.task_id)
    except AleError as exc:
        report.add("task config", False, exc.message)
        return None
    report.add(
        "task config",
        task_entry.sha256 == result.task_config_sha256,
        f"installed config sha256 {task_entry.sha256[:12]}..., evaluated "
        f"{result.task_config_sha256[:12]}...",
    )
    return task_entry.spec


def _check_seed_commitments(
    report: AuditReport, result: EvalResult, signed: _Signed | None, seeds: list[HiddenSeed]
) -> None:
    """The recomputed seeds' commitments against the signed ones and the result's episodes."""
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


# --------------------------------------------------------------- score ---
