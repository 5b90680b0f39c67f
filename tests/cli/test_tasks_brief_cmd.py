"""``tasks brief``, ``tasks attach-paper`` and the papers ``tasks show`` lists (real processes)."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import cli

from ale_robotics.tasks import default_registry
from ale_robotics.tasks.brief import render_brief

TASK = "td3-walker2d-repro-v3"


def test_tasks_brief_prints_the_brief_and_its_json() -> None:
    reg = default_registry()
    expected = render_brief(reg.get(TASK), reg.manifest_entry(TASK))
    r = cli("tasks", "brief", TASK)
    assert r.returncode == 0, r.stderr
    assert r.stdout == expected
    r = cli("tasks", "brief", TASK, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"task_id": TASK, "brief": expected}


def test_an_unknown_task_is_one_line_with_close_matches() -> None:
    for args in (("brief", "td3-walker2d-repro-v9"), ("attach-paper", "td3-hoper-v1", "x.pdf")):
        r = cli("tasks", *args)
        assert r.returncode == 2
        assert r.stderr.count("\n") == 1 and "did you mean" in r.stderr, r.stderr


def test_attach_paper_then_show_lists_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (tmp_path / "TD3 paper.pdf").write_bytes(b"%PDF-1.4\n%%EOF\n")
    r = cli(
        "tasks", "attach-paper", TASK, str(tmp_path / "TD3 paper.pdf"), "--state-dir", str(state)
    )
    assert r.returncode == 0, r.stderr
    assert "attached TD3_paper.pdf" in r.stdout
    r = cli("tasks", "show", TASK, "--json", "--state-dir", str(state))
    doc = json.loads(r.stdout)
    assert doc["paper_library"] == str(state / "tasks" / TASK / "paper")
    assert [p["name"] for p in doc["papers"]] == ["TD3_paper.pdf"]
    assert doc["papers"][0]["original_name"] == "TD3 paper.pdf"
    assert len(doc["papers"][0]["sha256"]) == 64


def test_attach_paper_refuses_a_missing_file_and_a_wrong_type(tmp_path: Path) -> None:
    (tmp_path / "paper.html").write_text("<html></html>")
    for path, message in (
        (tmp_path / "absent.pdf", "no such file"),
        (tmp_path / "paper.html", "must be a PDF"),
    ):
        r = cli("tasks", "attach-paper", TASK, str(path), "--state-dir", str(tmp_path / "s"))
        assert r.returncode == 2
        assert r.stderr.count("\n") == 1 and message in r.stderr, r.stderr
    assert not (tmp_path / "s").exists()
