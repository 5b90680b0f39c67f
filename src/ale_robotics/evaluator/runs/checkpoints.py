"""Checkpoints committed while a run trains, measured by the evaluator (SubmitCheckpoint).

A learning curve the agent writes (``curve.csv``) proves nothing: any numbers fit
in a CSV, and a forged agent passes every check made on it. On a task with
``training.checkpoints`` the agent instead commits its policy as it trains, and
for each checkpoint the evaluator records, in signed events of the run
(:mod:`.checkpoint_records`), what only it can observe:

* the policy, by hash: only the contract's policy file is snapshotted (the
  contract reduced to its ``policy`` role) and kept under
  ``STATE_DIR/snapshots/ckpt-<checkpoint_id>/`` for the audit
  (:func:`.batch.snapshot.reclaim_snapshots` never deletes those);
* the run's practice agent steps when the checkpoint arrived (read once the
  policy file is copied, so no step that shaped it is left out): the evaluator's
  own count (:class:`.training_budget.TrainingLedger`), since the simulator is on
  its side (``training.simulator`` 'evaluator');
* the policy's returns on the task's checkpoint episodes, run here, in-process, on
  hidden seeds derived from ``training.checkpoints.base_seeds`` exactly like the
  eval seeds (:meth:`.state.ledger.RunLedger.checkpoint_seeds`; disjoint base seeds, so
  no checkpoint replays an official episode), or why they could not be measured.
  The events hold each episode's seed commitment, never a seed.

The measured checkpoints are the run's learning curve (:func:`learning_curve`,
:attr:`.result.EvalResult.learning_curve`), which the faithfulness gate reads
instead of the agent's files, and which ``ale-robotics audit`` re-evaluates point
by point from the snapshots (:func:`run_checkpoint` is what both run).

**No oracle.** Whatever the policy does on the hidden episodes, the agent's answer
is the same: SubmitCheckpoint snapshots the file, stamps the practice steps,
signs ``checkpoint_received`` (which uses up one of ``max_checkpoints``) and
answers with the checkpoint's id, index and practice-step count and how many
checkpoints are left. Nothing is evaluated then: the run's checkpoints are
evaluated, in index order, when its result is built (:meth:`CheckpointService.settle`,
called by the result builder), each outcome signed as ``checkpoint`` (the measured
returns) or ``checkpoint_failed`` (a contract rule broken, a non-finite action,
reward or return: the reason). So a failure is no free, unrecorded answer, and
no timing the agent can observe while it trains follows the rollout. (Releases
before answered after evaluating: a good policy's long episodes answered 5-10x
slower than a falling one's, and a NaN "rejected, nothing was recorded", one bit
per free query. Evaluating in a background thread right after answering is not
enough either: the evaluation competes for the interpreter with every call the
evaluator answers, and the agent counting its own GetSpec calls saw how long it
ran: ``benchmarks/checkpoint_leak.py``.) A policy file that breaks a contract
rule is answered the same way (check it first, for free, with ``ale-robotics
check-submission``). Only the trusted side sees outcomes: the signed events, the
official result (:attr:`.result.EvalResult.failed_checkpoints`), the gate.

Submissions are serialized by one lock per evaluator process, which makes a
run's index assignment, its deduplication by ``client_token`` and its
``max_checkpoints`` count consistent (read from the run's signed events under that
lock); evaluations by another, one at a time, in index order. A run's checkpoints
are therefore served by one evaluator process (the embedded evaluator of
``ale-robotics run``, or one shared evaluator), not by several replicas at once.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import shutil
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ale_robotics.errors import (
    FailedPreconditionError,
    ResourceExhaustedError,
)
from ale_robotics.evaluator.batch.pipeline import rollout_episodes, summarize
from ale_robotics.evaluator.batch.plan import episode_plan, load_artifact
from ale_robotics.evaluator.batch.snapshot import (
    CHECKPOINT_PREFIX,
    snapshot_submission,
    staging_dir,
)
from ale_robotics.evaluator.catalog import TaskCatalog
from ale_robotics.evaluator.execution.base import shard_layout
from ale_robotics.evaluator.results.metrics import NonFiniteMetric
from ale_robotics.evaluator.runs.access import RunAccess, check_client_token
from ale_robotics.evaluator.runs.checkpoint_records import (
    CHECKPOINT_EVENT,
    FAILED_EVENT,
    RECEIVED_EVENT,
    CheckpointEpisode,
    CheckpointLog,
    CheckpointMetrics,
    CheckpointRecord,
    FailedCheckpointRecord,
    FailureSource,
    Outcome,
    ReceivedCheckpoint,
    checkpoint_log,
    checkpoint_records,
    failed_points,
    learning_curve,
)
from ale_robotics.evaluator.runs.registry import TRUSTED, Scope
from ale_robotics.evaluator.runs.training_budget import TrainingLedger
from ale_robotics.evaluator.state.ledger import RunLedger
from ale_robotics.model.episode import EpisodeOutcome, PolicyFault
from ale_robotics.model.rollout_kind import Artifact
from ale_robotics.model.snapshot import SnapshotFile
from ale_robotics.seeds import HiddenSeed
from ale_robotics.submission.rejected import SubmissionRejected
from ale_robotics.tasks.contract import SubmissionContract
from ale_robotics.tasks.spec import CheckpointSettings, TaskSpec

__all__ = [
    "CHECKPOINT_EVENT",
    "FAILED_EVENT",
    "POLICY_ROLE",
    "RECEIVED_EVENT",
    "CheckpointEpisode",
    "CheckpointLog",
    "CheckpointMetrics",
    "CheckpointReceipt",
    "CheckpointRecord",
    "CheckpointService",
    "FailedCheckpointRecord",
    "ReceivedCheckpoint",
    "checkpoint_log",
    "checkpoint_records",
    "checkpoint_settings",
    "checkpoint_task",
    "evaluate_checkpoint",
    "failed_points",
    "learning_curve",
    "run_checkpoint",
    "snapshot_dir",
]

log = logging.getLogger(__name__)

POLICY_ROLE = "policy"
"""The contract role a checkpoint consists of (the weights; meta.json and the like are not
part of a checkpoint, and are never read)."""

SETTLE_TIMEOUT_S = 900.0
"""How long :meth:`CheckpointService.settle` waits for the evaluations under way (another
run's, on a shared evaluator) before giving up (the curve then lacks the pending points)."""


def snapshot_dir(snapshots: Path, checkpoint_id: str) -> Path:
    """Where a checkpoint's snapshot is kept: ``snapshots/ckpt-<checkpoint_id>``."""
    return snapshots / f"{CHECKPOINT_PREFIX}{checkpoint_id}"


# ------------------------------------------------------------ evaluation --


def checkpoint_settings(task: TaskSpec) -> CheckpointSettings | None:
    """The task's checkpoint protocol; None when it offers no checkpoints."""
    return task.training.checkpoints if task.training is not None else None


def _policy_contract(contract: SubmissionContract) -> SubmissionContract:
    """The contract reduced to its policy role: what a checkpoint consists of."""
    files = [f for f in contract.files if f.role == POLICY_ROLE]
    if not files:
        raise FailedPreconditionError(
            f"the task's contract has no {POLICY_ROLE!r} file, so it offers no checkpoints"
        )
    return contract.model_copy(update={"files": files})


def checkpoint_task(task: TaskSpec) -> TaskSpec:
    """``task`` as a checkpoint is evaluated: its eval protocol is the checkpoint one
    (``training.checkpoints``: episodes and base seeds; the rest, determinism and shard
    size included, is the task's) and its contract holds only the policy role.

    FAILED_PRECONDITION for a task without checkpoints.
    """
    ckpt = checkpoint_settings(task)
    if ckpt is None or task.contract is None:
        raise FailedPreconditionError(
            f"task {task.id} offers no checkpoints (its config has no training.checkpoints): "
            "submit the final policy with SubmitBatchEval"
        )
    protocol = task.eval.model_copy(
        update={"episodes": ckpt.episodes, "base_seeds": list(ckpt.base_seeds)}
    )
    return task.model_copy(update={"eval": protocol, "contract": _policy_contract(task.contract)})


def run_checkpoint(
    ctask: TaskSpec, artifact: Artifact, seeds: Sequence[HiddenSeed]
) -> list[EpisodeOutcome]:
    """The checkpoint episodes of ``ctask`` (a :func:`checkpoint_task`) in this process, in
    index order: the task's rollout kind on each shard of the task's fixed layout, one
    after the other. The evaluator and the audit both run exactly this, so an audit
    re-run reproduces a checkpoint bit for bit. Raises PolicyFault like any rollout."""
    runs = episode_plan(ctask, seeds)
    shards = shard_layout(ctask, [s for _, s in runs], [i for i, _ in runs])
    outcomes = [o for shard in shards for o in rollout_episodes(ctask, artifact, shard)]
    return sorted(outcomes, key=lambda o: o.index)


def checkpoint_metrics(outcomes: Sequence[EpisodeOutcome]) -> CheckpointMetrics:
    """Mean and standard deviation of the returns (the task metrics' definitions);
    NonFiniteMetric when one is not finite."""
    metrics = summarize(outcomes)
    return CheckpointMetrics(mean_return=metrics["mean_return"], std_return=metrics["std_return"])


def checkpoint_episodes(
    outcomes: Sequence[EpisodeOutcome], seeds: Sequence[HiddenSeed]
) -> list[CheckpointEpisode]:
    return [
        CheckpointEpisode(
            index=int(o.index),
            seed_commitment=seeds[o.index].commitment,
            episode_return=float(o.ret),
            length=int(o.length),
            terminated=bool(o.terminated),
        )
        for o in outcomes
    ]


def _frozen_files(
    folder: Path, received: ReceivedCheckpoint, contract: SubmissionContract
) -> list[SnapshotFile]:
    """The snapshot's files as :func:`.batch.plan.load_artifact` takes them, each checked against
    the hash signed when it was taken. OSError for a file missing or changed since."""
    out = []
    for name, sha in received.files.items():
        spec = next((cf for cf in contract.files if name in cf.names), None)
        if spec is None:
            raise OSError(f"{name} is no file of the contract's {POLICY_ROLE!r} role")
        path = folder / name
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != sha:
            raise OSError(f"{path} changed since it was snapshotted")
        out.append(SnapshotFile(spec.role, name, spec.names[name], path, sha))
    return out


def evaluate_checkpoint(
    received: ReceivedCheckpoint,
    folder: Path,
    ctask: TaskSpec,
    seeds: Sequence[HiddenSeed],
) -> Outcome:
    """The outcome of a received checkpoint (its snapshot in ``folder``): measured on the
    checkpoint episodes of ``ctask`` (a :func:`checkpoint_task`), or why it could not be.

    Deterministic in the snapshot and the seeds, so the audit re-runs exactly this.
    Every failure of the policy is an outcome, never an exception: a contract rule it
    breaks, a non-finite action or reward, a non-finite return; so is a snapshot that
    cannot be read (the evaluator's failure, source 'infrastructure').
    """
    assert ctask.contract is not None
    taken = received.model_dump(exclude={"rejected"})

    def failed(source: FailureSource, rule: str, reason: str) -> FailedCheckpointRecord:
        return FailedCheckpointRecord(**taken, source=source, rule=rule, reason=reason)

    if received.rejected is not None:
        return failed("submission", "contract", f"checkpoint rejected: {received.rejected}")
    try:
        files = _frozen_files(folder, received, ctask.contract)
    except OSError as exc:
        return failed("infrastructure", "evaluator_error", f"the snapshot cannot be read: {exc}")
    try:
        artifact = load_artifact(files, ctask)
    except SubmissionRejected as exc:
        return failed("submission", "contract", f"checkpoint rejected: {exc}")
    try:
        outcomes = run_checkpoint(ctask, artifact, seeds)
        metrics = checkpoint_metrics(outcomes)
    except PolicyFault as exc:  # the trusted side may know where (the harness's view)
        return failed("submission", f"non_finite_{exc.what}", exc.reason)
    except NonFiniteMetric as exc:
        return failed(
            "submission",
            "non_finite_metric",
            f"the policy's checkpoint episodes gave a non-finite {exc.name}",
        )
    return CheckpointRecord(**taken, episodes=checkpoint_episodes(outcomes, seeds), metrics=metrics)


# --------------------------------------------------------------- service --


@dataclass(frozen=True)
class CheckpointReceipt:
    """What SubmitCheckpoint answers: the same whatever the checkpoint's outcome, which is
    decided later (never a return, never a failure)."""

    checkpoint_id: str
    index: int
    practice_steps: int
    deduplicated: bool
    checkpoints_left: int


class CheckpointService:
    """Takes, evaluates and signs the checkpoints of runs (see the module docstring)."""

    def __init__(
        self,
        ledger: RunLedger,
        tasks: TaskCatalog,
        access: RunAccess,
        training: TrainingLedger,
        *,
        snapshots: Path,
    ) -> None:
        self._ledger = ledger
        self._tasks = tasks
        self._access = access
        self._training = training
        self._snapshots = snapshots
        self._lock = threading.Lock()
        """Submissions: index, deduplication, quota and the received event, together."""
        self._eval_lock = threading.Lock()
        """Evaluations: one at a time, each run's in index order."""

    def records(self, run_id: str) -> list[CheckpointRecord]:
        """The run's measured checkpoints, in order."""
        return checkpoint_records(self._ledger.events(run_id))

    def log(self, run_id: str) -> CheckpointLog:
        """The run's checkpoints as its signed events record them."""
        return checkpoint_log(self._ledger.events(run_id))

    def submit(
        self,
        task_id: str,
        run_id: str,
        rel_path: str,
        client_token: str,
        scope: Scope = TRUSTED,
    ) -> CheckpointReceipt:
        """Snapshot the policy at ``rel_path``, stamp it and sign ``checkpoint_received``;
        returns once it is signed. It is evaluated later (:meth:`settle`).

        A retry with the same ``client_token`` gets the first call's checkpoint
        (``deduplicated``). FAILED_PRECONDITION for a task without checkpoints, a closed
        run or a snapshot the evaluator cannot write (nothing is recorded then: retry);
        RESOURCE_EXHAUSTED past ``max_checkpoints``. A policy file that breaks a contract
        rule is taken like any other (its outcome is a failure, recorded and counted):
        the answer says nothing the evaluation decides.
        """
        task = self._tasks.task(task_id)
        ctask = checkpoint_task(task)
        settings = checkpoint_settings(task)
        assert settings is not None and ctask.contract is not None  # checkpoint_task checked
        run = self._access.check_run(run_id, scope)
        if self._access.closed(run):
            raise FailedPreconditionError(f"run {run} is closed: it takes no more checkpoints")
        check_client_token(client_token)
        limit = settings.max_checkpoints
        with self._lock:
            taken = self.log(run).received
            known = next((r for r in taken if r.client_token == client_token), None)
            if known is not None:
                return _receipt(known, True, limit - len(taken))
            if len(taken) >= limit:
                raise ResourceExhaustedError(
                    f"run {run} has committed its {limit} checkpoints (limit: "
                    "training.checkpoints.max_checkpoints); submit the final policy with "
                    "SubmitBatchEval"
                )
            received = self._take(run, ctask, rel_path, client_token, len(taken))
            self._ledger.event(run, task, RECEIVED_EVENT, received.model_dump(mode="json"))
        log.info(
            "run %s: checkpoint %d (%s) received at %d practice steps",
            run,
            received.index,
            received.checkpoint_id,
            received.practice_steps,
        )
        return _receipt(received, False, limit - len(taken) - 1)

    def _take(
        self, run: str, ctask: TaskSpec, rel_path: str, client_token: str, index: int
    ) -> ReceivedCheckpoint:
        """Snapshot and stamp the checkpoint; keep its snapshot. Only copying happens here
        (its time follows the file, never the hidden episodes)."""
        assert ctask.contract is not None
        volume = self._access.submission_root(run, rel_path)
        if volume is None:
            raise FailedPreconditionError("this evaluator has no submission volume configured")
        checkpoint_id = secrets.token_hex(8)
        staging = staging_dir(self._snapshots)
        rejected: str | None = None
        files: dict[str, str] = {}
        try:
            try:
                frozen = snapshot_submission(volume, rel_path, ctask.contract, staging)
            except SubmissionRejected as exc:
                rejected = str(exc)
            # The evaluator's count once the policy is frozen: what the curve's x axis
            # is, whatever the agent says about its training. Read after the copy, so
            # every step that could have shaped these weights is in it (steps taken
            # during the copy count too: the stamp can only be high, never low).
            practice_steps = self._training.used(run)
            if rejected is None:
                # In place before the received event is signed: a signed checkpoint
                # always has its snapshot (a crash in between leaves a snapshot no event
                # names, never the reverse, which would fail the run's audit).
                staging.rename(snapshot_dir(self._snapshots, checkpoint_id))
                files = {f.name: f.sha256 for f in frozen}
        except OSError as exc:
            log.error("cannot snapshot a checkpoint of run %s: %s", run, exc)
            raise FailedPreconditionError(
                f"the evaluator cannot snapshot checkpoints right now ({exc.strerror}); "
                "nothing was recorded, retry later with the same client_token"
            ) from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return ReceivedCheckpoint(
            checkpoint_id=checkpoint_id,
            index=index,
            client_token=client_token,
            files=files,
            practice_steps=practice_steps,
            rejected=rejected,
        )

    # ---------------------------------------------------------- evaluation --

    def settle(self, run_id: str, task: TaskSpec, *, timeout_s: float = SETTLE_TIMEOUT_S) -> None:
        """Evaluate and sign every checkpoint of the run still without an outcome, in index
        order; returns once each has one. The result builder calls it before it reads the
        curve, so a result holds every checkpoint received before it was built (those of
        a crashed evaluator too: the received events and snapshots are on disk).
        ``timeout_s``: how long to wait for another run's evaluations (a shared
        evaluator) before giving up (logged; the result then lacks the pending ones)."""
        if checkpoint_settings(task) is None:
            return
        if not self._eval_lock.acquire(timeout=timeout_s):
            log.error(
                "run %s: the checkpoint evaluations did not finish in %.0f s; the result "
                "lacks the pending ones",
                run_id,
                timeout_s,
            )
            return
        try:
            self._evaluate_pending(run_id, task)
        finally:
            self._eval_lock.release()

    def _evaluate_pending(self, run: str, task: TaskSpec) -> None:
        """Evaluate the run's pending checkpoints in index order, signing each outcome
        (the caller holds the evaluation lock)."""
        ctask = checkpoint_task(task)
        for received in self.log(run).pending():
            seeds = self._ledger.checkpoint_seeds(task, run)
            folder = snapshot_dir(self._snapshots, received.checkpoint_id)
            try:
                outcome = evaluate_checkpoint(received, folder, ctask, seeds)
            # A bug or a resource limit of the evaluator's own (MemoryError...): the
            # result being built must not fail with it, nor the agent be blamed, so it is
            # recorded as the infrastructure's failure, logged in full.
            except Exception as exc:
                log.exception("run %s: checkpoint %s failed to evaluate", run, received.index)
                outcome = FailedCheckpointRecord(
                    **received.model_dump(exclude={"rejected"}),
                    source="infrastructure",
                    rule="evaluator_error",
                    reason=f"the evaluator failed ({type(exc).__name__}); not the policy's fault",
                )
            kind = CHECKPOINT_EVENT if isinstance(outcome, CheckpointRecord) else FAILED_EVENT
            self._ledger.event(run, task, kind, outcome.model_dump(mode="json"))
            log.info("run %s: checkpoint %d signed as %s", run, received.index, kind)


def _receipt(record: ReceivedCheckpoint, deduplicated: bool, left: int) -> CheckpointReceipt:
    return CheckpointReceipt(
        checkpoint_id=record.checkpoint_id,
        index=record.index,
        practice_steps=record.practice_steps,
        deduplicated=deduplicated,
        checkpoints_left=max(0, left),
    )
