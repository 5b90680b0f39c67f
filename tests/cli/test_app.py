"""What every command shares (cli/app.py): help that renders, with no placeholder on flags."""

from __future__ import annotations

import re

import typer
from typer.testing import CliRunner

from ale_robotics.cli.main import app
from ale_robotics.tasks.registry import default_registry

runner = CliRunner(env={"COLUMNS": "80"})


def _command_paths(command: object, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and group under ``command``, as argument paths (the root is ())."""
    paths = [prefix]
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        paths.extend(_command_paths(sub, (*prefix, name)))
    return paths


def test_every_help_renders_and_flags_have_no_value_placeholder() -> None:
    paths = _command_paths(typer.main.get_command(app))
    names = {" ".join(p) for p in paths}
    # run and evaluator come from modules of their own: the fix must reach them too
    assert {"run", "evaluator serve", "submit", "audit", "check-submission"} <= names
    for path in paths:
        result = runner.invoke(app, [*path, "--help"])
        shown = " ".join(path) or "(root)"
        assert result.exit_code == 0, (shown, result.output, result.exception)
        assert "Usage:" in result.stdout, shown
        assert "<bool>" not in result.stdout, (shown, result.stdout)
        # a flag's row shows its name and help, no type
        for line in result.stdout.splitlines():
            if re.search(r"--help\b", line):
                assert "Show this message" in line and "<" not in line, (shown, line)


def test_every_help_reads_at_80_columns_with_current_task_versions() -> None:
    """No line past 80 columns, no default or choice cut with an ellipsis, and every task
    id an example names is a task of the bundled release that no newer version supersedes."""
    registry = default_registry()
    paths = _command_paths(typer.main.get_command(app))
    for path in paths:
        result = runner.invoke(app, [*path, "--help"])
        shown = " ".join(path) or "(root)"
        lines = result.stdout.splitlines()
        too_long = [line for line in lines if len(line) > 80]
        assert not too_long, (shown, too_long)
        assert "\u2026" not in result.stdout, (shown, result.stdout)  # rich cuts with it
        for task_id in set(re.findall(r"\b[a-z0-9]+(?:-[a-z0-9]+)*-v\d+\b", result.stdout)):
            assert task_id in registry.ids(), (shown, task_id)
            assert registry.superseded_by(task_id) is None, (shown, task_id)


def test_audit_help_shows_its_docstring_and_plain_metavars() -> None:
    # the docstring quotes agent-controlled text; it must not be parsed as markup
    result = runner.invoke(app, ["audit", "--help"])
    assert result.exit_code == 0, result.exception
    assert "RUN_DIR" in result.stdout
    for metavar in ("FILE", "DIR", "KEY"):
        assert re.search(rf"--\S+\s+{metavar}\b", result.stdout), (metavar, result.stdout)
    assert "Exit codes" in result.stdout


def test_run_help_has_an_example_and_the_exit_codes() -> None:
    result = runner.invoke(app, ["run", "--help"])
    assert result.exit_code == 0, result.exception
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert any(line.strip() == "Examples:" for line in lines)
    assert any("ale-robotics run td3-inverted-pendulum-v2" in line for line in lines), result.stdout
    text = " ".join(line.strip() for line in lines)
    assert "130 or 143 interrupted" in text and "2 a usage error" in text
