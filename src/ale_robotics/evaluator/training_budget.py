"""Training budgets in env steps, counted and enforced by the evaluator (ARCHITECTURE.md §10).

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

Batch tasks train inside the agent's sandbox; their budget is only declared
(``enforced`` false) and the report says so.

The counts survive an evaluator restart: they are written to the state dir at
most once a second and when a session closes, so a restart loses at most a
second of counting, never the budget (run ids are single use, so a stale entry
is never reused).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

from ale_robotics.errors import ResourceExhaustedError
from ale_robotics.evaluator.result import TrainingUsage
from ale_robotics.evaluator.state import write_private
from ale_robotics.tasks.registry import TrainingBudget
from ale_robotics.tasks.spec import TrainingStepUnit

__all__ = ["PracticeMeter", "TrainingLedger"]

log = logging.getLogger(__name__)

_SAVE_EVERY_S = 1.0


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
    """Agent steps of every run's practice sessions, one evaluator-wide counter per run.

    The lock is held for a dict update only (never across an env step), so
    sessions of different runs never wait on each other for long.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._save_lock = threading.Lock()
        self._used: dict[str, int] = {}
        self._dirty = False
        self._saved_at = time.monotonic()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            data = {}
        except (OSError, ValueError) as exc:
            # Refusing to start would take every run down; starting at zero would hand
            # out budget again. Neither is right silently: say so loudly.
            log.error("cannot read %s (%s): practice counts restart at zero", path, exc)
            data = {}
        if isinstance(data, dict):
            self._used = {k: v for k, v in data.items() if isinstance(v, int) and v >= 0}

    def used(self, run_id: str) -> int:
        with self._lock:
            return self._used.get(run_id, 0)

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
        with self._lock:
            used = self._used.get(run_id, 0)
            if budget is not None and budget.enforced and used + n > budget.agent_steps:
                raise ResourceExhaustedError(_refusal(run_id, used, n, budget))
            self._used[run_id] = used + n
            self._dirty = True
            due = time.monotonic() - self._saved_at >= _SAVE_EVERY_S
        if due:
            self.save()

    def check(self, run_id: str, budget: TrainingBudget | None) -> None:
        if budget is None or not budget.enforced:
            return
        used = self.used(run_id)
        if used >= budget.agent_steps:
            raise ResourceExhaustedError(_refusal(run_id, used, 0, budget))

    def save(self) -> None:
        """Write the counts (skipped while another thread writes: it writes them too)."""
        if not self._save_lock.acquire(blocking=False):
            return
        try:
            with self._lock:
                if not self._dirty:
                    return
                data = dict(self._used)
                self._dirty = False
                self._saved_at = time.monotonic()
            try:
                write_private(self._path, json.dumps(data, sort_keys=True).encode())
            except OSError as exc:
                with self._lock:
                    self._dirty = True
                log.error("cannot save practice step counts to %s: %s", self._path, exc)
        finally:
            self._save_lock.release()


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
