"""The report's plots drawn off the run's critical path (:func:`start_report`).

``result.json`` is complete when ``start_report`` returns; the plots are being drawn
on a thread and are there once its handle's ``wait()`` returns (the harness waits
before the run returns, so a run still ends with its plots). A plot that cannot be
drawn is logged there, as by :func:`write_report`, never raised.
"""

from __future__ import annotations

import ast
import json
import logging
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ale_robotics.harness import report as report_mod
from ale_robotics.harness.report import RunReport, start_report, write_report
from ale_robotics.model.result import EvalResult
from ale_robotics.scoring import score
from ale_robotics.tasks import default_registry

DATA = Path(__file__).parent / "data" / "plot_results.json"


def _report() -> RunReport:
    entry = json.loads(DATA.read_text(encoding="utf-8"))["return"]
    result = EvalResult.model_validate(entry["eval_result"])
    task = default_registry().get(result.task_id)
    return RunReport(
        run_id="run-plots",
        task_id=task.id,
        agent_cmd="python agent.py",
        agent_exit_code=0,
        agent_budget_exceeded=False,
        budget_s=60.0,
        wall_s=1.0,
        job_state=result.state,
        eval_result=result,
        score=score(task, {}, None, no_result="for the test"),
    )


def _trajectory(tmp_path: Path) -> Path:
    path = tmp_path / "trajectory.jsonl"
    path.write_text("{}\n", encoding="utf-8")
    return path


def test_result_json_is_written_before_the_plots_which_are_there_after_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawing = threading.Event()
    release = threading.Event()
    real = report_mod.plot_episodes

    def slow_plot(*args: object, **kwargs: object) -> None:
        drawing.set()
        assert release.wait(30)
        real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(report_mod, "plot_episodes", slow_plot)
    handle = start_report(tmp_path, _report(), _trajectory(tmp_path))
    assert drawing.wait(30), "the plots are drawn on a thread of their own"
    written = json.loads((tmp_path / "result.json").read_text(encoding="utf-8"))
    assert written["run_id"] == "run-plots" and written["trajectory_events"] == 1
    assert not (tmp_path / "episodes.png").exists()
    release.set()
    handle.wait()
    assert (tmp_path / "episodes.png").stat().st_size > 1000


def test_a_plot_that_fails_on_the_thread_is_logged_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(report_mod, "plot_episodes", broken)
    with caplog.at_level(logging.WARNING, logger=report_mod.__name__):
        start_report(tmp_path, _report(), _trajectory(tmp_path)).wait()
    assert (tmp_path / "result.json").exists()
    assert "episodes.png not drawn (OSError: disk full)" in caplog.text


def test_write_report_still_draws_before_it_returns(tmp_path: Path) -> None:
    write_report(tmp_path, _report(), _trajectory(tmp_path))
    assert (tmp_path / "episodes.png").stat().st_size > 1000


def test_import_matplotlib_imports_what_the_figures_use() -> None:
    code = (
        "import sys\n"
        "from ale_robotics.harness.plots.canvas import import_matplotlib\n"
        "assert 'matplotlib' not in sys.modules\n"
        "import_matplotlib()\n"
        "print(sorted(m for m in sys.modules if m.startswith('matplotlib')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    loaded = set(ast.literal_eval(out.stdout.strip()))
    assert {"matplotlib.figure", "matplotlib.backends.backend_agg", "matplotlib.ticker"} <= loaded
