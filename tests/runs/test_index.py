"""The run index over real runs: what it lists and ranks, and that it is never stale.

The root (``runs_helpers``): alpha-1, beta-1, alpha-2 (full runs of two labels, beta
scoring near 0) and smoke-1 (a smoke run of label gamma), made by real
``ale-robotics run`` processes.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from runs_helpers import TASK_ID, RunsRoot

from ale_robotics.errors import InvalidArgumentError, NotFoundError
from ale_robotics.harness.report import load_run_report, submission_sha256
from ale_robotics.runs import INDEX_FILE, RunIndex, compare, leaderboard


def _dirs(index: RunIndex) -> list[str]:
    return [s.run_dir.name for s in index.runs()]


def test_runs_lists_every_run_in_start_order_with_its_facts(made_runs: RunsRoot) -> None:
    with RunIndex(made_runs.root) as index:
        runs = index.runs()
    assert [s.run_dir.name for s in runs] == ["alpha-1", "beta-1", "alpha-2", "smoke-1"]
    assert [s.label for s in runs] == ["alpha", "beta", "alpha", "gamma"]
    assert [s.started_at for s in runs] == sorted(s.started_at for s in runs)
    alpha1, beta1, alpha2, smoke = runs
    for s in runs:
        report = load_run_report(s.run_dir / "result.json")
        assert s.run_id == report.run_id and s.task_id == TASK_ID
        assert s.state == "completed" and s.started_at < s.ended_at
        assert s.run_dir == (made_runs.root / s.run_dir.name).absolute()
        assert s.evaluator_version and "mujoco" in s.simulator_versions
        assert s.primary_metric == "mean_return"
    # what was evaluated: the shipped checkpoint twice (same digest), a different one once
    assert alpha1.submission_sha256 == alpha2.submission_sha256 == smoke.submission_sha256
    assert beta1.submission_sha256 not in (None, alpha1.submission_sha256)
    report = load_run_report(alpha1.run_dir / "result.json")
    assert report.eval_result is not None
    assert alpha1.submission_sha256 == submission_sha256(report.eval_result.submission_files)
    # scores and the per-episode values the spread is taken from
    assert alpha1.score == pytest.approx(1000.0 / 982.02)
    assert beta1.score is not None and beta1.score < 0.1
    assert len(alpha1.episode_values) == 10 and len(smoke.episode_values) == 2
    mean = sum(beta1.episode_values) / len(beta1.episode_values)
    assert beta1.primary_value == pytest.approx(mean)
    # only the smoke run is left out of the ranking, saying why
    assert [s.ranked for s in runs] == [True, True, True, False]
    assert (smoke.official, smoke.smoke_episodes, smoke.smoke_of) == (False, 2, 10)
    assert smoke.not_ranked_because == "smoke run (2 of 10 episodes)"


def test_leaderboard_ranks_the_best_official_run_per_label_never_the_smoke_run(
    made_runs: RunsRoot,
) -> None:
    with RunIndex(made_runs.root) as index:
        runs = index.runs()
        rows = index.leaderboard()
    by_dir = {s.run_dir.name: s for s in runs}
    assert [(r.rank, r.label) for r in rows] == [(1, "alpha"), (2, "beta")]
    alpha, beta = rows
    # alpha's two runs score the same: the earlier one holds the place; both are counted
    assert alpha.run_id == by_dir["alpha-1"].run_id and alpha.runs == 2
    assert alpha.score == by_dir["alpha-1"].score
    assert beta.run_id == by_dir["beta-1"].run_id and beta.runs == 1
    assert alpha.score > beta.score
    assert "gamma" not in {r.label for r in rows}  # the smoke run scored 1.018 too
    assert leaderboard(runs, task_id="td3-hopper-v1") == []
    assert leaderboard(runs, task_id=TASK_ID) == rows


def test_a_deleted_index_is_rebuilt_and_an_untouched_one_is_not_reread(root_copy: Path) -> None:
    with RunIndex(root_copy) as index:
        first = index.runs()
        assert index.last_refresh.rebuilt and len(index.last_refresh.added) == 4
        assert (root_copy / INDEX_FILE).is_file()
        index.runs()
        assert index.last_refresh.added == index.last_refresh.updated == []
        assert not index.last_refresh.rebuilt
    (root_copy / INDEX_FILE).unlink()
    with RunIndex(root_copy) as index:
        assert index.runs() == first
        assert index.last_refresh.rebuilt
        assert sorted(index.last_refresh.added) == ["alpha-1", "alpha-2", "beta-1", "smoke-1"]


def test_a_rewritten_result_is_read_again(root_copy: Path) -> None:
    with RunIndex(root_copy) as index:
        assert index.runs()[1].label == "beta"
        result = root_copy / "beta-1" / "result.json"
        doc = json.loads(result.read_text())
        doc["label"] = "beta-renamed"
        # same size and an mtime in the past would still differ from the row's
        result.write_text(json.dumps(doc, indent=2) + "\n")
        old = result.stat().st_mtime_ns - 10**9
        os.utime(result, ns=(old, old))
        assert [s.label for s in index.runs()] == ["alpha", "beta-renamed", "alpha", "gamma"]
        assert index.last_refresh.updated == ["beta-1"]
        assert [r.label for r in index.leaderboard()] == ["alpha", "beta-renamed"]


def test_run_dirs_added_and_removed_are_seen(root_copy: Path) -> None:
    with RunIndex(root_copy) as index:
        assert len(index.runs()) == 4
        shutil.rmtree(root_copy / "alpha-1")
        assert _dirs(index) == ["beta-1", "alpha-2", "smoke-1"]
        assert index.last_refresh.removed == ["alpha-1"]
        # the leaderboard follows: alpha's best is now its second run
        (alpha,) = [r for r in index.leaderboard() if r.label == "alpha"]
        assert alpha.run_dir.name == "alpha-2" and alpha.runs == 1
        # a nested layout (an eval set's) is found too
        nested = root_copy / "set" / TASK_ID / "beta" / "rep0"
        shutil.copytree(root_copy / "beta-1", nested)
        assert "rep0" in _dirs(index)
        assert index.last_refresh.added == [f"set/{TASK_ID}/beta/rep0"]


def test_a_run_still_going_is_not_listed_and_nothing_under_it_is_searched(
    root_copy: Path,
) -> None:
    going = root_copy / "going"
    going.mkdir()
    (going / "trajectory.jsonl").write_text("")
    shutil.copytree(root_copy / "beta-1", going / "scratch" / "fake-run")  # an agent's files
    with RunIndex(root_copy) as index:
        assert "going" not in _dirs(index) and "fake-run" not in _dirs(index)
        shutil.copy(root_copy / "beta-1" / "result.json", going / "result.json")  # it finished
        assert "going" in _dirs(index)


def test_an_index_of_another_schema_or_not_sqlite_is_rebuilt(root_copy: Path) -> None:
    with RunIndex(root_copy) as index:
        expected = index.runs()
    con = sqlite3.connect(root_copy / INDEX_FILE)
    con.execute("UPDATE schema_version SET version = 1")
    con.execute("UPDATE runs SET summary = '{\"old\": true}'")  # what an old layout held
    con.commit()
    con.close()
    with RunIndex(root_copy) as index:
        assert index.runs() == expected
        assert index.last_refresh.rebuilt
    (root_copy / INDEX_FILE).write_bytes(b"this is not an SQLite database\n" * 100)
    with RunIndex(root_copy) as index:
        assert index.runs() == expected
        assert index.last_refresh.rebuilt
    assert sqlite3.connect(root_copy / INDEX_FILE).execute("SELECT count(*) FROM runs").fetchone()


def test_a_broken_result_is_reported_and_the_other_runs_still_listed(root_copy: Path) -> None:
    (root_copy / "beta-1" / "result.json").write_text('{"state": "completed"')
    (root_copy / "alpha-2" / "result.json").write_text('{"not": "a report"}')
    with RunIndex(root_copy) as index:
        assert _dirs(index) == ["alpha-1", "smoke-1"]
        problems = {p.path.parent.name: p.reason for p in index.problems()}
    assert set(problems) == {"alpha-2", "beta-1"}
    assert problems["beta-1"].startswith("not a run report")
    assert problems["alpha-2"].startswith("not a run report")


def test_where_the_index_cannot_be_written_it_is_kept_in_memory(root_copy: Path) -> None:
    (root_copy / INDEX_FILE).mkdir()  # SQLite cannot open a directory (root or not)
    with RunIndex(root_copy) as index:
        assert _dirs(index) == ["alpha-1", "beta-1", "alpha-2", "smoke-1"]
        assert index.warnings and "kept in memory" in index.warnings[0]


def test_a_report_of_another_schema_version_is_a_problem_that_says_so(root_copy: Path) -> None:
    """result.json has one version; a file of another is listed as a problem, not read."""
    result = root_copy / "alpha-1" / "result.json"
    doc = json.loads(result.read_text())
    doc["schema_version"] = 3
    result.write_text(json.dumps(doc))
    with RunIndex(root_copy) as index:
        assert "alpha-1" not in _dirs(index)
        problems = {p.path.parent.name: p.reason for p in index.problems()}
    assert "has schema_version 3; this ale-robotics reads schema_version 6" in problems["alpha-1"]


def test_find_takes_a_run_id_a_unique_prefix_or_a_directory(root_copy: Path) -> None:
    with RunIndex(root_copy) as index:
        runs = index.runs()
        beta = runs[1]
        assert index.find(beta.run_id) == beta
        assert index.find("beta-1") == beta
        assert index.find(beta.run_id[:-2]) == beta
        with pytest.raises(NotFoundError, match="runs list"):
            index.find("run-nope")
        with pytest.raises(InvalidArgumentError, match="names 4 runs"):
            index.find("run-")
        shutil.copytree(root_copy / "beta-1", root_copy / "beta-copy")
        with pytest.raises(InvalidArgumentError, match="names 2 runs"):
            index.find(beta.run_id)  # two directories hold that run


def test_a_missing_root_says_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="RUNS_ROOT"):
        RunIndex(tmp_path / "nope")
    (tmp_path / "file").write_text("")
    with pytest.raises(InvalidArgumentError, match="not a directory"):
        RunIndex(tmp_path / "file")


def test_compare_says_which_differences_the_episodes_tell_apart(
    made_runs: RunsRoot,
) -> None:
    with RunIndex(made_runs.root) as index:
        alpha1, beta1, alpha2, smoke = index.runs()
    c = compare([alpha1, alpha2, beta1, smoke])
    primary = next(r for r in c.rows if r.primary)
    assert primary.metric == "mean_return"
    assert primary.diffs[1] == pytest.approx(0.0)
    assert primary.differs[1] is False  # the same policy
    assert primary.diffs[2] is not None and primary.diffs[2] < -500
    assert primary.differs[2] is True  # far beyond the noise of either run
    assert primary.intervals[2] is not None and primary.intervals[2][1] < 0
    assert c.spreads[0] is not None and c.spreads[2] is not None
    assert any("smoke run" in note for note in c.notes)
    assert c.rows[0].metric == "score" and c.rows[0].values[0] == alpha1.score


def test_a_stopped_run_is_listed_with_why_and_never_ranked(root_copy: Path) -> None:
    from ale_robotics.harness.report import StoppedRunReport, write_stopped

    run_dir = root_copy / "stopped-1"
    run_dir.mkdir()
    (run_dir / "trajectory.jsonl").write_text("")
    report = StoppedRunReport(
        state="interrupted",
        run_id="run-20990101T000000Z-000000",
        task_id=TASK_ID,
        agent_cmd="python examples/agents/td3_train.py",
        label="td3_train",
        reason="interrupted by SIGINT during the agent phase",
        signal="SIGINT",
        phase="agent",
        wall_s=2.0,
    )
    write_stopped(run_dir, report, run_dir / "trajectory.jsonl")
    with RunIndex(root_copy) as index:
        stopped = index.find("stopped-1")
        rows = index.leaderboard()
    assert (stopped.state, stopped.label, stopped.score) == ("interrupted", "td3_train", None)
    assert stopped.reason.startswith("interrupted by SIGINT")
    assert stopped.not_ranked_because == "interrupted: no verdict"
    assert stopped.run_id not in {r.run_id for r in rows}
