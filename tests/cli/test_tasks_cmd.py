"""``tasks list`` and ``tasks show`` through a pipe at 80 columns, and their JSON."""

from __future__ import annotations

import json

from cli_helpers import cli

from ale_robotics.tasks import default_registry


def test_tasks_list_is_one_short_row_per_task_at_80_columns() -> None:
    reg = default_registry()
    r = cli("tasks", "list", columns=80)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in r.stdout
    rows = {line.split()[0]: line.split()[1:] for line in lines if line.split()}
    for task_id in reg.ids():
        assert task_id in rows, task_id  # the whole id starts its row
        spec = reg.get(task_id)
        mode = [spec.mode.value, "*"] if reg.superseded_by(task_id) else [spec.mode.value]
        shown = [*mode, spec.primary_metric.name]
        assert rows[task_id][: len(shown)] == shown, rows[task_id]
    # the table only: sources and statistics are in 'tasks show', not 50 wrapped lines here
    assert len(lines) <= len(reg.ids()) + 8
    assert "Fujimoto" not in r.stdout
    assert "tasks show ID" in r.stdout


def test_tasks_list_json_is_one_document_with_every_target() -> None:
    reg = default_registry()
    r = cli("tasks", "list", "--json", columns=80)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 1  # never wrapped, whatever the width
    doc = json.loads(r.stdout)
    assert doc["manifest"]
    by_id = {t["id"]: t for t in doc["tasks"]}
    assert sorted(by_id) == reg.ids()
    for task_id, row in by_id.items():
        target = reg.target(task_id)
        if target is None:
            assert row["target"] is None
            continue
        assert row["target"]["value"] == target.value
        assert row["target"]["statistic"] == target.statistic.value
        assert row["target"]["location"] == target.source.location  # whole, never cut
    assert by_id["td3-reacher-v1"]["direction"] == "lower_is_better"
    for task_id, row in by_id.items():
        assert row["superseded_by"] == reg.superseded_by(task_id)
    assert by_id["td3-inverted-pendulum-v1"]["superseded_by"] == "td3-inverted-pendulum-v2"
    assert by_id["td3-inverted-pendulum-v2"]["superseded_by"] is None


def test_tasks_list_marks_a_superseded_version() -> None:
    r = cli("tasks", "list", columns=80)
    rows = {line.split()[0]: line.split()[1:] for line in r.stdout.splitlines() if line.split()}
    assert rows["td3-inverted-pendulum-v1"][:2] == ["batch", "*"]
    assert rows["td3-inverted-pendulum-v2"][:2] == ["batch", "mean_return"]
    assert "superseded by a newer -vN" in " ".join(r.stdout.split())


def test_tasks_show_is_plain_json_unwrapped_and_takes_json() -> None:
    for args in (
        ("tasks", "show", "td3-walker2d-repro-v1"),
        ("tasks", "show", "--json", "td3-walker2d-repro-v1"),
    ):
        r = cli(*args, columns=40)
        assert r.returncode == 0, r.stderr
        assert "\x1b[" not in r.stdout
        doc = json.loads(r.stdout)
        location = doc["manifest"]["target"]["source"]["location"]
        assert len(location) > 40 and location in r.stdout  # one string, not wrapped at 40
        assert doc["task"]["id"] == "td3-walker2d-repro-v1"


def test_run_of_a_superseded_version_names_the_newer_one() -> None:
    """The note comes before anything starts (here the bad --sandbox stops the run)."""
    old = cli("run", "td3-inverted-pendulum-v1", "--agent", "true", "--sandbox", "bogus")
    assert old.returncode == 2
    text = " ".join(old.stderr.split())
    assert "td3-inverted-pendulum-v1 is superseded by td3-inverted-pendulum-v2" in text
    assert "for a new run, use td3-inverted-pendulum-v2" in text
    new = cli("run", "td3-inverted-pendulum-v2", "--agent", "true", "--sandbox", "bogus")
    assert new.returncode == 2 and "superseded" not in new.stderr
