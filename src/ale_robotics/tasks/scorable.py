"""Whether a task and its paper target can be scored at all (a ratio must mean something).

Part of the task model, next to what it checks: the registry refuses an
unscorable target here, and :mod:`ale_robotics.scoring` (which sits above the
task package) re-exports :func:`check_scorable` and calls it before scoring.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ale_robotics.errors import ConfigError
from ale_robotics.tasks.manifest import PaperTarget
from ale_robotics.tasks.scoring_config import ArchitectureCheck, LearningCurveCheck, check_name
from ale_robotics.tasks.spec import Direction, MetricRole, TaskSpec

__all__ = ["check_scorable"]


def check_scorable(task: TaskSpec, target: PaperTarget | None) -> None:
    """Raise :class:`ConfigError` naming the task and field if a score would be meaningless.

    Pydantic validates each model alone; this checks what only the whole task
    and its target together can show. It re-checks rules the task model already
    enforces (a negative-capable primary metric) because ``model_copy(update=...)``
    bypasses validation.
    """

    def fail(field: str, why: str) -> ConfigError:
        return ConfigError(f"task {task.id}: {field}: {why}")

    _check_settings(task, fail)
    if target is not None:
        _check_target(task, target, fail)
    _check_metric_rules(task, fail)
    _check_gate(task, fail)


_Fail = Callable[[str, str], ConfigError]


def _check_settings(task: TaskSpec, fail: _Fail) -> None:
    """Cap and eps, and a primary metric whose ratio to the paper means something."""
    cfg = task.scoring
    for field, value in (("cap", cfg.cap), ("eps", cfg.eps)):
        if not (math.isfinite(value) and value > 0):
            raise fail(f"scoring.{field}", f"must be a positive finite number, got {value!r}")

    primary = task.primary_metric
    where = f"metrics.{primary.name}"
    if primary.direction not in (Direction.HIGHER_IS_BETTER, Direction.LOWER_IS_BETTER):
        raise fail(f"{where}.direction", f"unknown direction {primary.direction!r}")
    if primary.can_be_negative:
        raise fail(
            f"{where}.can_be_negative",
            "a primary metric that can be negative makes the ratio to the paper meaningless; "
            "declare it as a cost with the opposite direction",
        )


def _check_target(task: TaskSpec, target: PaperTarget, fail: _Fail) -> None:
    """The target is for the primary metric, in its direction, with a usable value."""
    primary = task.primary_metric
    if target.metric != primary.name:
        raise fail(
            "target.metric",
            f"the target is for {target.metric!r}, the primary metric is {primary.name!r}",
        )
    if target.direction != primary.direction:
        raise fail(
            "target.direction",
            f"the target says {target.direction}, metric {primary.name!r} is {primary.direction}",
        )
    if not (math.isfinite(target.value) and target.value > 0):
        raise fail(
            "target.value",
            f"paper value {target.value!r} of {primary.name!r} must be positive and finite "
            "for a ratio",
        )


def _check_metric_rules(task: TaskSpec, fail: _Fail) -> None:
    """Each safety penalty and condition names a fit metric, and each safety or condition
    metric has one."""
    cfg = task.scoring
    metrics = {m.name: m for m in task.metrics}
    penalized: set[str] = set()
    for i, p in enumerate(cfg.safety):
        at = f"scoring.safety[{i}]"
        spec = metrics.get(p.metric)
        if spec is None:
            raise fail(f"{at}.metric", f"unknown metric {p.metric!r} (known: {sorted(metrics)})")
        if spec.role is not MetricRole.SAFETY:
            raise fail(f"{at}.metric", f"metric {p.metric!r} has role {spec.role}, not safety")
        if spec.direction is not Direction.LOWER_IS_BETTER or spec.can_be_negative:
            raise fail(
                f"{at}.metric",
                f"safety metric {p.metric!r} must be lower_is_better and non-negative "
                "(its target is zero)",
            )
        if p.metric in penalized:
            raise fail(f"{at}.metric", f"metric {p.metric!r} has two safety penalties")
        if not (math.isfinite(p.tolerance) and p.tolerance > 0):
            raise fail(f"{at}.tolerance", f"must be positive and finite, got {p.tolerance!r}")
        penalized.add(p.metric)

    conditioned: set[str] = set()
    for i, c in enumerate(cfg.conditions):
        at = f"scoring.conditions[{i}]"
        if c.metric not in metrics:
            raise fail(f"{at}.metric", f"unknown metric {c.metric!r} (known: {sorted(metrics)})")
        if not math.isfinite(c.threshold):
            raise fail(f"{at}.threshold", f"must be finite, got {c.threshold!r}")
        conditioned.add(c.metric)

    for m in task.metrics:
        if m.role is MetricRole.SAFETY and m.name not in penalized:
            raise fail(f"metrics.{m.name}.role", "a safety metric needs a scoring.safety penalty")
        if m.role is MetricRole.CONDITION and m.name not in conditioned:
            raise fail(
                f"metrics.{m.name}.role", "a condition metric needs a scoring.conditions entry"
            )


def _check_gate(task: TaskSpec, fail: _Fail) -> None:
    """A reproduction has a gate, and each gate check has what it needs from the task."""
    cfg = task.scoring
    if task.genre == "reproduction" and cfg.gate is None:
        raise fail("scoring.gate", "a reproduction task needs a faithfulness gate")
    if cfg.gate is not None:
        has_contract_tensors = task.contract is not None and bool(task.contract.tensors)
        for check in cfg.gate.checks:
            if (
                isinstance(check, ArchitectureCheck)
                and check.tensors is None
                and not has_contract_tensors
            ):
                raise fail(
                    f"scoring.gate.checks.{check_name(check)}.tensors",
                    "no tensors listed and the task contract has none to default to",
                )
            if isinstance(check, LearningCurveCheck) and check.min_improvement_se is not None:
                ckpt = task.training.checkpoints if task.training is not None else None
                if ckpt is None or ckpt.episodes < 2:
                    raise fail(
                        f"scoring.gate.checks.{check_name(check)}.min_improvement_se",
                        "needs training.checkpoints with 2 or more episodes (one episode "
                        "carries no spread to measure the noise by)",
                    )
