"""Checkpoints committed while a run trains, measured by the evaluator (SubmitCheckpoint).

A learning curve the agent writes (``curve.csv``) proves nothing: any numbers fit
in a CSV, and a forged agent passes every check made on it. On a task with
``training.checkpoints`` the agent instead commits its policy as it trains, and
for each checkpoint the evaluator records, in one signed ``checkpoint`` event of
the run, what only it can observe:

* the policy, by hash: only the contract's policy file is snapshotted (the
  contract reduced to its ``policy`` role), validated like a submission, and kept
  under ``STATE_DIR/snapshots/ckpt-<checkpoint_id>/`` for the audit
  (:func:`.snapshot.reclaim_snapshots` never deletes those);
* the run's practice agent steps when the checkpoint arrived (read once the
  policy file is copied, so no step that shaped it is left out): the evaluator's
  own count (:class:`.training_budget.TrainingLedger`), since the simulator is on
  its side (``training.simulator`` 'evaluator');
* the policy's returns on the task's checkpoint episodes, run here, in-process, on
  hidden seeds derived from ``training.checkpoints.base_seeds`` exactly like the
  eval seeds (:meth:`.ledger.RunLedger.checkpoint_seeds`; disjoint base seeds, so
  no checkpoint replays an official episode). The event holds each episode's seed
  commitment, never a seed.

The signed checkpoints are the run's learning curve (:func:`learning_curve`,
:attr:`.result.EvalResult.learning_curve`), which the faithfulness gate reads
instead of the agent's files, and which ``ale-robotics audit`` re-evaluates point
by point from the snapshots (:func:`run_checkpoint` is what both run).

What the agent gets back is its checkpoint's id, index and practice-step count and
how many checkpoints it has left, never a return: a checkpoint is no evaluation
oracle. (The call returns once the checkpoint is evaluated, so its duration
follows the episodes' lengths; episodes on checkpoint seeds, never the eval ones,
and at most ``max_checkpoints`` of them per run.)

Evaluations are serialized by one lock per evaluator process, which also makes a
run's index assignment, its deduplication by ``client_token`` and its
``max_checkpoints`` count consistent: the run's signed events are the only record
of its checkpoints, read under that lock. A run's checkpoints are therefore served
by one evaluator process (the embedded evaluator of ``ale-robotics run``, or one
shared evaluator), not by several replicas at once.
"""

from __future__ import annotations

import logging
import re
import secrets
import shutil
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ale_robotics.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    ResourceExhaustedError,
)
from ale_robotics.evaluator.access import RunAccess, check_client_token
from ale_robotics.evaluator.catalog import TaskCatalog
from ale_robotics.evaluator.execution.base import shard_layout
from ale_robotics.evaluator.ledger import RunLedger
from ale_robotics.evaluator.metrics import NonFiniteMetric
from ale_robotics.evaluator.pipeline import EpisodeOutcome, PolicyFault, rollout_episodes, summarize
from ale_robotics.evaluator.plan import episode_plan, load_artifact
from ale_robotics.evaluator.result import CurvePoint
from ale_robotics.evaluator.runs import TRUSTED, Scope
from ale_robotics.evaluator.snapshot import (
    CHECKPOINT_PREFIX,
    SubmissionRejected,
    snapshot_submission,
    staging_dir,
)
from ale_robotics.evaluator.training_budget import TrainingLedger
from ale_robotics.rollouts.base import Artifact
from ale_robotics.seeds import HiddenSeed
from ale_robotics.tasks.spec import CheckpointSettings, SubmissionContract, TaskSpec

__all__ = [
    "CHECKPOINT_EVENT",
    "POLICY_ROLE",
    "CheckpointEpisode",
    "CheckpointMetrics",
    "CheckpointReceipt",
    "CheckpointRecord",
    "CheckpointService",
    "checkpoint_records",
    "checkpoint_settings",
    "checkpoint_task",
    "learning_curve",
    "run_checkpoint",
    "snapshot_dir",
]

log = logging.getLogger(__name__)

CHECKPOINT_EVENT = "checkpoint"
"""The kind of the signed run event that records one evaluated checkpoint."""
POLICY_ROLE = "policy"
"""The contract role a checkpoint consists of (the weights; meta.json and the like are not
part of a checkpoint, and are never read)."""

_ID_RE = re.compile(r"^[0-9a-f]{16}$")


# ------------------------------------------------------------ the record --


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class CheckpointEpisode(_Record):
    """One checkpoint episode as signed: its seed's commitment, never the seed."""

    index: int = Field(ge=0, description="Position in training.checkpoints.base_seeds.")
    seed_commitment: str = Field(description="SHA-256 commitment to the hidden seed, hex.")
    episode_return: float
    length: int
    terminated: bool


class CheckpointMetrics(_Record):
    mean_return: float
    std_return: float


class CheckpointRecord(_Record):
    """The payload of a signed ``checkpoint`` event (the one definition: the service writes
    it, :func:`learning_curve` and the audit read it)."""

    checkpoint_id: str = Field(pattern=_ID_RE.pattern)
    index: int = Field(ge=0, description="0-based position among the run's checkpoints.")
    client_token: str
    files: dict[str, str] = Field(description="Snapshotted file name -> SHA-256 (the policy).")
    practice_steps: int = Field(
        ge=0, description="The run's practice agent steps when the checkpoint was received."
    )
    episodes: list[CheckpointEpisode]
    metrics: CheckpointMetrics

    @property
    def policy_sha256(self) -> str:
        """The hash of the one file a checkpoint holds (its policy)."""
        return next(iter(self.files.values()), "")

    def curve_point(self) -> CurvePoint:
        return CurvePoint(
            index=self.index,
            checkpoint_id=self.checkpoint_id,
            practice_steps=self.practice_steps,
            policy_sha256=self.policy_sha256,
            episodes=len(self.episodes),
            mean_return=self.metrics.mean_return,
            std_return=self.metrics.std_return,
        )


def checkpoint_records(events: Iterable[Mapping[str, Any]]) -> list[CheckpointRecord]:
    """The run's checkpoints from its stored events (``{"kind", "payload", ...}`` each, in
    ``eval_seq`` order), in that order. These are the evaluator's own stored events; an
    event that does not parse would be a bug, logged and left out."""
    out = []
    for event in events:
        if event.get("kind") != CHECKPOINT_EVENT:
            continue
        try:
            out.append(CheckpointRecord.model_validate(event.get("payload")))
        except ValidationError as exc:
            log.error("a stored checkpoint event does not parse (left out): %s", exc)
    return out


def learning_curve(events: Iterable[Mapping[str, Any]]) -> list[CurvePoint]:
    """The run's learning curve: one point per signed checkpoint, in order."""
    return [r.curve_point() for r in checkpoint_records(events)]


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


# --------------------------------------------------------------- service --


@dataclass(frozen=True)
class CheckpointReceipt:
    """What SubmitCheckpoint answers: never a return."""

    checkpoint_id: str
    index: int
    practice_steps: int
    deduplicated: bool
    checkpoints_left: int


class CheckpointService:
    """Snapshots, evaluates and signs the checkpoints of runs (see the module docstring)."""

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

    def records(self, run_id: str) -> list[CheckpointRecord]:
        """The run's signed checkpoints, in order."""
        return checkpoint_records(self._ledger.events(run_id))

    def submit(
        self,
        task_id: str,
        run_id: str,
        rel_path: str,
        client_token: str,
        scope: Scope = TRUSTED,
    ) -> CheckpointReceipt:
        """Snapshot the policy at ``rel_path``, evaluate it on the checkpoint episodes and
        sign the ``checkpoint`` event; returns once it is signed.

        A retry with the same ``client_token`` gets the first call's checkpoint
        (``deduplicated``). FAILED_PRECONDITION for a task without checkpoints or a
        closed run; RESOURCE_EXHAUSTED past ``max_checkpoints``; INVALID_ARGUMENT for a
        policy file that breaks a rule of the contract or makes a value non-finite
        (nothing is recorded or counted then: no checkpoint was evaluated).
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
            records = self.records(run)
            for record in records:
                if record.client_token == client_token:
                    return _receipt(record, True, limit - len(records))
            if len(records) >= limit:
                raise ResourceExhaustedError(
                    f"run {run} has committed its {limit} checkpoints (limit: "
                    "training.checkpoints.max_checkpoints); submit the final policy with "
                    "SubmitBatchEval"
                )
            record = self._evaluate(run, task, ctask, rel_path, client_token)
            record = record.model_copy(update={"index": len(records)})
            self._ledger.event(run, task, CHECKPOINT_EVENT, record.model_dump(mode="json"))
            log.info(
                "run %s: checkpoint %d (%s) at %d practice steps",
                run,
                record.index,
                record.checkpoint_id,
                record.practice_steps,
            )
            return _receipt(record, False, limit - len(records) - 1)

    def _evaluate(
        self,
        run: str,
        task: TaskSpec,
        ctask: TaskSpec,
        rel_path: str,
        client_token: str,
    ) -> CheckpointRecord:
        """Snapshot, stamp, load and evaluate the checkpoint; keep its snapshot. The
        record's index is the caller's to set."""
        assert ctask.contract is not None
        volume = self._access.submission_root(run, rel_path)
        if volume is None:
            raise FailedPreconditionError("this evaluator has no submission volume configured")
        staging = staging_dir(self._snapshots)
        try:
            try:
                files = snapshot_submission(volume, rel_path, ctask.contract, staging)
                # The evaluator's count once the policy is frozen: what the curve's x axis
                # is, whatever the agent says about its training. Read after the copy, so
                # every step that could have shaped these weights is in it (steps taken
                # during the copy count too: the stamp can only be high, never low).
                practice_steps = self._training.used(run)
                artifact = load_artifact(files, ctask)
            except SubmissionRejected as exc:
                raise InvalidArgumentError(
                    f"checkpoint rejected, nothing was recorded: {exc}"
                ) from None
            except OSError as exc:
                log.error("cannot snapshot a checkpoint of run %s: %s", run, exc)
                raise FailedPreconditionError(
                    f"the evaluator cannot snapshot checkpoints right now ({exc.strerror}); "
                    "this is not a rejection, retry later with the same client_token"
                ) from None
            seeds = self._ledger.checkpoint_seeds(task, run)
            try:
                outcomes = run_checkpoint(ctask, artifact, seeds)
                metrics = checkpoint_metrics(outcomes)
            except PolicyFault as exc:  # which episode and step stay unsaid (hidden episodes)
                made = (
                    "produced a non-finite action"
                    if exc.what == "action"
                    else "made the reward non-finite"
                )
                raise InvalidArgumentError(
                    f"checkpoint rejected, nothing was recorded: the policy {made} "
                    f"({exc.value}) on a checkpoint episode; it must output finite actions the "
                    "simulation can take"
                ) from None
            except NonFiniteMetric as exc:
                raise InvalidArgumentError(
                    f"checkpoint rejected, nothing was recorded: the policy's checkpoint "
                    f"episodes gave a non-finite {exc.name}; the policy must keep every "
                    "return finite"
                ) from None
            checkpoint_id = secrets.token_hex(8)
            # In place before the event is signed: a signed checkpoint always has its
            # snapshot (a crash in between leaves a snapshot no event names, never the
            # reverse, which would fail the run's audit).
            staging.rename(snapshot_dir(self._snapshots, checkpoint_id))
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return CheckpointRecord(
            checkpoint_id=checkpoint_id,
            index=0,
            client_token=client_token,
            files={f.name: f.sha256 for f in files},
            practice_steps=practice_steps,
            episodes=checkpoint_episodes(outcomes, seeds),
            metrics=metrics,
        )


def _receipt(record: CheckpointRecord, deduplicated: bool, left: int) -> CheckpointReceipt:
    return CheckpointReceipt(
        checkpoint_id=record.checkpoint_id,
        index=record.index,
        practice_steps=record.practice_steps,
        deduplicated=deduplicated,
        checkpoints_left=max(0, left),
    )
