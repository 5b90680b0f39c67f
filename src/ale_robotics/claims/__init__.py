"""result.json's claims against the evaluator's signed events: the checks that need
neither the secret nor a re-run.

``result.json`` is written by the harness into a directory that whoever handles the run
afterwards can edit, so everything that trusts a run's score checks it against the
evaluator's signed events in ``trajectory.jsonl`` first. Two callers, one set of checks:

- :func:`ale_robotics.audit.audit_run` runs these checks, then the ones that need the
  revealed secret (seeds, commitments) and a re-run (the measurement, the checkpoints);
- :func:`check_claims` runs these checks alone. It is what every listing trusts
  (``runs list``, ``leaderboard``, ``runs show/compare``, the HTML report and eval-set
  aggregates, through :mod:`ale_robotics.runs.verify`): quick (no rollout, no secret),
  so that a run whose ``result.json`` was rewritten is shown as *unverified* and never
  ranked, without waiting for an audit.

:func:`check_claims` checks, each naming the signed event it compares with:

* the trajectory: chain, every signature (with the evaluator's key when the caller
  pins it), the run id, and that it ends where ``result.json`` says;
* the job ``result.json`` names is one the evaluator signed events for, of the same
  task, and its ``submission_files`` are the signed ``submission_received`` hashes;
* the outcome: state, failure, metrics, per-episode returns and outcomes, smoke run and
  ``official`` against the signed ``result`` event (a rejection against the signed failed
  ``validation``); the report's own ``official``, ``job_state`` and ``submission_sha256``
  (what listings read) against the result they summarize;
* the training count against the signed ``result`` event;
* the score: recomputed as the harness does, from the *signed* metrics, the registry's
  target and the gate evidence ``result.json`` carries (its files only where they hash to
  the signed submission; the training count the evaluator signed), and compared with
  ``result.json``'s score report.

What it cannot see (``ale-robotics audit`` does): whether the signed metrics are what the
hidden seeds give (a re-run), the learning curve against the signed checkpoints (their
re-evaluation), the submission files on disk, and the harness's own measurements
(wall clock, CPU), which only the harness witnessed.
"""

from ale_robotics.claims.checks import (
    ScoreEvidence,
    check_claims,
    check_job,
    check_outcome,
    check_score,
    check_training,
    score_digest,
)
from ale_robotics.claims.report import AuditCheck, AuditReport
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

__all__ = [
    "AuditCheck",
    "AuditReport",
    "ScoreEvidence",
    "SignedEvents",
    "check_claims",
    "check_job",
    "check_outcome",
    "check_score",
    "check_training",
    "event_label",
    "files_text",
    "first_diff",
    "list_diff",
    "load_signed",
    "metric_diffs",
    "outcome_state",
    "payload_dict",
    "payload_list",
    "same",
    "score_digest",
]
