"""Eval sets: a grid of runs (tasks x agents x repetitions) and its statistics.

One run says little about an agent: scores vary with the hidden seeds and with the
agent's own training. An eval set runs every agent on every task several times,
through ordinary ``ale-robotics run`` subprocesses (:mod:`.runner`), in directories
that make it resumable (:mod:`.layout`), and aggregates the normalized scores the way
RL results are now reported, with rliable (:mod:`.aggregate`, :mod:`.rliable_api`):
means and interquartile means with stratified-bootstrap intervals, per task and
across tasks, the optimality gap, and performance profiles (:mod:`.plots`).

The SPEC format is :class:`EvalSetSpec`; ``ale-robotics eval-set SPEC.yaml`` is the
command line (``ale_robotics.cli.evalset_cmd``).
"""

from ale_robotics.evalset.aggregate import (
    AGGREGATE_FILE,
    AgentAggregate,
    CellAggregate,
    EvalSetAggregate,
    Interval,
    PerformanceProfiles,
    ProfileCurve,
    ScoredRun,
    aggregate,
    collect_scored_runs,
    default_out_dir,
    render_markdown,
    write_aggregate,
)
from ale_robotics.evalset.layout import RunSlot, SlotStatus, inspect_slot, plan_slots, set_dir
from ale_robotics.evalset.runner import (
    EvalSetRunner,
    RunEvent,
    RunOutcome,
    SetOutcome,
    default_jobs,
    prepare,
)
from ale_robotics.evalset.spec import AgentEntry, BootstrapSettings, EvalSetSpec, load_spec

__all__ = [
    "AGGREGATE_FILE",
    "AgentAggregate",
    "AgentEntry",
    "BootstrapSettings",
    "CellAggregate",
    "EvalSetAggregate",
    "EvalSetRunner",
    "EvalSetSpec",
    "Interval",
    "PerformanceProfiles",
    "ProfileCurve",
    "RunEvent",
    "RunOutcome",
    "RunSlot",
    "ScoredRun",
    "SetOutcome",
    "SlotStatus",
    "aggregate",
    "collect_scored_runs",
    "default_jobs",
    "default_out_dir",
    "inspect_slot",
    "load_spec",
    "plan_slots",
    "prepare",
    "render_markdown",
    "set_dir",
    "write_aggregate",
]
