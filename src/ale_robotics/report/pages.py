"""What a run page shows, as plain data: the templates only lay it out.

Everything is computed here (number formatting, the per-episode table of whatever
backend the task has, the agent log's tail; the trajectory timeline with each event's
signature status is :mod:`.timeline`'s) so that it is checked by mypy and tested
without a browser, and so that the templates hold no logic an agent's text could reach.

Agent-controlled text (the log, payloads, file names, labels) is kept as text:
the templates autoescape it, and control characters are made visible here (an
ESC byte shows as the four characters ``\\x1b``), so neither markup nor a terminal
sequence of the agent's reaches the reader.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from markupsafe import Markup, escape
from pydantic import BaseModel

from ale_robotics.harness.report import RunReport, StoppedRunReport
from ale_robotics.runs.numbers import fmt_column
from ale_robotics.scoring.report import fmt_number

__all__ = [
    "Cell",
    "EpisodeTable",
    "Fact",
    "LogTail",
    "breakable",
    "episode_table",
    "fmt_bytes",
    "fmt_seconds",
    "fmt_time",
    "fmt_value",
    "learning_curve_table",
    "log_tail",
    "parse_time",
    "run_facts",
    "visible",
]

# C0 controls but newline and tab, DEL, C1 controls and the Unicode line separators:
# shown as escapes, never passed on (0x9b is a one-byte CSI on some terminals; a
# browser ignores most of them, which would hide what the agent wrote).
_CONTROL: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
# ANSI colour and cursor sequences (CSI ... final byte, OSC ... BEL/ST): progress
# bars and coloured loggers write them; dropped from the log view.
_ANSI: Final = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")

LOG_TAIL_LINES: Final = 200
"""How many of the agent log's last lines a run page shows."""
LOG_TAIL_BYTES: Final = 256 * 1024
"""How much of the end of agent.log is read (its size is capped at 64 MiB by default)."""


def visible(text: str) -> str:
    """``text`` with control characters written as escapes (``\\x1b``, ``\\u2028``)."""

    def esc(match: re.Match[str]) -> str:
        code = ord(match.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _CONTROL.sub(esc, text)


_BREAK_AFTER: Final = re.compile(r"([_\-./+])")


def breakable(text: str) -> Markup:
    """``text`` (a label, a task id) escaped, with a line-break opportunity after each
    ``_ - . / +``: a narrow column wraps it between its words, never inside one, and
    never makes the table wider than the page."""
    return Markup(_BREAK_AFTER.sub(r"\1<wbr>", str(escape(visible(text)))))


def fmt_value(value: object) -> str:
    """A measured number for a cell: '1000.0', '0.05', 'nan'; ints as they are."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, float):
        return fmt_number(value)
    return visible(str(value))


def fmt_seconds(seconds: float | None) -> str:
    """'2.3 s', '4 min 12 s', '1 h 02 min': a duration a person reads at a glance."""
    if seconds is None or not math.isfinite(seconds):
        return "—"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def fmt_bytes(n: int | None) -> str:
    """'38.6 MiB': binary units, as the harness's caps are given."""
    if n is None:
        return "—"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def parse_time(value: object) -> dt.datetime | None:
    if isinstance(value, dt.datetime):
        return value
    if not isinstance(value, str) or not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def fmt_time(value: object, bare: bool = False) -> str:
    """An instant (ISO 8601 text or a datetime) as '2026-12-01 23:23:36 UTC', without
    the ' UTC' when ``bare`` (a table column that says UTC in its header); '—' when
    unknown."""
    when = parse_time(value)
    if when is None:
        return "—" if not value else visible(str(value))
    text = when.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    if when.utcoffset() is None:
        return when.strftime("%Y-%m-%d %H:%M:%S")
    return text if bare else f"{text} UTC"


@dataclass(frozen=True)
class Fact:
    """One line of a run's facts: a label and its value, shown as text."""

    label: str
    value: str
    mono: bool = False


@dataclass(frozen=True)
class Cell:
    """A table cell: its text and how it is shown ('num' right-aligned; 'good'/'bad'
    coloured; 'none' greyed)."""

    text: str
    kind: Literal["num", "text", "good", "bad", "none"] = "text"


@dataclass(frozen=True)
class EpisodeTable:
    """The per-episode outcomes of a run, whatever its backend (rollouts, planning
    problems, replayed instances): one row per episode, the backend's own columns."""

    title: str
    columns: list[tuple[str, bool]]
    """(name, numeric) per column."""
    rows: list[list[Cell]]


_GOOD_WHEN: Final = {"success": True, "collided": False, "abandoned": False}
"""Flags whose value is a verdict on the episode (coloured); other flags (terminated)
are facts, shown plain."""


def _cell(name: str, value: object) -> Cell:
    if value is None:
        return Cell("—", "none")
    if isinstance(value, bool):
        text = "yes" if value else "no"
        if name not in _GOOD_WHEN:
            return Cell(text)
        return Cell(text, "good" if value == _GOOD_WHEN[name] else "bad")
    if isinstance(value, int | float):
        return Cell(fmt_value(value), "num")
    return Cell(visible(str(value)))


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _as_number(value: object) -> float | int | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _table(title: str, records: Sequence[Mapping[str, object]], skip: set[str]) -> EpisodeTable:
    """One column per field that some record has a value for (a rollout's ``success``
    is None throughout for tasks without one: no column), in the records' order; a
    numeric column in one format (:func:`~ale_robotics.runs.numbers.fmt_column`)."""
    names: list[str] = []
    for record in records:
        names.extend(k for k in record if k not in skip and k not in names)
    names = [n for n in names if any(r.get(n) is not None for r in records)]
    numeric = {n: all(_is_number(r.get(n)) for r in records if r.get(n) is not None) for n in names}
    columns = [(name.replace("_", " "), numeric[name]) for name in names]
    shown = {
        name: fmt_column([_as_number(r.get(name)) for r in records], missing="—")
        for name in names
        if numeric[name]
    }
    rows = [
        [
            Cell(shown[name][i], "num")
            if name in shown and record.get(name) is not None
            else _cell(name, record.get(name))
            for name in names
        ]
        for i, record in enumerate(records)
    ]
    return EpisodeTable(title, columns, rows)


_TITLES: Final = {
    "planner": "Planning problems",
    "edmp": "Planning problems",
    "replay": "Replayed instances",
}


def episode_table(report: RunReport) -> EpisodeTable | None:
    """The run's per-episode table: the evaluator's signed ``outcomes`` when the job has
    them (batch jobs), else its episode records (interactive sessions); None without."""
    result = report.eval_result
    if result is None:
        return None
    if result.outcomes is not None:
        entries: list[BaseModel] = list(result.outcomes.entries())
        if entries:
            title = _TITLES.get(result.outcomes.backend, "Episodes")
            return _table(title, [e.model_dump() for e in entries], set())
    if result.episodes:
        records = [e.model_dump() for e in result.episodes]
        return _table("Episodes", records, {"seed_commitment"})
    return None


def learning_curve_table(report: RunReport) -> EpisodeTable | None:
    """The evaluator-measured learning curve (its checkpoints), None when the run has none."""
    result = report.eval_result
    if result is None or not result.learning_curve:
        return None
    records = [
        {
            "checkpoint": p.index,
            "practice_steps": p.practice_steps,
            "episodes": p.episodes,
            "mean_return": p.mean_return,
            "std_return": p.std_return,
        }
        for p in result.learning_curve
    ]
    return _table("Learning curve (checkpoints evaluated by the evaluator)", records, set())


def _attr(report: BaseModel, name: str, default: Any = None) -> Any:
    """A report field that newer reports have (label, started_at, ...): ``default`` for
    files written before it existed."""
    return getattr(report, name, default)


def run_facts(report: RunReport | StoppedRunReport) -> list[Fact]:
    """What the run was and how the agent ran, in the order a reader checks it."""
    facts = [
        Fact("run id", report.run_id, mono=True),
        Fact("task", report.task_id, mono=True),
        Fact("agent command", visible(report.agent_cmd), mono=True),
    ]
    started, ended = _attr(report, "started_at"), _attr(report, "ended_at")
    if started:
        facts.append(Fact("started", fmt_time(started)))
    if ended:
        facts.append(Fact("ended", fmt_time(ended)))
    facts.append(Fact("wall clock", fmt_seconds(report.wall_s)))
    exit_code = report.agent_exit_code
    facts.append(Fact("agent exit", "killed" if exit_code is None else f"code {exit_code}"))
    if isinstance(report, StoppedRunReport):
        return facts
    facts.append(Fact("budget", fmt_seconds(report.budget_s)))
    stopped = [
        why
        for why, flag in (
            ("over its wall-clock budget", report.agent_budget_exceeded),
            ("over its disk quota", report.agent_disk_quota_exceeded),
            ("killed at its memory limit (OOM)", report.agent_oom_killed),
        )
        if flag
    ]
    if stopped:
        facts.append(Fact("agent stopped", "; ".join(stopped)))
    facts.append(Fact("sandbox", report.sandbox))
    cgroup = report.agent_cgroup
    if report.agent_cgroup_warning:
        cgroup += f" ({visible(report.agent_cgroup_warning)})"
    facts.append(Fact("cgroup", cgroup))
    facts.append(Fact("agent CPU", fmt_seconds(report.agent_cpu_s)))
    facts.append(Fact("agent peak memory", fmt_bytes(report.agent_peak_memory_bytes)))
    if report.agent_frozen_s:
        facts.append(Fact("agent frozen", fmt_seconds(report.agent_frozen_s)))
    facts.append(Fact("job state", report.job_state))
    sha = _attr(report, "submission_sha256")
    if sha:
        facts.append(Fact("submission sha256", sha, mono=True))
    result = report.eval_result
    if result is not None:
        for name, digest in sorted(result.submission_files.items()):
            facts.append(Fact(f"file {visible(name)}", digest, mono=True))
        if result.training is not None:
            training = result.training
            used = f"{training.agent_steps:,}"
            if training.budget_steps is not None:
                used += f" of {training.budget_steps:,}"
            unit = (training.unit or "step").replace("_", " ")
            facts.append(Fact("training", f"{used} {unit}s"))
        facts.append(Fact("evaluator", result.evaluator_version))
        sims = ", ".join(f"{k} {v}" for k, v in sorted(result.simulator_versions.items()))
        facts.append(Fact("simulators", sims))
        host = result.host
        if host is not None:
            facts.append(
                Fact("host", f"{host.platform}, {host.cpu_count} CPUs, Python {host.python}")
            )
        timings = result.timings
        if timings is not None:
            facts.append(
                Fact(
                    "evaluation",
                    f"{fmt_seconds(timings.wall_s)}, {timings.env_steps:,} env steps, "
                    f"{timings.workers} workers",
                )
            )
    return facts


@dataclass(frozen=True)
class LogTail:
    """The end of ``agent.log``, as text to escape."""

    text: str
    lines: int
    """Lines shown."""
    cut: bool
    """Whether lines before them were left out."""
    size: int | None
    """The log's size in bytes; None when there is no log."""


def _terminal_line(line: str) -> str:
    """What a terminal shows of a line with carriage returns: its last segment (a
    progress bar rewrites itself with ``\\r``)."""
    if "\r" not in line:
        return line
    parts = [p for p in line.split("\r") if p]
    return parts[-1] if parts else ""


def log_tail(path: Path, max_lines: int = LOG_TAIL_LINES) -> LogTail:
    """The last ``max_lines`` lines of the agent's log (ANSI sequences dropped, other
    control characters escaped); reads at most :data:`LOG_TAIL_BYTES` from its end."""
    try:
        if path.is_symlink() or not path.is_file():
            return LogTail("", 0, False, None)
        size = path.stat().st_size
        with path.open("rb") as f:
            start = max(0, size - LOG_TAIL_BYTES)
            f.seek(start)
            data = f.read(LOG_TAIL_BYTES)
    except OSError:
        return LogTail("", 0, False, None)
    text = data.decode("utf-8", errors="replace")
    lines = text.replace("\r\n", "\n").split("\n")
    cut = start > 0
    if cut:
        lines = lines[1:]  # the first one is a partial line
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) > max_lines:
        lines = lines[-max_lines:]
        cut = True
    shown = [visible(_ANSI.sub("", _terminal_line(line))) for line in lines]
    return LogTail("\n".join(shown), len(shown), cut, size)
