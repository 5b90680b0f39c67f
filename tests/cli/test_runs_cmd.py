"""``runs list|show|compare`` and ``leaderboard`` as a user runs them: real processes over
a root of real runs (``tests/runs/runs_helpers.py``), through pipes at 80 columns.

The root: alpha-1, beta-1, alpha-2 (full runs; beta scores near 0) and smoke-1 (a smoke
run, label gamma).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runs"))

from runs_helpers import TASK_ID, RunsRoot, cli, copy_root, runs_root

LABELS = ["alpha", "beta", "alpha", "gamma"]


@pytest.fixture(scope="module")
def made() -> RunsRoot:
    return runs_root()


def _ids(made: RunsRoot) -> dict[str, str]:
    """Run dir name -> run id."""
    return {
        d.name: json.loads((d / "result.json").read_text())["run_id"]
        for d in made.root.iterdir()
        if (d / "result.json").is_file()
    }


def _whole_at_80(text: str) -> list[str]:
    lines = text.splitlines()
    assert lines, "no output"
    assert max(len(line) for line in lines) <= 80, text
    assert "…" not in text  # nothing cut
    return lines


def _usage_error(r: subprocess.CompletedProcess[str], *words: str) -> None:
    """Exit 2, one 'error:' line saying what to do, no traceback, nothing on stdout."""
    assert r.returncode == 2, r
    stderr = r.stderr
    assert "Traceback" not in stderr
    assert r.stdout == ""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_runs_list_json_is_one_document_of_every_run_in_start_order(made: RunsRoot) -> None:
    r = cli("runs", "list", str(made.root), "--json")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 1
    doc = json.loads(r.stdout)
    assert doc["schema_version"] == 1 and doc["root"] == str(made.root)
    runs = doc["runs"]
    assert [Path(s["run_dir"]).name for s in runs] == ["alpha-1", "beta-1", "alpha-2", "smoke-1"]
    assert [s["label"] for s in runs] == LABELS
    assert [s["ranked"] for s in runs] == [True, True, True, False]
    assert runs[3]["smoke_episodes"] == 2 and runs[3]["official"] is False
    assert runs[3]["not_ranked_because"].startswith("smoke run")
    assert runs[0]["started_at"] < runs[1]["started_at"] < runs[2]["started_at"]
    assert len(runs[0]["episode_values"]) == 10
    assert doc["problems"] == []


def test_runs_list_table_is_whole_at_80_columns(made: RunsRoot) -> None:
    r = cli("runs", "list", str(made.root), columns=80)
    assert r.returncode == 0, r.stderr
    lines = _whole_at_80(r.stdout)
    ids = _ids(made)
    rows = {line.split()[0]: line.split()[1:] for line in lines if line.startswith("run-")}
    assert set(rows) == set(ids.values())  # every id whole, at the start of its row
    assert rows[ids["alpha-1"]][0] == "alpha" and rows[ids["alpha-1"]][-1] == "official"
    assert rows[ids["beta-1"]][0] == "beta"
    assert rows[ids["smoke-1"]][-2:] == ["smoke", "2/10"]
    assert rows[ids["alpha-1"]][-2] == "1.018"
    assert f"{TASK_ID}: 4 runs" in r.stdout


def test_leaderboard_json_ranks_labels_and_leaves_the_smoke_run_out(made: RunsRoot) -> None:
    ids = _ids(made)
    r = cli("leaderboard", str(made.root), "--json")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 1
    doc = json.loads(r.stdout)
    rows = doc["rows"]
    assert [(row["rank"], row["label"], row["runs"]) for row in rows] == [
        (1, "alpha", 2),
        (2, "beta", 1),
    ]
    assert rows[0]["run_id"] == ids["alpha-1"]  # equal scores: the earlier run
    assert rows[1]["run_id"] == ids["beta-1"]
    assert rows[0]["score"] > rows[1]["score"]
    assert doc["not_ranked"] == [
        {
            "run_id": ids["smoke-1"],
            "task_id": TASK_ID,
            "label": "gamma",
            "reason": "smoke run (2 of 10 episodes)",
        }
    ]


def test_leaderboard_table_is_whole_at_80_columns(made: RunsRoot) -> None:
    ids = _ids(made)
    r = cli("leaderboard", str(made.root), "--task", TASK_ID, columns=80)
    assert r.returncode == 0, r.stderr
    lines = _whole_at_80(r.stdout)
    ranked = [line.split() for line in lines if line[:1].isdigit()]
    assert [(row[0], row[1], row[4]) for row in ranked] == [
        ("1", "alpha", ids["alpha-1"]),
        ("2", "beta", ids["beta-1"]),
    ]
    assert "gamma" not in r.stdout
    assert "1 run not ranked" in r.stderr


def test_runs_root_defaults_to_runs_in_the_current_directory(made: RunsRoot) -> None:
    r = cli("leaderboard", "--json", cwd=made.base)
    assert r.returncode == 0, r.stderr
    assert [row["label"] for row in json.loads(r.stdout)["rows"]] == ["alpha", "beta"]


def test_runs_show_by_id_prefix_or_directory(made: RunsRoot) -> None:
    ids = _ids(made)
    by_prefix = cli("runs", "show", ids["beta-1"][:-1], "--root", str(made.root), "--json")
    by_dir = cli("runs", "show", str(made.root / "beta-1"), "--json")
    for r in (by_prefix, by_dir):
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["run"]["run_id"] == ids["beta-1"] and doc["run"]["label"] == "beta"
        assert doc["result"] == str(made.root / "beta-1" / "result.json")
    table = cli("runs", "show", ids["smoke-1"], "--root", str(made.root), columns=80)
    assert table.returncode == 0, table.stderr
    _whole_at_80(table.stdout)
    assert ids["smoke-1"] in table.stdout
    assert "not ranked: smoke run (2 of 10 episodes)" in table.stdout
    smoke = cli("runs", "show", str(made.root / "smoke-1"), "--json")
    sha = json.loads(smoke.stdout)["run"]["submission_sha256"]
    assert sha in table.stdout  # whole, on one line: a digest to compare or copy


def test_runs_compare_table_and_json(made: RunsRoot) -> None:
    ids = _ids(made)
    args = [ids["alpha-1"], ids["alpha-2"], ids["beta-1"], "--root", str(made.root)]
    r = cli("runs", "compare", *args, columns=80)
    assert r.returncode == 0, r.stderr
    lines = _whole_at_80(r.stdout)
    for run_id in (ids["alpha-1"], ids["alpha-2"], ids["beta-1"]):
        assert run_id in r.stdout
    primary = lines.index(next(x for x in lines if x.startswith("mean_return (primary)")))
    diffs = lines[primary + 1]
    # alpha-2 the same, beta beyond the noise (its interval, wrapped at 80 columns, ends so)
    assert "Δ 0 (same)" in diffs and "differs" in " ".join(lines[primary : primary + 4])
    doc = json.loads(cli("runs", "compare", *args, "--json").stdout)
    row = next(x for x in doc["rows"] if x["primary"])
    assert row["differs"][0] is None and row["differs"][2] is True
    assert row["intervals"][2][1] < 0
    assert [s["run_id"] for s in doc["runs"]] == [ids["alpha-1"], ids["alpha-2"], ids["beta-1"]]


def test_a_deleted_or_stale_index_is_rebuilt_through_the_cli(
    made: RunsRoot, tmp_path: Path
) -> None:
    root = copy_root(made.root, tmp_path / "runs")

    def labels() -> list[str]:
        r = cli("runs", "list", str(root), "--json")
        assert r.returncode == 0, r.stderr
        return [s["label"] for s in json.loads(r.stdout)["runs"]]

    assert labels() == LABELS
    assert (root / "index.sqlite3").is_file()
    shutil.rmtree(root / "alpha-1")
    assert labels() == ["beta", "alpha", "gamma"]
    result = root / "beta-1" / "result.json"
    result.write_text(result.read_text().replace('"label": "beta"', '"label": "beta2"'))
    assert labels() == ["beta2", "alpha", "gamma"]
    (root / "index.sqlite3").unlink()
    assert labels() == ["beta2", "alpha", "gamma"]
    r = cli("leaderboard", str(root), "--json")
    assert [row["label"] for row in json.loads(r.stdout)["rows"]] == ["alpha", "beta2"]


def test_usage_errors_exit_2_with_one_line_saying_what_to_do(
    made: RunsRoot, tmp_path: Path
) -> None:
    _usage_error(cli("runs", "list", str(tmp_path / "nope")), "RUNS_ROOT")
    _usage_error(cli("leaderboard", str(tmp_path / "nope"), "--json"), "RUNS_ROOT")
    _usage_error(cli("runs", "show", "run-nope", "--root", str(made.root)), "runs list")
    _usage_error(cli("runs", "show", "run-", "--root", str(made.root)), "names 4 runs")
    _usage_error(cli("runs", "show", "run-x", "--root", str(tmp_path / "nope")), "--root")
    _usage_error(cli("runs", "compare", "alpha-1", "--root", str(made.root)), "at least two")
    _usage_error(cli("runs", "list", str(made.root), "--task", "td3-pendulm-v1"), "tasks list")
    (tmp_path / "empty").mkdir()
    _usage_error(cli("runs", "show", str(tmp_path / "empty")), "no result.json")


def test_an_empty_root_lists_nothing_and_says_so(tmp_path: Path) -> None:
    r = cli("runs", "list", str(tmp_path))
    assert r.returncode == 0 and r.stdout == ""
    assert "no runs under" in r.stderr
    r = cli("leaderboard", str(tmp_path), "--json")
    assert r.returncode == 0
    assert json.loads(r.stdout)["rows"] == []
