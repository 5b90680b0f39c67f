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
  and shown, never compared; see ``host_dependent`` in ``model/outcomes.py``).
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

from ale_robotics.audit.run import audit_run, load_report, read_secret, stopped_summary
from ale_robotics.claims import AuditCheck, AuditReport

__all__ = [
    "AuditCheck",
    "AuditReport",
    "audit_run",
    "load_report",
    "read_secret",
    "stopped_summary",
]
