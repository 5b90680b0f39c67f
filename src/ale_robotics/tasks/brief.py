"""The task brief: what an agent reads first (GetSpec's ``brief``, ``$ALE_TASK_DIR/brief.md``).

A brief has two parts:

* a hand-written part per task, ``tasks/briefs/<task-id>.md`` (package data): the
  goal and the paper's method and protocol as far as the task needs them, written
  for this project from facts of the paper with their table/section references
  (never the paper's text). A line ``<!-- include: _name.md -->`` pulls in a shared
  fragment (``tasks/briefs/_name.md``), so tasks of one paper share one account of it.
* generated sections, rendered here from the task config and its release-manifest
  entry, so that they never drift from what the evaluator enforces: the environment,
  the submission contract, the budgets, the evaluation, how the score is computed
  (formula, target and its source, cap, direction), what the faithfulness gate checks,
  how to submit and what the task packet holds.

The task model's layer may not import scoring (``.importlinter``): the score and gate
rules are described here from the declarative :mod:`.scoring_config`, in the words
of :mod:`ale_robotics.scoring.score` and :mod:`ale_robotics.scoring.gate`.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

from ale_robotics.tasks.manifest import ManifestEntry, PaperTarget
from ale_robotics.tasks.registry import budget_for
from ale_robotics.tasks.scoring_config import (
    AlgorithmAllowlistCheck,
    ArchitectureCheck,
    BudgetCheck,
    FaithfulnessGate,
    LearningCurveCheck,
    check_name,
)
from ale_robotics.tasks.spec import Direction, TaskMode, TaskSpec

__all__ = [
    "BRIEF_DIR",
    "GENERATED_TITLES",
    "generated_sections",
    "hand_written",
    "render_brief",
]

BRIEF_DIR = "briefs"
"""Package-data folder of the hand-written parts, under ``ale_robotics.tasks``."""

GENERATED_TITLES = (
    "Environment",
    "What to produce",
    "Budgets",
    "Evaluation",
    "Score",
    "Faithfulness gate",
    "How to submit",
    "Task packet",
)
"""The generated sections, in the order a brief has them (each a ``## `` heading)."""

_INCLUDE = re.compile(r"^<!--[ \t]*include:[ \t]*(_[a-z0-9_-]+\.md)[ \t]*-->[ \t]*$", re.MULTILINE)


def hand_written(task_id: str) -> str | None:
    """The task's hand-written part with its fragments included; None when it has none
    (a third-party task registered by entry point)."""
    root = resources.files("ale_robotics.tasks") / BRIEF_DIR
    own = root / f"{task_id}.md"
    if not own.is_file():
        return None
    text = own.read_text(encoding="utf-8")

    def include(match: re.Match[str]) -> str:
        return (root / match.group(1)).read_text(encoding="utf-8").strip("\n")

    return _INCLUDE.sub(include, text).strip("\n")


def render_brief(spec: TaskSpec, entry: ManifestEntry | None = None) -> str:
    """The whole brief of ``spec`` as Markdown.

    ``entry`` is the task's release-manifest entry (target, compute budget); None
    renders a task without one (unscored, no budgets), as the evaluator serves it.
    """
    paper = spec.paper
    head = [
        f"# {spec.title}",
        "",
        f"Task `{spec.id}` · mode `{spec.mode.value}` · genre `{spec.genre}` · paper: "
        f"{paper.authors} ({paper.year}), *{paper.title}*"
        + (f", {paper.url}" if paper.url else ""),
        "",
        "This brief is written for ALE Robotics from facts of the paper, with table and "
        "section references; it quotes no paper text. The sections from *Environment* on "
        "are generated from the task config and the release manifest, the same data the "
        "evaluator enforces; where they and the prose differ, they win. The config itself "
        "is `task.json` in `$ALE_TASK_DIR` and GetSpec's `task_config_json`.",
    ]
    own = hand_written(spec.id)
    body = (
        [own]
        if own is not None
        else ["## Goal", "", spec.description, "", "(No hand-written brief ships for this task.)"]
    )
    parts = ["\n".join(head), *body]
    parts += [f"## {title}\n\n{text}" for title, text in generated_sections(spec, entry)]
    return "\n\n".join(p.strip("\n") for p in parts) + "\n"


def generated_sections(spec: TaskSpec, entry: ManifestEntry | None) -> list[tuple[str, str]]:
    """(title, Markdown body) of each generated section, in :data:`GENERATED_TITLES` order."""
    target = entry.target if entry is not None else None
    bodies = [
        _environment(spec),
        _contract(spec),
        _budgets(spec, entry),
        _evaluation(spec),
        _score(spec, target),
        _gate(spec),
        _how_to_submit(spec, entry),
        _packet(spec),
    ]
    return list(zip(GENERATED_TITLES, bodies, strict=True))


# ---------------------------------------------------------------- sections --


def _environment(spec: TaskSpec) -> str:
    lines = [
        f"- Env: `{spec.env.gym_id}`"
        + (f" with kwargs `{_compact(spec.env.kwargs)}`" if spec.env.kwargs else ""),
        f"- Simulator: {spec.simulator.name} (package `{spec.simulator.package}`)",
        f"- Episode limit: {spec.env.max_episode_steps:,} steps (the server truncates there)",
    ]
    if spec.simulator_in_evaluator:
        lines.append(
            "- The simulator runs only in the evaluator: it cannot be imported in your "
            "sandbox; train through practice sessions (see *How to submit*)."
        )
    if spec.env.agent_hidden_modules:
        hidden = ", ".join(f"`{m}`" for m in spec.env.agent_hidden_modules)
        lines.append(f"- Hidden from your sandbox: {hidden}")
    lines.append(
        "- Observation and action specs (dtype, shape, bounds) are in GetSpec "
        "(`observation_spec`, `action_spec`)."
    )
    return "\n".join(lines)


def _contract(spec: TaskSpec) -> str:
    contract = spec.contract
    if contract is None:
        return (
            "No files: this task is measured from the episodes of your eval session, "
            "which the evaluator simulates itself. `contract.json` is `null`."
        )
    lines = [
        "Write into the submission directory, `$ALE_SUBMISSION_DIR` (the path is your "
        f"sandbox's own: read it from the variable). At most {contract.max_total_bytes:,} "
        "bytes in all.",
        "",
        "| role | file name(s) and format | required | max bytes |",
        "|---|---|---|---|",
    ]
    for f in contract.files:
        names = ", ".join(f"`{n}` ({fmt.value})" for n, fmt in f.names.items())
        one = " (exactly one)" if len(f.names) > 1 else ""
        lines.append(
            f"| {f.role} | {names}{one} | {'yes' if f.required else 'no'} | {f.max_bytes:,} |"
        )
    if contract.tensors:
        lines += [
            "",
            "Arrays (exactly these keys, none missing, none extra; finite values):",
            "",
            "| key | shape | dtype | bounds |",
            "|---|---|---|---|",
        ]
        for t in contract.tensors:
            low = "-inf" if t.low is None else _num(t.low)
            high = "inf" if t.high is None else _num(t.high)
            bounds = "" if t.low is None and t.high is None else f"[{low}, {high}]"
            lines.append(f"| `{t.key}` | `{t.shape}` | {t.dtype} | {bounds} |")
    if spec.policy is not None:
        p = spec.policy
        layers = " -> ".join(
            [*(f"Linear {h} -> {p.activation}" for h in p.hidden_sizes), "Linear (actions)"]
        )
        lines += [
            "",
            f"The evaluator builds the policy network itself ({p.kind}: obs -> {layers} -> "
            f"{p.output_activation}, outputs times the action space's high bound) from "
            f"layers named {', '.join(f'`{n}`' for n in p.layer_names)}; you supply only "
            "the weights. Torch files are loaded with `weights_only=True`, npz files with "
            "`allow_pickle=False`, YAML with a safe loader into a strict schema.",
        ]
    if contract.notes:
        lines += ["", f"Contract notes: {contract.notes}"]
    return "\n".join(lines)


def _budgets(spec: TaskSpec, entry: ManifestEntry | None) -> str:
    if entry is None:
        return "The release manifest has no entry for this task: no budgets are set."
    cb = entry.compute_budget
    lines = [f"- Wall clock: {_num(cb.wall_clock_s)} s for your agent, from its start"]
    budget = budget_for(spec, entry)
    if budget is not None:
        lines.append(f"- Training: {budget.describe()}")
    else:
        lines.append("- Training steps: no budget set")
    if spec.mode is not TaskMode.INTERACTIVE:
        lines.append(f"- Submissions: at most {cb.max_submissions} per run")
    ckpt = spec.training.checkpoints if spec.training is not None else None
    if ckpt is not None:
        lines.append(f"- Checkpoints: at most {ckpt.max_checkpoints} per run (SubmitCheckpoint)")
    if cb.cpus is not None:
        lines.append(f"- CPUs: {_num(cb.cpus)}")
    if cb.memory_bytes is not None:
        lines.append(f"- Memory: {cb.memory_bytes:,} bytes")
    tokens: Any = getattr(cb, "model_tokens", None)
    if isinstance(tokens, int):
        lines.append(f"- Model tokens: {tokens:,} (input + output, through the model gateway)")
    else:
        lines.append(
            "- Model tokens: none set by the task; the operator may set a budget for the run "
            "(the model gateway refuses calls past it)"
        )
    return "\n".join(lines)


def _evaluation(spec: TaskSpec) -> str:
    ev = spec.eval
    n = ev.evaluated_episodes
    lines = [
        f"- Episodes: {n}"
        + (f" of the {ev.episodes} published instances" if n != ev.episodes else "")
        + f", rollout kind `{ev.rollout}`"
        + (
            ", the policy used deterministically (no exploration noise)"
            if ev.deterministic and spec.policy is not None
            else ""
        ),
        "- Seeds: for each public base seed s_i of `eval.base_seeds` the evaluator uses "
        "SHA256(s_i || run_id || secret); you never see the hidden seeds.",
    ]
    if spec.mode is TaskMode.INTERACTIVE:
        lines.append(
            f"- One eval session of {ev.episodes} episodes; an episode you do not finish is "
            "completed by the evaluator with the task's null action and marked abandoned "
            "(stopping early never pays)."
        )
    ckpt = spec.training.checkpoints if spec.training is not None else None
    if ckpt is not None:
        lines.append(
            f"- Each committed checkpoint is evaluated on {ckpt.episodes} hidden-seed "
            "episodes of its own, stamped with the evaluator's practice-step count; you "
            "never see those returns."
        )
    metrics = ", ".join(f"`{m.name}` ({m.role.value}, {_arrow(m.direction)})" for m in spec.metrics)
    lines.append(f"- Metrics: {metrics}")
    return "\n".join(lines)


def _score(spec: TaskSpec, target: PaperTarget | None) -> str:
    cfg = spec.scoring
    primary = spec.primary_metric
    if primary.direction is Direction.HIGHER_IS_BETTER:
        formula = f"clamp({primary.name} / target, 0, {_num(cfg.cap)})"
    else:
        formula = f"clamp(target / max({primary.name}, {_num(cfg.eps)}), 0, {_num(cfg.cap)})"
    lines = [
        f"Primary metric `{primary.name}`, {_arrow(primary.direction)}"
        + (f": {primary.description.rstrip('.')}" if primary.description else "")
        + ".",
        "",
        f"- Base score: `{formula}` (cap {_num(cfg.cap)})",
    ]
    for p in cfg.safety:
        rule = (
            f"max(0, 1 - {p.metric} / {_num(p.tolerance)})"
            if p.kind == "linear"
            else f"1 while {p.metric} <= {_num(p.tolerance)}, else 0"
        )
        lines.append(f"- Safety penalty: multiplied by `{rule}`")
    for c in cfg.conditions:
        op = ">=" if c.direction == "at_least" else "<="
        lines.append(f"- Condition: 0 unless `{c.metric} {op} {_num(c.threshold)}`")
    if spec.genre == "reproduction" or cfg.gate is not None:
        lines.append("- 0 unless the faithfulness gate passes (next section)")
    lines.append(
        "- 0 when a metric the score needs is missing or not finite, or when nothing was "
        "measured (no submission, a rejected one)"
    )
    lines.append("")
    if target is None:
        lines.append(
            "Target: none synced. The evaluator reports the metric and the run says "
            "'unscored: target not synced'; no score is invented."
        )
        return "\n".join(lines)
    src = target.source
    lines += [
        f"Target: `{primary.name}` = {_num(target.value)} ({target.statistic.clause}; "
        f"{target.confidence}).",
        "",
        f"- Source: {src.paper}; {src.location}"
        + (f"; page {src.page}" if src.page.isdigit() else f"; {src.page}" if src.page else "")
        + (f"; data commit {src.data_commit}" if src.data_commit else ""),
    ]
    if target.derivation:
        lines.append(f"- Derivation: {target.derivation}")
    comp = target.comparability
    lines.append(
        f"- Paper setup: {comp.paper.env}, {comp.paper.simulator}; ours: {comp.ours.env}, "
        f"{comp.ours.simulator}"
    )
    lines += [f"- Not comparable: {note}" for note in comp.notes]
    if target.note:
        lines.append(f"- Note: {target.note}")
    return "\n".join(lines)


def _gate(spec: TaskSpec) -> str:
    gate = spec.scoring.gate
    if gate is None:
        if spec.genre == "reproduction":
            return "A reproduction task without a configured gate: the gate fails closed (0)."
        return "This task has no faithfulness gate."
    lines = [
        "The gate passes only when no check fails and at least one verified check passes "
        "(it fails closed: missing or unreadable evidence fails it). Evidence comes from "
        "the evaluator and the harness; what you write is compared, never trusted alone.",
        "",
    ]
    lines += [f"- `{check_name(c)}`: {_describe_check(c, spec, gate)}" for c in gate.checks]
    return "\n".join(lines)


def _describe_check(
    c: ArchitectureCheck | AlgorithmAllowlistCheck | BudgetCheck | LearningCurveCheck,
    spec: TaskSpec,
    gate: FaithfulnessGate,
) -> str:
    if isinstance(c, ArchitectureCheck):
        if c.tensors is None:
            return (
                "the submitted policy's keys and shapes equal the contract's arrays exactly "
                "(verified)"
            )
        shapes = ", ".join(f"`{t.key}` {t.shape}" for t in c.tensors)
        return f"the submitted policy's keys and shapes are exactly {shapes} (verified)"
    if isinstance(c, AlgorithmAllowlistCheck):
        allowed = ", ".join(f"`{a}`" for a in c.allowed)
        return (
            f"`{c.file}` field `{c.field}` is one of {allowed} (case-insensitive). Declared, "
            "not verified: it can fail the gate, never pass it alone"
        )
    if isinstance(c, BudgetCheck):
        text = f"the evaluator's count of the run's practice steps is at most {c.max_steps:,}"
        if c.file is not None:
            text += (
                f"; `{c.file}` field `{c.field}` declares your training steps, which must "
                "not exceed the evaluator's count"
            )
        return text + " (verified)"
    limit = c.max_step if c.max_step is not None else gate.budget_max_steps()
    text = (
        f"the evaluator-measured learning curve (your committed checkpoints) has at least "
        f"{c.min_points} points at distinct, increasing practice-step counts"
        + (f" of at most {limit:,}" if limit is not None else "")
        + f"; no gap between consecutive points (from step 0) over {_num(c.max_gap_fraction)} "
        "of the last point's steps; the last checkpoint is the submitted policy"
    )
    if c.min_steps is not None:
        text += f"; the last checkpoint at {c.min_steps:,} or more practice steps"
    if c.min_improvement_se is not None:
        text += (
            f"; the best checkpoint after the first beats the first by more than "
            f"{_num(c.min_improvement_se)} standard errors"
        )
    del spec
    return text + " (verified)"


def _how_to_submit(spec: TaskSpec, entry: ManifestEntry | None) -> str:
    connect = [
        "```python",
        "from ale_robotics.client import AleClient",
        "client = AleClient.from_env()  # ALE_ENDPOINT, ALE_TOKEN, ALE_RUN_ID, ALE_SUBMISSION_DIR",
        "spec = client.get_spec()       # spec.task, spec.contract, spec.brief",
    ]
    practice = spec.offers_practice_sessions
    practice_words = "open, counted against the training budget" if practice else "not offered"
    if spec.mode is TaskMode.INTERACTIVE:
        lines = [
            "Drive episodes over gRPC with the Gymnasium-compatible client:",
            "",
            *connect,
            "from ale_robotics.client import RemoteEnv, RemoteVectorEnv",
        ]
        if practice:
            lines.append(
                'train = RemoteVectorEnv(client, num_envs=8, kind="practice")  # your seeds'
            )
        lines += [
            f'evaluate = RemoteVectorEnv(client, num_envs={spec.eval.episodes}, kind="eval")'
            "  # hidden seeds",
            "```",
            "",
            f"Practice sessions: {practice_words}. "
            f"The run gets one eval session of {spec.eval.episodes} episodes; the evaluator "
            "computes the metric from what it simulated. There are no files to submit.",
        ]
        return "\n".join(lines)
    if spec.mode is TaskMode.TASK_CONFIG:
        return (
            "Do not call SubmitBatchEval. Before you start, the harness writes your copy of "
            "the settings into `$ALE_SUBMISSION_DIR` (see *What to produce*); edit only the "
            "keys the config allows. When your agent exits, the harness submits that copy "
            "and the evaluator runs on it."
        )
    n = entry.compute_budget.max_submissions if entry is not None else None
    lines = [
        "Write the files into `$ALE_SUBMISSION_DIR`, then ask the evaluator to evaluate them:",
        "",
        *connect,
    ]
    if practice:
        lines += [
            "from ale_robotics.client import RemoteEnv",
            'env = RemoteEnv(client, kind="practice")  # train here: the simulator is the '
            "evaluator's",
        ]
    if spec.training is not None and spec.training.checkpoints is not None:
        lines.append("client.submit_checkpoint()  # commit the policy file while you train")
    lines += [
        "job = client.submit()           # SubmitBatchEval: snapshots the directory",
        "status = client.wait(job)       # state and failure reason, never the metric",
        "```",
        "",
        "The evaluator snapshots the files when you submit (later writes change nothing), "
        "validates them without running your code, and evaluates them on hidden seeds. A "
        "violation ends the job REJECTED with a message naming the file, key and rule."
        + (f" At most {n} submissions per run; the run is scored on the last one." if n else ""),
    ]
    return "\n".join(lines)


def _packet(spec: TaskSpec) -> str:
    del spec
    return "\n".join(
        [
            "`$ALE_TASK_DIR` (read-only) holds:",
            "",
            "- `brief.md`: this brief",
            "- `task.json`: the task config, as GetSpec's `task_config_json`",
            "- `contract.json`: the submission contract (`null` for an interactive task)",
            "- `paper/`: the paper files the operator attached to this task, with "
            "`paper/index.json` (name, bytes, SHA-256 of each); empty when none were "
            "attached (the project ships no papers)",
        ]
    )


# ----------------------------------------------------------------- helpers --


def _num(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:g}"


def _arrow(direction: Direction) -> str:
    return "higher is better" if direction is Direction.HIGHER_IS_BETTER else "lower is better"


def _compact(value: object) -> str:
    import json

    return json.dumps(value, sort_keys=True, separators=(",", ":"))
