"""Issue 48.11: what ``runs list|show|compare`` and ``leaderboard`` print, at 80 columns.

Unit tests of the tables (``cli/runs_tables.py``) on summaries made here, printed to
consoles of 80 columns: a label is never broken inside one of its words
('scripted_interact' / 'ive' was), the messages under the tables wrap at the width
(they ran to 114 columns), and a row or column of numbers has one format ('episode std
0.0 (n=10) | 2.1095 (n=10)' had two). The same tables over real runs, through real
processes, are ``test_runs_cmd.py``'s.
"""

from __future__ import annotations

import datetime as dt
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from rich.console import Console

from ale_robotics.cli import runs_tables
from ale_robotics.runs import RunSummary, compare
from ale_robotics.runs.verify import Verification

WIDTH = 80
START = dt.datetime(2026, 12, 7, 18, 11, tzinfo=dt.UTC)
VERIFIED = Verification(verified=True, checks=["trajectory"], evaluator_key="00" * 32)


def _summary(n: int, label: str, **extra: object) -> RunSummary:
    fields: dict[str, object] = {
        "run_id": f"run-20261207T18{n:02d}00Z-{n:06x}",
        "run_dir": Path(f"/runs/{n}"),
        "task_id": "td3-hopper-v1",
        "label": label,
        "state": "completed",
        "started_at": START + dt.timedelta(minutes=n),
        "ended_at": START + dt.timedelta(minutes=n, seconds=6),
        "wall_s": 6.0,
        "official": True,
        "score": 0.302,
        "status": "scored",
        "primary_metric": "mean_return",
        "agent_cmd": "python agent.py",
        "verification": VERIFIED,
    }
    fields.update(extra)
    return RunSummary.model_validate(fields)


@dataclass
class _Index:
    """What the tables read of a RunIndex."""

    root: Path = Path("/runs")
    warnings: list[str] = field(default_factory=list)

    def problems(self) -> list[object]:
        return []


@dataclass
class Printed:
    out: io.StringIO
    err: io.StringIO

    def lines(self) -> list[str]:
        return [*self.out.getvalue().splitlines(), *self.err.getvalue().splitlines()]


@pytest.fixture
def printed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Printed]:
    """The tables' stdout and stderr as 80-column consoles, captured."""
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(runs_tables, "out", Console(file=out, width=WIDTH))
    monkeypatch.setattr(runs_tables, "console", Console(file=err, width=WIDTH))
    yield Printed(out, err)


def _words_whole(label: str, lines: list[str]) -> None:
    """Each word of ``label`` (between _ - . +) is whole on some line."""
    for word in re.split(r"[_.+\-]", label):
        assert any(word in line for line in lines), (word, "\n".join(lines))


def test_runs_list_keeps_labels_whole_and_wraps_its_messages(printed: Printed) -> None:
    long = "td3_lr3e-4_tau0.005_batch256_seed7_replay1000000"
    runs = [
        _summary(1, "scripted_interactive"),
        _summary(2, "nosession", official=False, score=0.0, status="no_result", reason="x"),
        _summary(3, "vacuous", official=False),  # 'unofficial', the widest kind but two
        _summary(4, long),
        _summary(5, "smoke", smoke_episodes=2, smoke_of=10),
    ]
    runs_tables.print_run_list(_Index(), runs, None)  # type: ignore[arg-type]
    lines = printed.lines()
    assert max(len(line) for line in lines) <= WIDTH, "\n".join(lines)
    assert any("scripted_interactive" in line for line in lines), "\n".join(lines)
    _words_whole(long, lines)
    assert "…" not in "\n".join(lines)
    assert any(line.rstrip().endswith("no result") for line in lines)
    footer = " ".join(printed.err.getvalue().split())
    assert "a run ranks only when the evaluator measured" in footer


def test_leaderboard_and_compare_keep_labels_and_task_ids_whole(printed: Printed) -> None:
    from ale_robotics.runs import leaderboard

    long = "a_label_long_enough_to_need_two_lines_of_its_column"
    runs = [_summary(1, long), _summary(2, "scripted_interactive", score=0.1)]
    runs_tables.print_leaderboard(leaderboard(runs), [runs[1]], Path("/runs"))
    runs_tables.print_comparison(compare(runs))
    lines = printed.lines()
    assert max(len(line) for line in lines) <= WIDTH, "\n".join(lines)
    _words_whole(long, lines)
    _words_whole("td3-hopper-v1", lines)
    assert any("scripted_interactive" in line for line in lines)


def test_compare_shows_the_spreads_in_one_format(printed: Printed) -> None:
    """The row of per-episode spreads: one number of decimals for every run."""
    steady = [1000.0] * 10
    noisy = [996.0, 999.5, 1001.2, 998.3, 1002.9, 997.7, 1000.4, 999.9, 995.1, 1003.0]
    runs = [
        _summary(1, "steady", episode_values=steady, metrics={"mean_return": 1000.0}),
        _summary(2, "noisy", episode_values=noisy, metrics={"mean_return": 999.0}),
    ]
    runs_tables.print_comparison(compare(runs))
    row = next(line for line in printed.lines() if line.startswith("episode std"))
    shown = re.findall(r"(\d+\.\d+) \(n=10\)", row)
    assert len(shown) == 2, row
    assert len({len(value.split(".")[1]) for value in shown}) == 1, row  # same decimals
    assert shown[0] == "0." + "0" * len(shown[1].split(".")[1]), row


def test_runs_show_gives_the_episodes_in_one_format(printed: Printed) -> None:
    values = [998.826, 999.757, 999.151, 999.175, 998.765, 998.122, 999.091, 999.345, 999.661]
    runs_tables.print_run(_summary(1, "x", episode_values=values), None)
    row = next(line for line in printed.lines() if line.startswith("episodes"))
    numbers = re.findall(r"(?:mean|std|min|max) (-?\d+(?:\.\d+)?)", row)
    assert len(numbers) == 4, row
    assert len({len(n.partition(".")[2]) for n in numbers}) == 1, row


# ------------------------------------------ issue 45: the model's cost beside the score --


def _cost_runs() -> list[RunSummary]:
    long = "td3_lr3e-4_tau0.005_batch256_seed7_replay1000000"
    return [
        _summary(1, "claude-code", model_tokens=48_213, model_calls=12),
        _summary(2, "codex_cli_0.171", score=0.9, model_tokens=2880, model_calls=6),
        _summary(3, "scripted_interactive"),  # no gateway: nothing counted
        _summary(4, "smoke", smoke_episodes=2, smoke_of=10, model_tokens=480, model_calls=4),
        _summary(5, long),
    ]


def _row_of(lines: list[str], run_id: str) -> str:
    """The printed line of ``run_id``'s row (its cost stands between its score and its
    kind in runs list, its score and its runs count in the leaderboard)."""
    return next(line for line in lines if run_id in line)


def test_runs_list_shows_tokens_and_calls_beside_the_score_none_for_no_gateway(
    printed: Printed,
) -> None:
    runs = _cost_runs()
    runs_tables.print_run_list(_Index(), runs, None)  # type: ignore[arg-type]
    lines = printed.lines()
    assert max(len(line) for line in lines) <= WIDTH, "\n".join(lines)
    assert "…" not in "\n".join(lines)
    for label in ("scripted_interactive", "claude-code", "codex_cli_0.171", runs[4].label):
        _words_whole(label, lines)
    header = "\n".join(lines[:3])
    assert "tokens/" in header and "calls" in header
    # one unit down the column, aligned on the '/'; '-' (never 0) where nothing counted
    assert re.search(r"0\.302\s+48\.2k/12\s+official", _row_of(lines, runs[0].run_id))
    assert re.search(r"0\.900\s+2\.9k/6\s+official", _row_of(lines, runs[1].run_id))
    assert re.search(r"0\.302\s+-\s+official", _row_of(lines, runs[2].run_id))
    assert re.search(r"0\.302\s+0\.5k/4\s+smoke 2/10", _row_of(lines, runs[3].run_id))
    slashes = {_row_of(lines, r.run_id).index("/") for r in runs if r.model_tokens}
    assert len(slashes) == 1, slashes
    footer = " ".join(printed.err.getvalue().split())
    assert "tokens/calls: the model's input + output tokens of the run" in footer


def test_a_table_without_model_use_has_no_cost_column(printed: Printed) -> None:
    runs = [_summary(1, "scripted_interactive"), _summary(2, "td3")]
    runs_tables.print_run_list(_Index(), runs, None)  # type: ignore[arg-type]
    from ale_robotics.runs import leaderboard

    runs_tables.print_leaderboard(leaderboard(runs), [], Path("/runs"))
    text = printed.out.getvalue() + printed.err.getvalue()
    assert "tokens" not in text and "calls" not in text


def test_leaderboard_shows_the_best_runs_tokens_and_calls(printed: Printed) -> None:
    from ale_robotics.runs import leaderboard

    runs = _cost_runs()
    rows = leaderboard(runs)
    assert [(r.label, r.model_tokens, r.model_calls) for r in rows] == [
        ("codex_cli_0.171", 2880, 6),
        ("claude-code", 48_213, 12),
        ("scripted_interactive", None, None),
        (runs[4].label, None, None),
    ]
    runs_tables.print_leaderboard(rows, [runs[3]], Path("/runs"))
    lines = printed.lines()
    assert max(len(line) for line in lines) <= WIDTH, "\n".join(lines)
    _words_whole(runs[4].label, lines)
    _words_whole("scripted_interactive", lines)
    assert re.search(r"0\.900\s+2\.9k/6\s+1\s", _row_of(lines, runs[1].run_id))
    assert re.search(r"0\.302\s+48\.2k/12\s+1\s", _row_of(lines, runs[0].run_id))
    assert re.search(r"0\.302\s+-\s+1\s", _row_of(lines, runs[2].run_id))
    assert "tokens of the best run" in " ".join(printed.err.getvalue().split())


def test_runs_show_and_compare_give_the_models_cost(printed: Printed) -> None:
    runs = _cost_runs()
    with_usage = runs[0].model_copy(update={"model_tokens_in": 40_000, "model_tokens_out": 8213})
    runs_tables.print_run(with_usage, None)
    runs_tables.print_run(runs[2], None)
    runs_tables.print_comparison(compare(runs[:3]))
    lines = printed.lines()
    models = [line for line in lines if line.startswith("model ")]
    assert models[0].split(None, 1)[1].strip() == ("12 calls, 48,213 tokens (40,000 in, 8,213 out)")
    assert models[1].split(None, 1)[1].strip() == "none counted: the run had no model gateway"
    tokens = next(line for line in lines if line.startswith("model tokens"))
    assert tokens.split()[2:] == ["48.2k", "2.9k", "-"]
    calls = next(line for line in lines if line.startswith("model calls"))
    assert calls.split()[2:] == ["12", "6", "-"]
