"""Every registered task has a brief; its generated sections say what the task config and
the release manifest say; the brief names its target's source."""

from __future__ import annotations

import re

import pytest

from ale_robotics.tasks import Registry, default_registry
from ale_robotics.tasks.brief import (
    GENERATED_TITLES,
    generated_sections,
    hand_written,
    render_brief,
)
from ale_robotics.tasks.registry import budget_for
from ale_robotics.tasks.scoring_config import check_name
from ale_robotics.tasks.spec import Direction, TaskMode

IDS = default_registry().ids()


def _section(brief: str, title: str) -> str:
    """The body of the ``## title`` section."""
    match = re.search(rf"^## {re.escape(title)}\n\n(.*?)(?=^## |\Z)", brief, re.S | re.M)
    assert match is not None, title
    return match.group(1)


def _fmt(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def _source_ref(location: str) -> str:
    """What the hand-written part must name of a target's source: 'Table N', or the
    published data file (its folder for per-seed learning curves)."""
    table = re.match(r"Table \d+", location)
    if table:
        return table.group(0)
    token = location.split()[0].rstrip(":")
    return token.rsplit("/", 1)[0] + "/" if token.endswith(".npy") else token


@pytest.mark.parametrize("task_id", IDS)
def test_every_task_has_a_hand_written_brief(task_id: str) -> None:
    text = hand_written(task_id)
    assert text is not None, f"add src/ale_robotics/tasks/briefs/{task_id}.md"
    assert "<!--" not in text  # every include resolved
    assert text.startswith("## Goal"), "a brief opens with its goal"
    assert "## The paper" in text  # the paper's method and protocol, with references


@pytest.mark.parametrize("task_id", IDS)
def test_generated_sections_match_the_spec(registry: Registry, task_id: str) -> None:
    spec = registry.get(task_id)
    entry = registry.manifest_entry(task_id)
    brief = render_brief(spec, entry)
    # all generated sections, in order, each exactly as rendered from the spec
    positions = [brief.index(f"\n## {t}\n") for t in GENERATED_TITLES]
    assert positions == sorted(positions)
    for title, body in generated_sections(spec, entry):
        assert f"## {title}\n\n{body}" in brief

    contract = _section(brief, "What to produce")
    if spec.contract is None:
        assert "No files" in contract
    else:
        assert f"{spec.contract.max_total_bytes:,}" in contract
        for f in spec.contract.files:
            assert f"| {f.role} |" in contract
            assert f"{f.max_bytes:,}" in contract
            for name, fmt in f.names.items():
                assert f"`{name}` ({fmt.value})" in contract
        for t in spec.contract.tensors:
            assert f"| `{t.key}` | `{t.shape}` | {t.dtype} |" in contract

    budgets = _section(brief, "Budgets")
    if entry is not None:
        assert f"{_fmt(entry.compute_budget.wall_clock_s)} s" in budgets
        budget = budget_for(spec, entry)
        if budget is not None:
            assert budget.describe() in budgets
        if spec.mode is not TaskMode.INTERACTIVE:
            assert f"at most {entry.compute_budget.max_submissions} per run" in budgets

    evaluation = _section(brief, "Evaluation")
    assert f"Episodes: {spec.eval.evaluated_episodes}" in evaluation
    for m in spec.metrics:
        assert f"`{m.name}` ({m.role.value}" in evaluation

    score = _section(brief, "Score")
    primary = spec.primary_metric
    cap = _fmt(spec.scoring.cap)
    if primary.direction is Direction.HIGHER_IS_BETTER:
        assert f"clamp({primary.name} / target, 0, {cap})" in score
    else:
        assert f"clamp(target / max({primary.name}, " in score
    for p in spec.scoring.safety:
        assert f"{p.metric} / {_fmt(p.tolerance)}" in score
    for c in spec.scoring.conditions:
        assert (
            f"{c.metric} {'>=' if c.direction == 'at_least' else '<='} {_fmt(c.threshold)}" in score
        )
    target = entry.target if entry is not None else None
    if target is None:
        assert "none synced" in score
    else:
        assert f"= {_fmt(target.value)} (" in score
        assert target.source.location in score  # the brief names the target's source
        assert target.source.paper in score
        for note in target.comparability.notes:
            assert note in score

    gate = _section(brief, "Faithfulness gate")
    if spec.scoring.gate is None:
        assert "no faithfulness gate" in gate
    else:
        for check in spec.scoring.gate.checks:
            assert f"- `{check_name(check)}`:" in gate
            for field in ("max_steps", "min_points", "min_steps"):
                value = getattr(check, field, None)
                if isinstance(value, int):
                    assert f"{value:,}" in gate

    submit = _section(brief, "How to submit")
    if spec.mode is TaskMode.BATCH:
        assert "client.submit()" in submit
    elif spec.mode is TaskMode.TASK_CONFIG:
        assert "Do not call SubmitBatchEval" in submit
    else:
        assert 'kind="eval"' in submit and "client.submit()" not in submit


@pytest.mark.parametrize("task_id", IDS)
def test_the_hand_written_part_names_the_target_source(registry: Registry, task_id: str) -> None:
    entry = registry.manifest_entry(task_id)
    text = hand_written(task_id)
    assert text is not None
    if entry is None or entry.target is None:
        assert "no sourced target" in text
        return
    ref = _source_ref(entry.target.source.location)
    assert ref in text, f"{task_id}: the prose should name {ref!r}, where the target is read"


def test_a_task_without_a_manifest_entry_is_briefed_unscored(registry: Registry) -> None:
    brief = render_brief(registry.get("td3-hopper-v1"), None)
    assert "Target: none synced" in brief
    assert "no budgets are set" in brief
