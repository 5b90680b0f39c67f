"""The README's ``ale-robotics`` commands exist as written.

Every command line in the README's code blocks and inline code names a real (sub)command, and
every ``--flag`` it uses is one that command takes, so a renamed or removed
option cannot leave the README telling users to type something that fails.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
CLI = [sys.executable, "-m", "ale_robotics"]


def _commands() -> list[str]:
    text = README.read_text(encoding="utf-8")
    lines: list[str] = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            line = line.strip()
            for prefix in (".venv/bin/ale-robotics ", "ale-robotics "):
                if line.startswith(prefix):
                    lines.append("ale-robotics " + line[len(prefix) :])
    prose = re.sub(r"```.*?```", "", text, flags=re.S).replace("\n", " ")
    for span in re.findall(r"`(?:\.venv/bin/)?(ale-robotics [^`]+)`", prose):
        lines.append(span)
    return list(dict.fromkeys(lines))


@cache
def _help(path: tuple[str, ...]) -> str:
    r = subprocess.run(
        [*CLI, *path, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 0, f"ale-robotics {' '.join(path)} --help: {r.stderr}"
    return r.stdout


def _command_path(words: list[str]) -> tuple[str, ...]:
    """The longest prefix of ``words`` that is a command group chain."""
    path: list[str] = []
    for word in words:
        if word.startswith("-") or not re.fullmatch(r"[a-z][a-z-]*", word):
            break
        listing = _help(tuple(path))
        if not re.search(rf"^\W*{re.escape(word)}\s", listing, flags=re.M):
            break
        path.append(word)
    return tuple(path)


COMMANDS = _commands()


def test_the_readme_has_commands() -> None:
    assert len(COMMANDS) >= 8


@pytest.mark.parametrize("line", COMMANDS)
def test_readme_command_and_flags_exist(line: str) -> None:
    words = shlex.split(line.replace("[", " ").replace("]", " ").replace("|", " "))[1:]
    path = _command_path(words)
    assert path, f"{line!r}: no such command"
    shown = _help(path)
    for flag in {w.split("=")[0] for w in words if w.startswith("--")}:
        assert re.search(rf"{re.escape(flag)}\b", shown), (
            f"README: {line!r} uses {flag}, which 'ale-robotics {' '.join(path)}' does not take"
        )
