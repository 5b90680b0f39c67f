"""Strict YAML says where (issue 48.5): a rejection's line and column, and every value's place."""

from __future__ import annotations

from pathlib import Path

import pytest

from ale_robotics.submission.rejected import SubmissionRejected
from ale_robotics.submission.yaml_strict import load_yaml_positions, load_yaml_strict


def _rejected(tmp_path: Path, text: str) -> SubmissionRejected:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(SubmissionRejected) as caught:
        load_yaml_strict(path, "config.yaml", 10_000)
    return caught.value


def test_a_syntax_error_names_its_line_and_column_in_one_line(tmp_path: Path) -> None:
    exc = _rejected(tmp_path, "a: 1\nb: [1, 2\nc: 3\n")
    assert (exc.line, exc.column, exc.rule) == (3, 2, "yaml format")
    assert str(exc) == (
        "config.yaml: line 3, column 2: expected ',' or ']', but got ':' (while parsing a flow "
        "sequence started at line 2, column 4) (rule: yaml format)"
    )


def test_a_duplicate_key_names_the_second_one(tmp_path: Path) -> None:
    exc = _rejected(tmp_path, "a: 1\nb:\n  x: 1\n  x: 2\n")
    assert (exc.line, exc.column, exc.rule) == (4, 3, "yaml duplicate keys")


def test_every_value_has_its_place(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("name: x\nagents:\n  - {label: a, cmd: b}\n  - label: c\n")
    data, where = load_yaml_positions(path, "spec.yaml", 10_000)
    assert data == {"name": "x", "agents": [{"label": "a", "cmd": "b"}, {"label": "c"}]}
    assert where[()] == ((1, 1), (1, 1))
    assert where[("name",)] == ((1, 1), (1, 7))
    assert where[("agents", 0, "cmd")] == ((3, 16), (3, 21))
    assert where[("agents", 1, "label")] == ((4, 5), (4, 12))
