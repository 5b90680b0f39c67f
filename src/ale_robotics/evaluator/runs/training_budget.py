"""Training budgets in env steps, counted and enforced by the evaluator
(docs/architecture.md#rules-a-score-must-obey).

The release manifest gives a task ``compute_budget.training_steps`` in the unit
the paper counts (:class:`~ale_robotics.tasks.spec.TrainingStepUnit`, from the
task's ``session.training_step_unit``), which
:class:`~ale_robotics.tasks.registry.TrainingBudget` converts to agent steps.
For an interactive task the simulator is
on the evaluator's side, so the evaluator is the one party that can count: every
practice session of a run charges the run's :class:`TrainingLedger` one agent
step per env per Step call (an autoreset step too: it is a Step the agent chose
to send, and counting calls makes the figure exact and predictable from the
agent's side). A practice Step that would go past the budget, or a practice
Reset once it is reached, is RESOURCE_EXHAUSTED naming the budget, the unit and
the count. Eval sessions are not training and are not charged.

Tasks whose agent simulates itself (a batch task with ``training.simulator``
"agent") train inside the agent's sandbox; their budget is only declared
(``enforced`` false) and the report says so. A task whose ``training.simulator``
is "evaluator" (a batch task too) trains only in practice sessions, counted and
enforced like an interactive task's.

The counts live in the job store (:meth:`.store.PracticeBudgets.charge_practice_steps`),
not in the process: every replica sharing the store charges one counter per run,
and each charge is checked against the budget and added in one transaction, so
two replicas serving one run's practice sessions can never both pass the check
and take the budget twice. The counts survive a restart, of one evaluator or of
all (run ids are single use, so a stale entry is never reused).
"""

from __future__ import annotations

import logging

from ale_robotics.errors import ResourceExhaustedError
from ale_robotics.evaluator.store import PracticeBudgets
from ale_robotics.model.result import TrainingUsage
from ale_robotics.tasks.registry import TrainingBudget
from ale_robotics.tasks.spec import TrainingStepUnit

__all__ = ["PracticeMeter", "TrainingLedger"]

log = logging.getLogger(__name__)


class PracticeMeter:
    """What one practice session charges: its run's ledger entry and budget."""

    def __init__(self, ledger: TrainingLedger, run_id: str, budget: TrainingBudget | None) -> None:
        self._ledger = ledger
        self.run_id = run_id
        self.budget = budget

    def charge(self, n: int) -> None:
        """Count ``n`` agent steps (one Step of ``n`` envs), or refuse them all."""
        self._ledger.charge(self.run_id, n, self.budget)

    def check_reset(self) -> None:
        """Refuse a Reset once the budget is used up (it could only lead to refused Steps)."""
        self._ledger.check(self.run_id, self.budget)

    def flush(self) -> None:
        self._ledger.save()


class TrainingLedger:
    """Agent steps of every run's practice sessions: one counter per run, in the job store.

    Nothing is cached: every count is read from the store and every charge is
    one store transaction (check and increment together), so every replica
    sharing the store sees one count per run, and a budget is never passed
    however many of them charge at once.
    """

    def __init__(self, store: PracticeBudgets) -> None:
        self._store = store

    def used(self, run_id: str) -> int:
        return self._store.practice_steps(run_id)

    def meter(self, run_id: str, budget: TrainingBudget | None) -> PracticeMeter:
        return PracticeMeter(self, run_id, budget)

    def usage(self, run_id: str, budget: TrainingBudget | None) -> TrainingUsage:
        """The run's count so far with its budget, as the EvalResult and events carry it."""
        return TrainingUsage(
            agent_steps=self.used(run_id),
            agent_steps_budget=None if budget is None else budget.agent_steps,
            budget_steps=None if budget is None else budget.steps,
            unit=None if budget is None else budget.unit.value,
            enforced=budget is not None and budget.enforced,
            budget=None if budget is None else budget.describe(),
        )

    def charge(self, run_id: str, n: int, budget: TrainingBudget | None) -> None:
        """Count ``n`` agent steps, or refuse them all (RESOURCE_EXHAUSTED) when they
        would pass an enforced budget; the count is then unchanged."""
        limit = budget.agent_steps if budget is not None and budget.enforced else None
        charged, used = self._store.charge_practice_steps(run_id, n, limit=limit)
        if not charged:
            assert budget is not None
            raise ResourceExhaustedError(_refusal(run_id, used, n, budget))

    def check(self, run_id: str, budget: TrainingBudget | None) -> None:
        if budget is None or not budget.enforced:
            return
        used = self.used(run_id)
        if used >= budget.agent_steps:
            raise ResourceExhaustedError(_refusal(run_id, used, 0, budget))

    def save(self) -> None:
        """Nothing to do: every charge is stored as it is made. Kept for callers that
        flush when a session closes or the evaluator stops."""


def _refusal(run_id: str, used: int, n: int, budget: TrainingBudget) -> str:
    what = (
        f"this Step of {n} env(s) would make it {used + n:,}, so it is refused"
        if n
        else "the budget is used up, so this Reset is refused"
    )
    conversion = (
        f" = {budget.agent_steps:,} agent steps"
        if budget.unit is not TrainingStepUnit.AGENT_STEP
        else ""
    )
    return (
        f"training budget: run {run_id} has taken {used:,} of its {budget.agent_steps:,} agent "
        f"steps in practice sessions (compute_budget.training_steps = {budget.steps:,} "
        f"{budget.unit_words}{conversion}; one agent step = one env of one Step call), and "
        f"{what}. The eval session does not count against it"
    )
