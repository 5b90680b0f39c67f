"""The signed records of a run's checkpoints, and what is read from them.

Every checkpoint a run commits is two signed events of the run, so that the
quota, the deduplication and the outcome all rest on the signed log:

* ``checkpoint_received`` (:class:`ReceivedCheckpoint`), signed when
  SubmitCheckpoint answers: the index, the client token, the snapshotted policy
  by hash (or why no snapshot could be taken) and the evaluator's practice-step
  count. It uses up one of the run's ``max_checkpoints`` whatever the outcome.
* its outcome, signed once the evaluator has evaluated it in the background, in
  index order: ``checkpoint`` (:class:`CheckpointRecord`, unchanged from the
  releases that evaluated before answering: the measured episodes and returns),
  or ``checkpoint_failed`` (:class:`FailedCheckpointRecord`: which rule failed and
  why: a contract rule, a non-finite action, reward or return, or, rarely, the
  evaluator itself).

Runs of releases before this have ``checkpoint`` events only (a failure was not
recorded then); :func:`checkpoint_log` reads both. The learning curve is the
``checkpoint`` events (:func:`learning_curve`); the failed points are listed
apart (:func:`failed_points`): they have no return, so they can never raise a
score.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ale_robotics.model.result import CurvePoint, FailedCheckpoint

__all__ = [
    "CHECKPOINT_EVENT",
    "FAILED_EVENT",
    "RECEIVED_EVENT",
    "CheckpointEpisode",
    "CheckpointLog",
    "CheckpointMetrics",
    "CheckpointRecord",
    "FailedCheckpointRecord",
    "ReceivedCheckpoint",
    "checkpoint_log",
    "checkpoint_records",
    "failed_points",
    "learning_curve",
]

log = logging.getLogger(__name__)

CHECKPOINT_EVENT = "checkpoint"
"""The kind of the signed run event that records one measured checkpoint."""
RECEIVED_EVENT = "checkpoint_received"
"""The kind of the signed run event that records a checkpoint as SubmitCheckpoint took it."""
FAILED_EVENT = "checkpoint_failed"
"""The kind of the signed run event that records a checkpoint that could not be measured."""

_ID_RE = re.compile(r"^[0-9a-f]{16}$")


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


class _Taken(_Record):
    """What every record of one checkpoint repeats, as SubmitCheckpoint took it."""

    checkpoint_id: str = Field(pattern=_ID_RE.pattern)
    index: int = Field(ge=0, description="0-based position among the run's checkpoints.")
    client_token: str
    files: dict[str, str] = Field(description="Snapshotted file name -> SHA-256 (the policy).")
    practice_steps: int = Field(
        ge=0, description="The run's practice agent steps when the checkpoint was received."
    )

    @property
    def policy_sha256(self) -> str:
        """The hash of the one file a checkpoint holds (its policy); '' without one."""
        return next(iter(self.files.values()), "")

    def same_checkpoint(self, other: _Taken) -> bool:
        """Whether ``other`` records the same checkpoint as taken (id, index, token, files,
        steps): an outcome must repeat its ``checkpoint_received`` exactly."""
        keys = ("checkpoint_id", "index", "client_token", "files", "practice_steps")
        return all(getattr(self, k) == getattr(other, k) for k in keys)


class ReceivedCheckpoint(_Taken):
    """The payload of a signed ``checkpoint_received`` event: the checkpoint as taken, before
    it is evaluated. ``files`` is empty when the snapshot was refused (``rejected``)."""

    rejected: str | None = Field(
        default=None,
        description="Why the policy file could not be snapshotted (the contract rule it "
        "broke); None when it was. Such a checkpoint's outcome is a failure.",
    )


class CheckpointRecord(_Taken):
    """The payload of a signed ``checkpoint`` event: a measured checkpoint (the one
    definition: the service writes it, :func:`learning_curve` and the audit read it)."""

    episodes: list[CheckpointEpisode]
    metrics: CheckpointMetrics

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


FailureSource = Literal["submission", "infrastructure"]


class FailedCheckpointRecord(_Taken):
    """The payload of a signed ``checkpoint_failed`` event: a checkpoint the evaluator could
    not measure. Which episode or step went wrong stays unsaid (hidden episodes)."""

    source: FailureSource = Field(
        description="'submission' (the policy's fault) or 'infrastructure' (the evaluator's)."
    )
    rule: str = Field(
        description="contract, non_finite_action, non_finite_reward, non_finite_metric or "
        "evaluator_error."
    )
    reason: str

    def failed_point(self) -> FailedCheckpoint:
        return FailedCheckpoint(
            index=self.index,
            checkpoint_id=self.checkpoint_id,
            practice_steps=self.practice_steps,
            policy_sha256=self.policy_sha256,
            source=self.source,
            rule=self.rule,
            reason=self.reason,
        )


Outcome = CheckpointRecord | FailedCheckpointRecord

_MODELS: dict[str, type[_Taken]] = {
    RECEIVED_EVENT: ReceivedCheckpoint,
    CHECKPOINT_EVENT: CheckpointRecord,
    FAILED_EVENT: FailedCheckpointRecord,
}


def _parsed(events: Iterable[Mapping[str, Any]], kind: str) -> list[Any]:
    """The payloads of the events of ``kind``, parsed, in order. These are the evaluator's
    own stored events; one that does not parse would be a bug, logged and left out."""
    model = _MODELS[kind]
    out = []
    for event in events:
        if event.get("kind") != kind:
            continue
        try:
            out.append(model.model_validate(event.get("payload")))
        except ValidationError as exc:
            log.error("a stored %s event does not parse (left out): %s", kind, exc)
    return out


def checkpoint_records(events: Iterable[Mapping[str, Any]]) -> list[CheckpointRecord]:
    """The run's measured checkpoints from its stored events (``{"kind", "payload", ...}``
    each, in ``eval_seq`` order), in that order."""
    return _parsed(events, CHECKPOINT_EVENT)


def learning_curve(events: Iterable[Mapping[str, Any]]) -> list[CurvePoint]:
    """The run's learning curve: one point per measured (signed ``checkpoint``) checkpoint."""
    return [r.curve_point() for r in checkpoint_records(events)]


def failed_points(events: Iterable[Mapping[str, Any]]) -> list[FailedCheckpoint]:
    """The run's checkpoints that could not be measured (signed ``checkpoint_failed``)."""
    return [r.failed_point() for r in _parsed(events, FAILED_EVENT)]


@dataclass(frozen=True)
class CheckpointLog:
    """A run's checkpoints as its signed events record them.

    ``received``: every checkpoint taken, in index order (for a run of an older
    release, which signed no ``checkpoint_received``, its ``checkpoint`` events stand
    in); ``outcomes``: the measured and failed ones, in the order they were signed.
    """

    received: list[ReceivedCheckpoint]
    outcomes: list[Outcome]

    def by_token(self, client_token: str) -> ReceivedCheckpoint | None:
        return next((r for r in self.received if r.client_token == client_token), None)

    def pending(self) -> list[ReceivedCheckpoint]:
        """Checkpoints received without an outcome yet, in index order."""
        done = {o.checkpoint_id for o in self.outcomes}
        return [r for r in self.received if r.checkpoint_id not in done]


def checkpoint_log(events: Iterable[Mapping[str, Any]]) -> CheckpointLog:
    """The run's :class:`CheckpointLog` from its stored events, in ``eval_seq`` order."""
    events = list(events)
    received: list[ReceivedCheckpoint] = _parsed(events, RECEIVED_EVENT)
    outcomes = _outcomes(events)
    known = {r.checkpoint_id for r in received}
    legacy = [
        ReceivedCheckpoint.model_validate(o.model_dump(include=set(_Taken.model_fields)))
        for o in outcomes
        if o.checkpoint_id not in known
    ]
    return CheckpointLog(sorted([*legacy, *received], key=lambda r: r.index), outcomes)


def _outcomes(events: list[Mapping[str, Any]]) -> list[Outcome]:
    out: list[Outcome] = []
    for event in events:
        kind = event.get("kind")
        if kind in (CHECKPOINT_EVENT, FAILED_EVENT):
            out.extend(_parsed([event], str(kind)))
    return out
