"""``trajectory verify`` and ``trajectory show`` through Typer's test runner."""

from __future__ import annotations

from pathlib import Path

from trajectory_helpers import N_EVENTS, flip_signature, read_records, rehash, write_records
from typer.testing import CliRunner

from ale_robotics.cli.trajectory import app
from ale_robotics.trajectory import EvaluatorSigner

runner = CliRunner(env={"COLUMNS": "200"})


def _forge_result(path: Path) -> None:
    """Rewrite the evaluator's result signature and recompute the chain (event 10)."""
    records = read_records(path)
    records[10]["sig"]["value"] = flip_signature(records[10]["sig"]["value"])
    write_records(path, rehash(records))


def test_verify_ok(standard_run: Path, signer: EvaluatorSigner) -> None:
    result = runner.invoke(
        app, ["verify", str(standard_run), "--public-key", signer.public_key_hex]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"OK: {N_EVENTS} events, chain and signatures verify"


def test_verify_ok_without_pinned_key_says_so(standard_run: Path) -> None:
    result = runner.invoke(app, ["verify", str(standard_run)])
    assert result.exit_code == 0
    assert "OK: 12 events" in result.stdout
    assert "--public-key to pin it" in result.stderr


def test_verify_with_key_files(standard_run: Path, signer: EvaluatorSigner, tmp_path: Path) -> None:
    pem = tmp_path / "evaluator.pub.pem"
    pem.write_bytes(signer.public_key_pem())
    hex_file = tmp_path / "evaluator.hex"
    hex_file.write_text(signer.public_key_hex)
    for key in (pem, hex_file):
        result = runner.invoke(app, ["verify", str(standard_run), "--public-key", str(key)])
        assert result.exit_code == 0, result.output


def test_verify_fails_naming_the_event(standard_run: Path) -> None:
    _forge_result(standard_run)
    result = runner.invoke(app, ["verify", str(standard_run)])
    assert result.exit_code == 1
    assert result.stdout.startswith("FAIL at event 10: bad signature")


def test_verify_fails_on_another_key(standard_run: Path, other_signer: EvaluatorSigner) -> None:
    result = runner.invoke(
        app, ["verify", str(standard_run), "--public-key", other_signer.public_key_hex]
    )
    assert result.exit_code == 1
    assert result.stdout.startswith("FAIL at event 2: the published evaluator key")


def test_verify_head_and_run_id(standard_run: Path) -> None:
    head = read_records(standard_run)[-1]["hash"]
    ok = runner.invoke(
        app, ["verify", str(standard_run), "--head", head, "--run-id", "run-test-0001"]
    )
    assert ok.exit_code == 0, ok.output
    wrong_head = runner.invoke(app, ["verify", str(standard_run), "--head", "0" * 64])
    assert wrong_head.exit_code == 1
    assert "FAIL at event 12:" in wrong_head.stdout
    wrong_run = runner.invoke(app, ["verify", str(standard_run), "--run-id", "run-x"])
    assert wrong_run.exit_code == 1
    assert "FAIL at event 0: run_id" in wrong_run.stdout


def test_usage_errors_exit_2(standard_run: Path, tmp_path: Path) -> None:
    bad_key = runner.invoke(app, ["verify", str(standard_run), "--public-key", "nope"])
    assert bad_key.exit_code == 2
    assert "--public-key" in bad_key.output
    missing = runner.invoke(app, ["verify", str(tmp_path / "absent.jsonl")])
    assert missing.exit_code == 2


def test_show_prints_every_event(standard_run: Path) -> None:
    result = runner.invoke(app, ["show", str(standard_run)])
    assert result.exit_code == 0, result.output
    for kind in ("run_started", "evaluator_key", "seed_commitment", "note", "result", "score"):
        assert kind in result.stdout
    assert result.stdout.count("✓") == 7  # the seven evaluator events
    assert "✗" not in result.stdout
    assert "OK: 12 events" in result.stdout


def test_show_marks_a_forged_event(standard_run: Path) -> None:
    _forge_result(standard_run)
    result = runner.invoke(app, ["show", str(standard_run)])
    assert result.exit_code == 1
    assert result.stdout.count("✓") == 6
    assert result.stdout.count("✗") == 1
    assert "FAIL at event 10" in result.stdout


def test_show_does_not_interpret_agent_markup(standard_run: Path, signer: EvaluatorSigner) -> None:
    from ale_robotics.trajectory import TrajectoryWriter

    TrajectoryWriter(standard_run, "run-test-0001").append(
        "agent", "note", {"t": "[bold red]FAKE ✓[/] \x1b[2J \x9b"}
    )
    result = runner.invoke(app, ["show", str(standard_run)])
    assert result.exit_code == 0
    assert "[bold red]FAKE" in result.stdout
    assert "\x1b[2J" not in result.stdout and "\x9b" not in result.stdout


def test_show_reports_a_torn_line(standard_run: Path) -> None:
    standard_run.write_bytes(standard_run.read_bytes() + b'{"v":1,"se')
    result = runner.invoke(app, ["show", str(standard_run)])
    assert result.exit_code == 1
    assert "torn last line" in result.stdout
