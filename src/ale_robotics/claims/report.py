"""What a check of a run's claims found: one :class:`AuditCheck` per claim, in an
:class:`AuditReport` (shared by ``runs`` listings, which check the claims alone, and
``ale-robotics audit``, which adds the checks that need the secret and a re-run)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ale_robotics.harness.report import StoppedRunReport

__all__ = ["AuditCheck", "AuditReport"]


@dataclass
class AuditCheck:
    name: str
    ok: bool
    detail: str


@dataclass
class AuditReport:
    run_id: str
    checks: list[AuditCheck] = field(default_factory=list)
    fatal: str | None = None
    """Why the audit could not start at all (no readable result.json, a stopped run);
    None otherwise."""
    stopped: StoppedRunReport | None = None
    """The record of an interrupted or failed run: nothing was scored, nothing audited."""
    public_key: str | None = None
    """The evaluator key the trajectory verified with (hex); None when it did not verify.
    Set by :func:`check_claims` (a listing shows whether it was pinned)."""

    @property
    def ok(self) -> bool:
        return self.fatal is None and bool(self.checks) and all(c.ok for c in self.checks)

    def add(self, name: str, ok: bool, detail: str) -> bool:
        self.checks.append(AuditCheck(name, ok, detail))
        return ok
