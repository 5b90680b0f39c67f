"""``ale-robotics audit`` on a completed, a stopped and an unfinished run directory."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from cli_helpers import STOPPED_RUN_ID, RealRun, cli, copy_run, write_stopped_run


def test_audit_json_of_a_completed_run(real_run: RealRun) -> None:
    r = cli("audit", str(real_run.run_dir), "--secret", str(real_run.secret), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(r.stdout.splitlines()) == 1
    doc = json.loads(r.stdout)
    recorded = json.loads((real_run.run_dir / "result.json").read_text())
    assert doc["ok"] is True and doc["run_state"] == "completed" and doc["fatal"] is None
    assert doc["run_id"] == recorded["run_id"] and doc["failed_checks"] == []
    names = {c["name"] for c in doc["checks"]}
    assert {"trajectory", "seed commitments", "metrics", "score"} <= names
    assert all(c["ok"] for c in doc["checks"]) and doc["stopped"] is None


def test_audit_catches_a_cut_trajectory_in_json(real_run: RealRun, tmp_path: Path) -> None:
    run = copy_run(real_run, tmp_path / "run")
    path = run / "trajectory.jsonl"
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:-1]))
    r = cli("audit", str(run), "--secret", str(real_run.secret), "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and "trajectory" in doc["failed_checks"]
    detail = next(c["detail"] for c in doc["checks"] if c["name"] == "trajectory")
    assert "removed from the end" in detail


def test_audit_without_result_json_says_the_run_did_not_finish(tmp_path: Path) -> None:
    run = tmp_path / "run-unfinished"
    run.mkdir()
    (run / "trajectory.jsonl").write_bytes(b"")
    for extra in ((), ("--json",)):
        r = cli("audit", str(run), "--secret", str(tmp_path / "secret"), *extra)
        assert r.returncode == 2, r.stderr
        assert r.stderr.strip() == (
            f"error: no result.json in {run}: the run did not finish (or this is not a run "
            "directory)"
        )
        assert r.stdout == ""


def test_audit_of_an_interrupted_run_says_nothing_was_scored(tmp_path: Path) -> None:
    run = write_stopped_run(tmp_path / "stopped")
    r = cli("audit", str(run))  # no --secret needed: nothing is recomputed
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.strip() == (
        f"run {STOPPED_RUN_ID} was interrupted (SIGINT during agent): nothing was scored, "
        "nothing to audit; its trajectory: 5 events, verifies OK"
    )
    assert "Traceback" not in r.stderr

    doc = json.loads(cli("audit", str(run), "--json").stdout)
    assert doc["run_state"] == "interrupted" and doc["ok"] is False
    assert doc["stopped"]["signal"] == "SIGINT" and doc["stopped"]["phase"] == "agent"
    assert doc["checks"] == [
        {"name": "trajectory", "ok": True, "detail": "OK: 5 events, chain and signatures verify"}
    ]

    path = run / "trajectory.jsonl"
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:3]))
    cut = cli("audit", str(run))
    assert cut.returncode == 1
    assert "its trajectory: 5 events, FAILS: FAIL at event 3: the file ends after 3" in cut.stdout


def _default_state(home: Path) -> Path:
    """The embedded evaluator's state dir under XDG_STATE_HOME ``home`` (no --state-dir)."""
    state = home / "ale-robotics" / "evaluator"
    state.mkdir(parents=True)
    return state


def test_audit_finds_the_embedded_evaluators_own_secret(real_run: RealRun, tmp_path: Path) -> None:
    """Issue 48.4: ``audit runs/<id>``, as the tour writes it, failed with "pass --secret
    FILE" on the machine that ran the run, whose default state dir holds the secret."""
    home = tmp_path / "xdg"
    shutil.copyfile(real_run.secret, _default_state(home) / "secret")
    r = cli("audit", str(real_run.run_dir), env={"XDG_STATE_HOME": str(home)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1].startswith("audit OK")
    shown = home / "ale-robotics" / "evaluator" / "secret"
    assert r.stderr.strip() == f"secret: {shown} (the embedded evaluator's)"


def test_audit_without_the_secret_says_where_it_looked(real_run: RealRun, tmp_path: Path) -> None:
    home = tmp_path / "xdg"
    looked = home / "ale-robotics" / "evaluator" / "secret"
    r = cli("audit", str(real_run.run_dir), env={"XDG_STATE_HOME": str(home)})
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == (
        "error: no --secret given, and the embedded evaluator's default state dir has none "
        f"(looked for {looked}): pass --secret FILE: the secret of the evaluator that ran it, "
        "STATE_DIR/secret (the --state-dir it ran with; a shared evaluator's operator reveals "
        "it)"
    )


def test_audit_never_takes_another_evaluators_secret(real_run: RealRun, tmp_path: Path) -> None:
    """The default state dir holds a secret, but another evaluator ran the run (it ran
    with --state-dir): refused, not an audit that fails every seed check."""
    home = tmp_path / "xdg"
    other = _default_state(home) / "secret"
    other.write_bytes(bytes(range(32)))
    r = cli("audit", str(real_run.run_dir), env={"XDG_STATE_HOME": str(home)})
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith(
        f"error: no --secret given, and the default one, {other}, is not this run's"
    )
    assert len(r.stderr.splitlines()) == 1


def test_audit_of_a_batch_run_without_its_submission_says_where_it_is(
    real_run: RealRun, tmp_path: Path
) -> None:
    """A run on a shared evaluator has no submission in its run dir (the evaluator keeps it
    in SUBMISSION_DIR/<run_id>): the audit says so in one line, exit 2, and audits the run
    when given it with --submission."""
    run = copy_run(real_run, tmp_path / "run")
    run_id = json.loads((run / "result.json").read_text())["run_id"]
    moved = tmp_path / "volume" / run_id
    moved.parent.mkdir()
    (run / "submission").rename(moved)
    r = cli("audit", str(run), "--secret", str(real_run.secret))
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip() == (
        f"error: {run / 'submission'} does not exist: a run on a shared evaluator keeps its "
        f"submission in the evaluator's SUBMISSION_DIR/{run_id}; pass it with "
        "--submission DIR"
    )
    assert "Traceback" not in r.stderr and r.stdout == ""
    wrong = cli("audit", str(run), "--secret", str(real_run.secret), "--submission", str(run))
    assert wrong.returncode == 1  # a directory, but not the submission: the files check fails
    ok = cli("audit", str(run), "--secret", str(real_run.secret), "--submission", str(moved))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.strip().splitlines()[-1].startswith("audit OK")
    # the library says the same as a failed check, never an exception
    from ale_robotics.audit import audit_run, read_secret

    report = audit_run(run, read_secret(real_run.secret), workers=1)
    failed = {c.name: c.detail for c in report.checks if not c.ok}
    assert "submission files" in failed and "is not a directory" in failed["submission files"]
