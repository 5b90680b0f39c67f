"""``trajectory verify`` and ``show`` on a real run dir, cross-checked with its result.json."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import RealRun, cli, copy_run, write_stopped_run

LEVELS = ("harness", "agent", "trusted_evaluator")


def _events(run_dir: Path) -> list[dict[str, object]]:
    lines = (run_dir / "trajectory.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _cut(run_dir: Path, keep: int) -> None:
    path = run_dir / "trajectory.jsonl"
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:keep]))


def test_verify_a_run_dir_checks_the_recorded_head_and_count(
    real_run: RealRun, tmp_path: Path
) -> None:
    run = copy_run(real_run, tmp_path / "run")
    recorded = json.loads((run / "result.json").read_text())
    n = recorded["trajectory_events"]
    assert n == len(_events(run)) and n > 5

    ok = cli("trajectory", "verify", str(run))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith(f"OK: {n} events") and recorded["trajectory_head"] in ok.stdout

    _cut(run, 5)
    cut = cli("trajectory", "verify", str(run))
    assert cut.returncode == 1, cut.stdout + cut.stderr
    assert cut.stdout.startswith("FAIL at event 5: ")
    assert f"ends after 5 events, but the run recorded {n}" in cut.stdout
    # the file alone is still a valid (shorter) chain: only the run's record shows the cut
    alone = cli("trajectory", "verify", str(run / "trajectory.jsonl"))
    assert alone.returncode == 0 and alone.stdout.startswith("OK: 5 events")


def test_verify_json_is_one_document(real_run: RealRun, tmp_path: Path) -> None:
    run = copy_run(real_run, tmp_path / "run")
    recorded = json.loads((run / "result.json").read_text())
    good = cli("trajectory", "verify", "--json", str(run), columns=80)
    assert good.returncode == 0, good.stderr
    assert len(good.stdout.splitlines()) == 1
    doc = json.loads(good.stdout)
    assert doc["ok"] is True and doc["first_bad_event"] is None
    assert doc["events"] == recorded["trajectory_events"]
    assert doc["head"] == recorded["trajectory_head"]
    assert doc["run_id"] == recorded["run_id"] and doc["key_source"] == "trajectory"
    assert doc["expected"] == {
        "result_json": str(run / "result.json"),
        "run_id": recorded["run_id"],
        "head": recorded["trajectory_head"],
        "events": recorded["trajectory_events"],
    }
    assert "--public-key to pin it" in good.stderr  # messages stay off stdout

    _cut(run, 5)
    bad = json.loads(cli("trajectory", "verify", "--json", str(run)).stdout)
    assert bad["ok"] is False and bad["events"] == 5 and bad["first_bad_event"] == 5
    assert "removed from the end" in bad["reason"]


def test_verify_names_events_appended_after_the_run(real_run: RealRun, tmp_path: Path) -> None:
    from ale_robotics.trajectory import TrajectoryWriter

    run = copy_run(real_run, tmp_path / "run")
    recorded = json.loads((run / "result.json").read_text())
    TrajectoryWriter(run / "trajectory.jsonl", recorded["run_id"]).append("agent", "note", {})
    r = cli("trajectory", "verify", str(run))
    assert r.returncode == 1
    assert f"FAIL at event {recorded['trajectory_events']}: " in r.stdout
    assert "appended after the run's record was written" in r.stdout


def test_verify_a_stopped_run_dir(tmp_path: Path) -> None:
    run = write_stopped_run(tmp_path / "stopped")
    assert cli("trajectory", "verify", str(run)).returncode == 0
    _cut(run, 3)
    r = cli("trajectory", "verify", str(run))
    assert r.returncode == 1 and "ends after 3 events, but the run recorded 5" in r.stdout


def test_run_dir_usage_errors_are_one_line(real_run: RealRun, tmp_path: Path) -> None:
    no_traj = tmp_path / "empty"
    no_traj.mkdir()
    bad_result = copy_run(real_run, tmp_path / "run")
    (bad_result / "result.json").write_text("{not json")
    for path, expected in (
        (no_traj, f"no trajectory.jsonl in {no_traj}"),
        (tmp_path / "absent", "does not exist"),
        (bad_result, f"cannot read {bad_result / 'result.json'}"),
    ):
        r = cli("trajectory", "verify", str(path))
        assert r.returncode == 2, (path, r.stdout, r.stderr)
        assert r.stderr.startswith("error: ") and expected in r.stderr, r.stderr
        assert len(r.stderr.splitlines()) == 1 and r.stdout == ""


def test_show_keeps_seq_level_kind_and_signature_at_80_columns(real_run: RealRun) -> None:
    events = _events(real_run.run_dir)
    r = cli("trajectory", "show", str(real_run.run_dir / "trajectory.jsonl"), columns=80)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    for event in events:
        row = next(
            (ln for ln in lines if ln.split()[:1] == [str(event["seq"])]), None
        )  # the row starts with its seq
        assert row is not None, (event["seq"], r.stdout)
        assert f" {event['level']} " in row and f" {event['kind']} " in row, row
        signed = event["level"] == "trusted_evaluator"
        assert ("✓" in row) == signed, row
    assert r.stdout.count("✓") == sum(e["level"] == "trusted_evaluator" for e in events)
    assert lines[-1].startswith(f"OK: {len(events)} events")


def test_show_json_lists_every_event_with_its_signature(real_run: RealRun) -> None:
    events = _events(real_run.run_dir)
    r = cli("trajectory", "show", "--json", str(real_run.run_dir), columns=80)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 1
    doc = json.loads(r.stdout)
    assert [e["hash"] for e in doc["events"]] == [e["hash"] for e in events]
    assert [e["payload"] for e in doc["events"]] == [e["payload"] for e in events]
    for shown in doc["events"]:
        assert shown["level"] in LEVELS
        expected = "valid" if shown["level"] == "trusted_evaluator" else "unsigned"
        assert shown["signature"] == expected, shown
    assert doc["verify"]["ok"] is True and doc["verify"]["events"] == len(events)
