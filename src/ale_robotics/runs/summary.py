"""One run's facts for comparing it with others: :class:`RunSummary`, from its ``result.json``.

A ``result.json`` holds everything a run concluded (the full score report, the
evaluator's result with every episode), which is too much to read again for every
listing and too little in one place to compare runs: the label, the times and the
per-episode values of the primary metric are spread over the report. A summary is
that, flat, small and stable, so that the index can keep one per run and every
consumer (``runs list``, the leaderboard, the HTML report) reads the same numbers.
That includes what the run's model cost (``model_tokens``, ``model_calls``, from
``result.json``'s ``model_usage``), shown beside its score; None where no model gateway
counted it, which is not a cost of 0.

Each summary carries its run's :class:`~.verify.Verification`: whether its
``result.json`` agrees with the evaluator's signed events. Only a verified run ranks.

Which runs rank is decided here, once (:attr:`RunSummary.not_ranked_because`), for the
leaderboard, ``runs list``, ``runs show`` and the report alike: a run ranks only when
the evaluator measured, under the task's full protocol, what the agent gave it (the
submitted files, or the episodes of its eval session). A run without a result (status
``no_result``: nothing submitted, a submission rejected or timed out, no eval session
opened) is scored 0 by the score's rules but never ranks: a 0 for a failure to hand
anything in would otherwise share a table with measured policies, below them only by
chance of what the others scored. A measured run ranks with whatever it scored, 0
included (a failed gate, an unusable metric, an unmet condition are verdicts on what
was measured).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, computed_field, model_validator

from ale_robotics.harness.plots.episodes import episode_plot
from ale_robotics.harness.report import (
    InspectRecord,
    RunReport,
    StoppedRunReport,
    load_run_report,
)
from ale_robotics.runs.verify import Verification, verify_run

__all__ = ["SUMMARY_SCHEMA_VERSION", "RunState", "RunSummary", "load_summary", "summarize"]

SUMMARY_SCHEMA_VERSION = 7
"""Bumped whenever what a summary holds or how it is derived changes: an index holding
summaries of another version is rebuilt (see :mod:`.index`)."""

RunState = Literal["completed", "interrupted", "failed"]

_RUN_ID_STAMP = re.compile(r"run-(\d{8}T\d{6}Z)-")


class RunSummary(BaseModel):
    """What one run is, for listing, ranking and comparing it (frozen)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str = Field(description="The run's id (harness-made, or --run-id).")
    run_dir: Path = Field(description="The run's directory (absolute).")
    task_id: str
    label: str = Field(description="What groups runs of one agent ('run --label').")
    state: RunState = Field(
        description="'completed' (a verdict, possibly 0), 'interrupted' or 'failed'."
    )
    started_at: AwareDatetime = Field(
        description="When the run started (UTC). For reports before schema 3: the time in "
        "the run id, else the result's modification time less the run's wall time."
    )
    ended_at: AwareDatetime = Field(
        description="When the run reached its verdict or stopped (UTC; for older reports "
        "started_at plus the run's wall time)."
    )
    wall_s: float = Field(description="Seconds from the run's start to its end.")
    official: bool = Field(
        description="The task's official result as result.json claims it (full protocol, read "
        "on the harness channel); only 'verified' says the claim holds."
    )
    smoke_episodes: int | None = Field(
        default=None, description="A smoke run (--episodes N): N; None for a full run."
    )
    smoke_of: int | None = Field(
        default=None, description="A smoke run: the episodes of the task's full protocol."
    )
    score: float | None = Field(
        default=None, description="The score; None when unscored or stopped."
    )
    status: str | None = Field(
        default=None,
        description="The score's status ('scored', 'gate_failed', ...); None for a run that "
        "stopped without a verdict.",
    )
    score_line: str | None = Field(
        default=None, description="The run's 'score: ...' line; None for a stopped run."
    )
    primary_metric: str | None = Field(
        default=None, description="The metric the score normalizes (None for a stopped run)."
    )
    primary_value: float | None = Field(
        default=None, description="Its measured value; None when not measured (or not finite)."
    )
    primary_unit: str = Field(default="", description="Its unit ('' when it has none).")
    direction: Literal["higher_is_better", "lower_is_better"] | None = Field(
        default=None, description="Whether a higher primary metric is better."
    )
    target_value: float | None = Field(
        default=None, description="The paper's value of the primary metric, when synced."
    )
    floor: float | None = Field(
        default=None,
        description="The primary metric of doing nothing on the same hidden seeds, as the "
        "evaluator measured it (the null action, or the policy with zero weights); None "
        "when the result has no floor.",
    )
    floor_normalized: float | None = Field(
        default=None,
        description="(primary_value - floor) / (target_value - floor), when scored with a "
        "floor the paper's value beats; None otherwise. Read beside the score, never instead.",
    )
    metrics: dict[str, float] = Field(
        default_factory=dict,
        description="Every metric the evaluator measured (non-finite values left out).",
    )
    episode_values: list[float] = Field(
        default_factory=list,
        description="The primary metric per evaluated episode, in episode order (what "
        "episodes.png draws); empty when it has no per-episode value or nothing was "
        "evaluated. Its spread says which differences between runs are noise.",
    )
    episode_seeds: list[str] = Field(
        default_factory=list,
        description="The hidden seeds' commitments of episode_values, in the same order; "
        "two runs with equal lists played the same seeds (runs compare pairs them).",
    )
    submission_sha256: str | None = Field(
        default=None, description="Digest of the evaluated submission's files."
    )
    evaluator_version: str | None = None
    simulator_versions: dict[str, str] = Field(default_factory=dict)
    engine: str = Field(
        default="",
        description="The engine environment and device whose episodes the evaluator "
        "measured ('mujoco-warp/cpu', EvalResult.engine); '' for the evaluator's own. The "
        "leaderboard ranks runs of different engines apart unless the task says they are "
        "comparable (eval.engines_comparable).",
    )
    agent_cmd: str
    inspect: InspectRecord | None = Field(
        default=None, description="The Inspect AI sample that drove the agent (its model, log)."
    )
    reason: str = Field(
        default="",
        description="Why the run has no measurement: a stopped run's reason, or for a "
        "completed run without a result (status 'no_result') the cause the score gives "
        "(no submission, a rejected one, no eval session); '' for a measured run.",
    )
    verification: Verification | None = Field(
        default=None,
        description="result.json against the run's signed events; None when not checked "
        "(a summary made without its trajectory), which never ranks.",
    )
    model_calls: int | None = Field(
        default=None,
        description="Calls the agent's model answered, as the run's model gateway counted "
        "them (or Inspect, for an Inspect sample: result.json's model_usage); None when "
        "nothing counted them (no gateway): unknown, never 0.",
    )
    model_tokens: int | None = Field(
        default=None,
        description="The model's input + output tokens in the run: its cost, shown beside "
        "its score; None as for model_calls.",
    )
    model_tokens_in: int | None = Field(default=None, description="Input tokens; None: uncounted.")
    model_tokens_out: int | None = Field(
        default=None, description="Output tokens; None: uncounted."
    )
    model_estimated_calls: int | None = Field(
        default=None,
        description="Calls whose upstream reported no usage, their tokens estimated by the "
        "gateway (a token per 4 bytes); None: uncounted.",
    )

    @model_validator(mode="before")
    @classmethod
    def _drop_computed(cls, data: Any) -> Any:
        """Accept a summary's own JSON back (``ranked``, ``not_ranked_because`` and
        ``verified`` are recomputed, never read)."""
        if isinstance(data, dict) and any(k in data for k in COMPUTED_FIELDS):
            data = {k: v for k, v in data.items() if k not in COMPUTED_FIELDS}
        return data

    @computed_field(  # type: ignore[prop-decorator]
        description="True when result.json agrees with the run's signed events."
    )
    @property
    def verified(self) -> bool:
        return self.verification is not None and self.verification.verified

    @computed_field(description="True when the leaderboard may rank this run.")  # type: ignore[prop-decorator]
    @property
    def ranked(self) -> bool:
        return self.not_ranked_because is None

    @computed_field(  # type: ignore[prop-decorator]
        description="Why the leaderboard leaves this run out; None when it may rank it."
    )
    @property
    def not_ranked_because(self) -> str | None:
        if self.state != "completed":
            return f"{self.state}: no verdict"
        if self.verification is None:
            return "not verified: its signed events were not checked"
        if not self.verification.verified:
            return f"unverified: {self.verification.reason}"
        if self.smoke_episodes is not None:
            return f"smoke run ({self.smoke_episodes} of {self.smoke_of} episodes)"
        if self.status == "no_result":
            return f"no result: {self.reason or 'the evaluator measured nothing'}"
        if not self.official:
            return "not an official result"
        if self.score is None:
            return "unscored (no paper target synced)"
        return None

    @property
    def kind(self) -> str:
        """In a word or two what the run is: 'official', 'smoke 2/10', 'no result' (the
        evaluator measured nothing: never ranked), 'interrupted', 'unverified'
        (result.json contradicts its signed events: whatever it claims)..."""
        if self.state != "completed":
            return self.state
        if self.verification is not None and not self.verification.verified:
            return "unverified"
        if self.smoke_episodes is not None:
            return f"smoke {self.smoke_episodes}/{self.smoke_of}"
        if self.status == "no_result":
            return "no result"
        return "official" if self.official else "unofficial"


COMPUTED_FIELDS = frozenset(RunSummary.model_computed_fields)
"""Left out when a summary is stored: they are recomputed when it is read back."""


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _times(
    report: RunReport | StoppedRunReport, result_json: Path
) -> tuple[dt.datetime, dt.datetime]:
    """(started, ended) as recorded, else estimated (reports before schema 3)."""
    started = report.started_at
    if started is None:
        stamp = _RUN_ID_STAMP.match(report.run_id)
        if stamp is not None:
            started = dt.datetime.strptime(stamp.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)
        else:
            mtime = dt.datetime.fromtimestamp(result_json.stat().st_mtime, dt.UTC)
            started = mtime - dt.timedelta(seconds=report.wall_s)
    ended = report.ended_at or started + dt.timedelta(seconds=report.wall_s)
    return started.astimezone(dt.UTC), ended.astimezone(dt.UTC)


def summarize(
    report: RunReport | StoppedRunReport,
    run_dir: Path,
    verification: Verification | None = None,
) -> RunSummary:
    """The summary of the run in ``run_dir`` whose ``result.json`` is ``report``, with
    ``verification`` (None: not checked, so it never ranks; :func:`load_summary` checks)."""
    started, ended = _times(report, run_dir / "result.json")
    common = {
        "run_id": report.run_id,
        "run_dir": run_dir.absolute(),
        "task_id": report.task_id,
        "label": report.label,
        "state": report.state,
        "started_at": started,
        "ended_at": ended,
        "wall_s": report.wall_s,
        "agent_cmd": report.agent_cmd,
        "inspect": report.inspect,
        "verification": verification,
        **_model_cost(report),
    }
    if isinstance(report, StoppedRunReport):
        return RunSummary(**common, official=False, reason=report.reason)
    score = report.score
    result = report.eval_result
    values = _episode_values(report)
    smoke = report.smoke_run or (result.smoke_run if result is not None else None)
    return RunSummary(
        **common,
        official=report.official,
        smoke_episodes=smoke.episodes if smoke is not None else None,
        smoke_of=smoke.of if smoke is not None else None,
        score=_finite(score.score),
        status=score.status,
        score_line=score.score_line(),
        primary_metric=score.primary_metric,
        primary_value=_finite(score.primary_measured),
        primary_unit=_unit(report.task_id, score.primary_metric),
        direction=score.direction.value,
        target_value=score.target_value,
        floor=_finite(score.floor),
        floor_normalized=_finite(score.floor_normalized),
        metrics={k: v for k, v in score.measured.items() if math.isfinite(v)},
        episode_values=values,
        episode_seeds=_episode_seeds(report, values),
        submission_sha256=report.submission_sha256,
        evaluator_version=report.evaluator_version,
        simulator_versions=report.simulator_versions,
        engine=result.engine.label if result is not None and result.engine is not None else "",
        reason=score.problems[0] if score.status == "no_result" and score.problems else "",
    )


def _model_cost(report: RunReport | StoppedRunReport) -> dict[str, int | None]:
    """The summary's model_* fields from result.json's ``model_usage`` (all None when the
    run had none: a stopped run, or a run whose agent had no gateway)."""
    usage = report.model_usage if isinstance(report, RunReport) else None
    if usage is None:
        return {}
    return {
        "model_calls": usage.calls,
        "model_tokens": usage.tokens,
        "model_tokens_in": usage.tokens_in,
        "model_tokens_out": usage.tokens_out,
        "model_estimated_calls": usage.estimated_calls,
    }


def _unit(task_id: str, metric: str) -> str:
    from ale_robotics.tasks import default_registry

    registry = default_registry()
    if task_id not in registry:
        return ""
    spec = registry.get(task_id)
    unit = next((m.unit for m in spec.metrics if m.name == metric), "")
    return unit or ("s" if metric == "planning_time" else "")


def _episode_values(report: RunReport) -> list[float]:
    """The primary metric per episode, exactly as episodes.png draws it; [] when the
    plot would fall back to another quantity (the metric has no per-episode value)."""
    result = report.eval_result
    if result is None or not (result.episodes or result.outcomes is not None):
        return []
    try:
        plot = episode_plot(result, report.score.target_value)
    except (KeyError, ValueError):  # a task no longer registered, an odd old result
        return []
    if plot.metric != report.score.primary_metric:
        return []
    return [v for v in plot.values if math.isfinite(v)]


def _episode_seeds(report: RunReport, values: list[float]) -> list[str]:
    """The seed commitments of ``values``' episodes; [] when they cannot be matched one
    to one (a value was not finite, or there are no episode records)."""
    result = report.eval_result
    if result is None or len(result.episodes) != len(values):
        return []
    # In the order of the values: episodes.png's, the result's own (episodes and outcomes
    # are both in the evaluator's order).
    return [e.seed_commitment for e in result.episodes]


def load_summary(run_dir: Path) -> RunSummary:
    """The summary of the run in ``run_dir``, its ``result.json`` checked against its signed
    events (raises ``OSError`` when its ``result.json`` cannot be read and
    ``pydantic.ValidationError`` when it is not a run report)."""
    report = load_run_report(run_dir / "result.json")
    return summarize(report, run_dir, verify_run(run_dir, report))
