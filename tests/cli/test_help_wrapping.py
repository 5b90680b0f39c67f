"""Issue 48.11: every ``--help`` at 80 columns is wrapped by the renderer, and every
example in it is one command a user can paste.

Typer's rich help keeps the line breaks a docstring has in its source after its first
paragraph, so a paragraph broke wherever the source did ('rebuilt if' / 'deleted' /
'or stale)'); and ``run --help``'s examples went on to a second line without a ``\\``,
so their first line alone was another command (``ale-robotics run TASK`` without its
``--agent``). Both are checked on the rendered text of every command's help.
"""

from __future__ import annotations

import itertools
import shlex

import typer
from typer._click.core import Context
from typer._click.exceptions import UsageError
from typer.testing import CliRunner

from ale_robotics.cli.main import app

WIDTH = 80
runner = CliRunner(env={"COLUMNS": str(WIDTH)})
TEXT_WIDTH = WIDTH - 2
"""Rich pads the help's text with a column on each side."""


def _command_paths(command: object, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix]
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        paths.extend(_command_paths(sub, (*prefix, name)))
    return paths


def _helps() -> dict[str, list[str]]:
    """Each command's --help at 80 columns: its lines outside the panels (the prose)."""
    helps = {}
    for path in _command_paths(typer.main.get_command(app)):
        result = runner.invoke(app, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        prose, in_panel = [], False
        for line in result.stdout.splitlines():
            if line.startswith("╭"):
                in_panel = True
            if not in_panel and not line.lstrip().startswith("Usage:"):
                prose.append(line.rstrip())
            if line.startswith("╰"):
                in_panel = False
        helps[" ".join(path) or "(root)"] = prose
    return helps


def _paragraphs(lines: list[str]) -> list[list[str]]:
    """Runs of non-blank lines, each line without rich's one-column left pad."""
    paragraphs: list[list[str]] = [[]]
    for line in lines:
        if line.strip():
            paragraphs[-1].append(line[1:])
        elif paragraphs[-1]:
            paragraphs.append([])
    return [p for p in paragraphs if p]


def _verbatim(line: str) -> bool:
    """A line the help keeps as written (an example, a YAML block): indented."""
    return line[:1].isspace()


def test_every_help_paragraph_is_filled_to_the_width() -> None:
    """Inside a paragraph, a line ends only where the next word would not fit: what a
    renderer wrapping the paragraph does, and what a break kept from the source is not."""
    breaks = []
    for shown, lines in _helps().items():
        for paragraph in _paragraphs(lines):
            for line, after in itertools.pairwise(paragraph):
                if _verbatim(line) or _verbatim(after):
                    continue
                if len(line) + 1 + len(after.split()[0]) <= TEXT_WIDTH:
                    breaks.append(f"{shown}: {line!r} / {after!r}")
    assert not breaks, "\n".join(breaks)


def _examples(lines: list[str]) -> tuple[list[str], list[str]]:
    """The example commands of a help (lines joined where one ends with a backslash) and
    the indented lines that look like the rest of a command no line continues."""
    commands: list[str] = []
    orphans: list[str] = []
    continued = False
    for raw in lines:
        line = raw[1:] if raw.startswith(" ") else raw
        text = line.strip()
        if not _verbatim(line) or not text:
            continued = False
            continue
        if continued:
            commands[-1] += " " + text.removesuffix("\\").strip()
        elif text.startswith("ale-robotics "):
            commands.append(text.removesuffix("\\").strip())
        elif text.startswith("--"):  # an option on a line of its own: a command's rest
            orphans.append(text)
        continued = text.endswith("\\")
    return commands, orphans


def _parse(command: str) -> None:
    """Parse ``command`` as the command line would, without running it (a missing
    required option, an unknown one or a bad value raises UsageError)."""
    name, *args = shlex.split(command)
    assert name == "ale-robotics", command
    cmd = typer.main.get_command(app)
    while getattr(cmd, "commands", None):  # a group: the next word names its command
        name, *args = args
        cmd = cmd.commands[name]  # type: ignore[attr-defined]
    cmd.make_context(name, args, parent=Context(cmd))


def test_every_example_is_one_command_that_parses() -> None:
    found = 0
    for shown, lines in _helps().items():
        commands, orphans = _examples(lines)
        assert not orphans, (shown, "an example's line that no '\\' continues", orphans)
        for command in commands:
            _parse(command)
            found += 1
    assert found >= 5  # run --help's examples at least


def test_the_example_checker_refuses_a_first_line_that_is_not_the_command() -> None:
    """The check above can fail: run's examples as they were (no backslash)."""
    before = [
        " Examples:",
        "",
        "   ale-robotics run td3-inverted-pendulum-v2",
        '   --agent "python examples/agents/submit_checkpoint.py"',
    ]
    commands, orphans = _examples(before)
    assert orphans == ['--agent "python examples/agents/submit_checkpoint.py"']
    try:
        _parse(commands[0])
    except UsageError as exc:
        assert "agent" in str(exc)  # the missing --agent
    else:
        raise AssertionError("ale-robotics run TASK without --agent parsed")
    after = [
        "   ale-robotics run td3-inverted-pendulum-v2 \\",
        '     --agent "python examples/agents/submit_checkpoint.py"',
    ]
    commands, orphans = _examples(after)
    assert orphans == [] and len(commands) == 1
    _parse(commands[0])
