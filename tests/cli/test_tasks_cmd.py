"""``tasks list`` and ``tasks show`` through a pipe at 80 columns, and their JSON."""

from __future__ import annotations

import json

from cli_helpers import cli
from typer.testing import CliRunner

from ale_robotics.tasks import default_registry

runner = CliRunner(env={"COLUMNS": "80"})


def _show(task_id: str) -> str:
    """``tasks show TASK_ID`` at 80 columns, in this process (a process per task would
    cost a second or more each)."""
    from ale_robotics.cli.main import app

    result = runner.invoke(app, ["tasks", "show", task_id])
    assert result.exit_code == 0, (task_id, result.output, result.exception)
    return result.stdout


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


def test_tasks_show_json_is_plain_json_unwrapped() -> None:
    r = cli("tasks", "show", "--json", "td3-walker2d-repro-v1", columns=40)
    assert r.returncode == 0, r.stderr
    assert "\x1b[" not in r.stdout
    doc = json.loads(r.stdout)
    location = doc["manifest"]["target"]["source"]["location"]
    assert len(location) > 40 and location in r.stdout  # one string, not wrapped at 40
    assert doc["task"]["id"] == "td3-walker2d-repro-v1"


def _rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


def test_tasks_show_is_a_page_at_80_columns_for_every_task() -> None:
    """Issue 48.6: the config, the target with its source and budget, the contract's
    files and tensors as tables and the brief's start, readable at 80 columns (it was
    250 lines of JSON); every key, shape and dtype on one row, nothing cut."""
    reg = default_registry()
    for task_id in reg.ids():
        spec = reg.get(task_id)
        entry = reg.manifest_entry(task_id)
        text = _show(task_id)
        lines = text.splitlines()
        assert max(len(line) for line in lines) <= 80, task_id
        assert "…" not in text and not text.lstrip().startswith("{"), task_id
        assert lines[0].split()[0] == task_id
        words = " ".join(text.split())
        if entry is not None and entry.target is not None:
            target = entry.target
            assert f"{spec.primary_metric.name} {target.value:g}" in words, task_id
            assert " ".join(target.source.paper.split()) in words, task_id
            assert target.statistic.description in words, task_id
        assert "wall clock" in words, task_id
        rows = _rows(text)
        contract = spec.contract
        if contract is None:
            assert "eval session" in words, task_id
            continue
        assert "$ALE_SUBMISSION_DIR" in words and "/submission " not in words, task_id
        for f in contract.files:
            for name, fmt in f.names.items():
                assert any(name in row and fmt.value in row for row in rows), (task_id, name)
        for t in contract.tensors:
            shape = f"[{', '.join(map(str, t.shape))}]"
            want = [t.key, *shape.split(), t.dtype]
            assert any(row[: len(want)] == want for row in rows), (task_id, want)
    # the brief's goal, wrapped as prose, and where the rest is; and through a pipe
    r = cli("tasks", "show", "td3-inverted-pendulum-v2", columns=80)
    assert r.returncode == 0 and r.stdout == _show("td3-inverted-pendulum-v2"), r.stderr
    words = " ".join(r.stdout.split())
    assert "Balance a pole on a cart" in words
    assert "ale-robotics tasks brief td3-inverted-pendulum-v2" in words
    assert len(r.stdout.splitlines()) < 120


def test_no_spec_an_agent_reads_names_a_submission_path_but_its_own() -> None:
    """Issue 48.6: the contract said "submission_path": "/submission", which is not where
    a bwrap or unsandboxed agent writes; the contract now names no path (the configs'
    old key is dropped when read) and the brief sends the agent to $ALE_SUBMISSION_DIR."""
    from ale_robotics.tasks.brief import render_brief
    from ale_robotics.tasks.contract import SubmissionContract

    reg = default_registry()
    for task_id in reg.ids():
        spec = reg.get(task_id)
        if spec.contract is None:
            continue
        served = spec.contract.model_dump_json()  # GetSpec's and contract.json's text
        assert "submission_path" not in served and "/submission" not in served, task_id
        assert "/submission" not in spec.model_dump_json(), task_id
        assert "/submission" not in render_brief(spec, reg.manifest_entry(task_id)), task_id
        assert "`$ALE_SUBMISSION_DIR`" in render_brief(spec, reg.manifest_entry(task_id))
        raw = json.loads(reg.entry(task_id).raw)["contract"]
        assert raw["submission_path"] == "/submission"  # the shipped bytes keep the key
        assert SubmissionContract.model_validate(raw) == spec.contract


def test_run_of_a_superseded_version_names_the_newer_one() -> None:
    """The note comes before anything starts (here the bad --sandbox stops the run)."""
    old = cli("run", "td3-inverted-pendulum-v1", "--agent", "true", "--sandbox", "bogus")
    assert old.returncode == 2
    text = " ".join(old.stderr.split())
    assert "td3-inverted-pendulum-v1 is superseded by td3-inverted-pendulum-v2" in text
    assert "for a new run, use td3-inverted-pendulum-v2" in text
    new = cli("run", "td3-inverted-pendulum-v2", "--agent", "true", "--sandbox", "bogus")
    assert new.returncode == 2 and "superseded" not in new.stderr
