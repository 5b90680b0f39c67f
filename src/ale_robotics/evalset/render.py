"""``aggregate.md`` and the notes of an aggregate: what :mod:`.aggregate` computed, to read.

Apart from :mod:`.aggregate` (which re-exports :func:`render_markdown` and
:func:`all_notes`) to keep each module to one job; it reads the aggregate's models only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ale_robotics.evalset.aggregate import EvalSetAggregate
    from ale_robotics.evalset.cost import LabelCost
    from ale_robotics.evalset.interval import Interval

__all__ = ["all_notes", "fmt_tokens_interval", "render_markdown", "tokens_text"]


def tokens_text(value: float | None) -> str:
    """A mean of token counts, to whole tokens ('2880', '48,213': thousands separated from
    10,000 up, as counts are everywhere); '-' for none (nothing counted them)."""
    if value is None:
        return "-"
    whole = round(value)
    return f"{whole:,}" if abs(whole) >= 10_000 else str(whole)


def fmt_tokens_interval(iv: Interval | None) -> str:
    """'2880 [2640, 3120]': mean tokens per run and its interval; '-' for none."""
    if iv is None:
        return "-"
    return f"{tokens_text(iv.value)} [{tokens_text(iv.low)}, {tokens_text(iv.high)}]"


def _fmt(iv: Interval | None) -> str:
    if iv is None:
        return "-"
    return f"{iv.value:.3f} [{iv.low:.3f}, {iv.high:.3f}]"


def all_notes(agg: EvalSetAggregate) -> list[str]:
    """Everything a reader of the aggregate should know besides its numbers: the set's
    notes, each agent's, and the repetitions not completed."""
    notes = list(agg.notes) + [f"{a.label}: {a.note}" for a in agg.agents if a.note]
    notes += [
        f"{c.task_id}/{c.label}: repetition(s) {', '.join(map(str, c.missing_reps))} not completed"
        for c in agg.cells
        if c.missing_reps
    ]
    return notes


def render_markdown(agg: EvalSetAggregate) -> str:
    """``aggregate.md``: the same numbers as ``aggregate.json``, as tables to read."""
    pct = f"{agg.bootstrap.confidence:.0%}"
    lines = [f"# Eval set {agg.set_name}", ""]
    lines += [
        f"{agg.runs_scored} of {agg.runs_expected} runs scored: "
        f"{len(agg.tasks)} task(s) x {len(agg.labels)} agent(s) x {agg.repetitions} "
        "repetition(s). Scores are normalized: 1.0 = the paper's value.",
        "",
        f"Intervals: {agg.method}.",
        "",
        "## Across tasks",
        "",
        f"| agent | runs/task | IQM [{pct} CI] | optimality gap [{pct} CI] "
        f"| mean [{pct} CI] | median [{pct} CI] |",
        "|---|---:|---|---|---|---|",
    ]
    for a in agg.agents:
        lines.append(
            f"| {a.label} | {a.runs_per_task} | {_fmt(a.iqm)} | {_fmt(a.optimality_gap)} "
            f"| {_fmt(a.mean)} | {_fmt(a.median)} |"
        )
    lines += ["", "## Per task", ""]
    lines += [
        f"| task | agent | n | mean [{pct} CI] | IQM [{pct} CI] | scores | tokens/run |",
        "|---|---|---:|---|---|---|---:|",
    ]
    for c in agg.cells:
        scores = ", ".join(f"{s:.3f}" for s in c.scores) or "-"
        lines.append(
            f"| {c.task_id} | {c.label} | {c.n}/{c.runs_expected} | {_fmt(c.mean)} "
            f"| {_fmt(c.iqm)} | {scores} | {tokens_text(c.mean_tokens)} |"
        )
    lines += _cost_markdown(agg, pct)
    notes = all_notes(agg)
    if notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def _cost_markdown(agg: EvalSetAggregate, pct: str) -> list[str]:
    """The model's cost beside the score, per agent, and the Pareto frontier (or why the
    set has none)."""
    lines = ["", "## Model cost beside score", ""]
    if agg.no_cost_plot is not None:
        lines.append(f"No score-vs-tokens plot: {agg.no_cost_plot}.")
        if not any(c.runs_counted for c in agg.cost):
            return lines
        lines.append("")
    frontier = [c.label for c in sorted(agg.cost, key=_tokens_of) if c.pareto]
    if frontier:
        lines += [
            "Pareto frontier (a higher mean score, fewer tokens per run): "
            + ", ".join(frontier)
            + ".",
            "",
        ]
    lines += [
        f"| agent | runs counted | tokens/run [{pct} CI] | calls/run | mean score [{pct} CI] "
        "| frontier |",
        "|---|---:|---|---:|---|---|",
    ]
    for c in agg.cost:
        calls = "-" if c.calls is None else f"{c.calls:.1f}"
        on = {True: "yes", False: "no", None: "-"}[c.pareto]
        lines.append(
            f"| {c.label} | {c.runs_counted}/{c.runs_counted + c.runs_uncounted} "
            f"| {fmt_tokens_interval(c.tokens)} | {calls} | {_fmt(c.score)} | {on} |"
        )
    return lines


def _tokens_of(c: LabelCost) -> float:
    return float("inf") if c.tokens is None else c.tokens.value
