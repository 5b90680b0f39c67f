"""The run ledger: the hidden-seed secret, the signing key and every run's signed events.

Everything an auditor later checks a run against goes through here, so it is
the one object of the evaluator that holds the secret: it derives a run's
hidden seeds from it, commits to it, and signs and stores the run's events in
the job store's event log (:class:`~.store.EventLog`). Other services get the
seeds and the public commitment (:attr:`RunLedger.secret_sha256`) from it,
never the secret.

A run's first two events are fixed, ``evaluator_key`` (the public key) then
``seed_commitment`` (SHA-256 of the secret and one commitment per hidden seed;
for a task with checkpoints also ``checkpoint_seed_commitments``, one per
checkpoint episode, so that an audit can check the seeds every checkpoint was
evaluated on), so every later event is checkable against them; :meth:`RunLedger.event`
hands that preamble to the store with every event, which stores it before a
run's first event, in the same transaction, however many processes (or
replicas) write the run's first events at once (:meth:`.store.EventLog.append_event`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ale_robotics import __version__
from ale_robotics.evaluator.store import EventLog, EventMaker
from ale_robotics.seeds import HiddenSeed, derive_seeds, secret_commitment
from ale_robotics.submission.rejected import SubmissionRejected
from ale_robotics.tasks.spec import TaskSpec
from ale_robotics.trajectory import EvaluatorSigner

__all__ = ["RunLedger"]


class RunLedger:
    """Derives a run's hidden seeds and signs and stores its events; the secret's only holder."""

    def __init__(self, log: EventLog, signer: EvaluatorSigner, secret: bytes) -> None:
        self._log = log
        self._signer = signer
        self._secret = secret
        self.secret_sha256 = secret_commitment(secret)
        """The public commitment to the secret, which every result carries."""

    # ---------------------------------------------------------------- seeds --

    def hidden_seeds(self, task: TaskSpec, run_id: str) -> list[HiddenSeed]:
        """The run's hidden episode seeds; their values never leave the evaluator."""
        return derive_seeds(task.eval.base_seeds, run_id, self._secret)

    def checkpoint_seeds(self, task: TaskSpec, run_id: str) -> list[HiddenSeed]:
        """The run's hidden seeds of the checkpoint episodes (``training.checkpoints``), derived
        like the eval seeds from their own public base seeds (disjoint from the eval ones, so
        no checkpoint evaluation replays an official episode); [] for a task without
        checkpoints. Every checkpoint of the run is evaluated on these same seeds, so the
        points of its learning curve compare like with like."""
        ckpt = task.training.checkpoints if task.training is not None else None
        if ckpt is None:
            return []
        return derive_seeds(ckpt.base_seeds, run_id, self._secret)

    # --------------------------------------------------------------- events --

    def events(self, run_id: str) -> list[dict[str, Any]]:
        """The run's stored events, in ``eval_seq`` order."""
        return [json.loads(e) for e in self._log.events(run_id)]

    def has_events(self, run_id: str) -> bool:
        """Whether the run has any event (a run id is single use: its seeds derive from it)."""
        return bool(self._log.events(run_id))

    def event(
        self,
        run_id: str,
        task: TaskSpec,
        kind: str,
        payload: dict[str, Any],
        *,
        held_job: str | None = None,
    ) -> bool:
        """Sign and store the run's next event; returns whether it was stored.

        The run's preamble (``evaluator_key``, ``seed_commitment``) goes first when
        the run has no event yet. ``held_job``: store it only while this process
        holds that job (a job's own events; one it lost must not get more).
        """
        return self._log.append_event(
            run_id,
            self._maker(run_id, kind, payload),
            held_job=held_job,
            preamble=self._preamble(run_id, task),
        )

    def rejection_event(
        self, run_id: str, task: TaskSpec, job_id: str, exc: SubmissionRejected
    ) -> None:
        """The signed record that a submission broke a rule (which file, which rule)."""
        self.event(
            run_id,
            task,
            "validation",
            {
                "job_id": job_id,
                "passed": False,
                "file": exc.file,
                "rule": exc.rule,
                "reason": str(exc),
            },
        )

    # -------------------------------------------------------------- private --

    def _maker(self, run_id: str, kind: str, payload: dict[str, Any]) -> EventMaker:
        """Signs one event at the ``eval_seq`` the store allocates for it."""
        return lambda seq: self._signer.for_run(run_id, seq).sign(kind, payload).model_dump_json()

    def _preamble(self, run_id: str, task: TaskSpec) -> Sequence[EventMaker]:
        """The makers of a run's first two events, signed at the ``eval_seq`` they get.

        The one place a preamble is made. Lazy: the store calls them only for a run
        without events, so the seeds are derived only then. Each maker refuses to
        sign at another position than its own (0, then 1): a preamble that did not
        land first would be an error, never a trajectory that fails verification.
        """

        def key(seq: int) -> str:
            signer = self._signer.for_run(run_id, seq)
            return signer.key_event(extra={"evaluator_version": __version__}).model_dump_json()

        def commitment(seq: int) -> str:
            extra: dict[str, object] = {"task_id": task.id}
            checkpoint_seeds = self.checkpoint_seeds(task, run_id)
            if checkpoint_seeds:
                extra["checkpoint_seed_commitments"] = [s.commitment for s in checkpoint_seeds]
            return (
                self._signer.for_run(run_id, seq)
                .commitment_event(
                    secret=self._secret,
                    seed_commitments=[s.commitment for s in self.hidden_seeds(task, run_id)],
                    extra=extra,
                )
                .model_dump_json()
            )

        return (key, commitment)
