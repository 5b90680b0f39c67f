"""Whether a run's ``result.json`` agrees with its signed events: the verdict listings show.

``result.json`` is a claim: whoever can write the run directory can rewrite it. The
evaluator's signed events in ``trajectory.jsonl`` are not (they are signed with its key).
A run is *verified* when :func:`ale_robotics.claims.check_claims` finds nothing in its
``result.json`` that they contradict (score, metrics, official flag, submission, ...),
and *unverified* otherwise, with each failed check naming the signed event it
contradicts. An unverified run is still listed, marked so that nobody misses it, but it
never ranks, is never called official and is left out of eval-set aggregates.

The verdict depends on ``result.json`` and ``trajectory.jsonl`` only, so the run index
keeps it beside the summary, keyed on both files' stat and signed (:mod:`.index`), and an edit to
either verifies the run again. The evaluator keys a reader trusts (``--public-key``)
are applied on top, by :func:`pin`: the kept verdict records the key the signatures
verify with, and a run signed with any other key is unverified for that reader. That
is the verdict a check with the pinned key would give (the verifier's rule is that the
published key must be the pinned one), so what is kept does not depend on the keys.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ale_robotics.harness.report import RunReport, StoppedRunReport

__all__ = ["VERIFY_VERSION", "Verification", "pin", "verify_run"]

VERIFY_VERSION = 1
"""Bumped whenever what :func:`verify_run` checks changes: the index verifies every run
again (it is part of the index's schema version)."""


class Verification(BaseModel):
    """The verdict on one run's ``result.json`` against its signed events (frozen)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    verified: bool = Field(
        description="True when nothing in result.json contradicts the run's signed events."
    )
    problems: list[str] = Field(
        default_factory=list,
        description="Each failed check, as 'check: detail' (the detail names the signed "
        "event contradicted); empty when verified.",
    )
    checks: list[str] = Field(
        default_factory=list, description="The checks made (all of them passed when verified)."
    )
    evaluator_key: str | None = Field(
        default=None,
        description="The evaluator's public key the signed events verify with (hex); None "
        "when the trajectory does not verify.",
    )
    key_pinned: bool = Field(
        default=False,
        description="True when that key is one the reader gave (--public-key); False when it "
        "is the key the trajectory itself publishes, which shows the signed events are "
        "consistent, not who signed them.",
    )

    @property
    def reason(self) -> str:
        """Why the run is unverified, in one line (the first failed check); '' if verified."""
        if self.verified:
            return ""
        return self.problems[0] if self.problems else "not checked"


def verify_run(run_dir: Path, report: RunReport | StoppedRunReport) -> Verification:
    """Check ``report`` (``run_dir``'s ``result.json``) against the run's signed events.

    Never raises for a bad run directory: whatever cannot be checked (no trajectory, a
    task no longer registered) is a failed check, so the run is unverified.
    """
    from ale_robotics.claims import check_claims  # loads the registry and scoring: on use

    checked = check_claims(run_dir, report)
    return Verification(
        verified=checked.ok,
        problems=[f"{c.name}: {c.detail}" for c in checked.checks if not c.ok],
        checks=[c.name for c in checked.checks],
        evaluator_key=checked.public_key,
    )


def pin(verification: Verification, keys: Collection[str]) -> Verification:
    """``verification`` for a reader who trusts only the evaluator ``keys`` (hex); as it is
    when ``keys`` is empty (then the trajectory's own key is taken, ``key_pinned`` False)."""
    if not keys or not verification.verified:
        return verification
    if verification.evaluator_key in keys:
        return verification.model_copy(update={"key_pinned": True})
    return verification.model_copy(
        update={
            "verified": False,
            "problems": [
                f"evaluator key: the signed events verify with {verification.evaluator_key}, "
                "which is not a key given with --public-key (another evaluator signed them, "
                "or the trajectory was re-signed)"
            ],
        }
    )
