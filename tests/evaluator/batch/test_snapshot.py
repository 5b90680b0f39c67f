from __future__ import annotations

import os
from pathlib import Path

import pytest

from ale_robotics.evaluator.batch.snapshot import snapshot_submission
from ale_robotics.submission.rejected import SubmissionRejected
from ale_robotics.tasks import TaskSpec


@pytest.fixture
def volume(tmp_path: Path) -> Path:
    v = tmp_path / "vol"
    v.mkdir()
    return v


def _snap(volume: Path, task: TaskSpec, rel: str = "") -> list:
    assert task.contract is not None
    return snapshot_submission(volume, rel, task.contract, volume.parent / "snap")


def test_copies_and_hashes(volume: Path, task: TaskSpec) -> None:
    (volume / "policy.pt").write_bytes(b"abc")
    (volume / "notes.txt").write_bytes(b"ignored")
    (f,) = _snap(volume, task)
    assert f.name == "policy.pt" and f.role == "policy"
    assert f.sha256 == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert f.path.read_bytes() == b"abc"
    assert not (volume.parent / "snap" / "notes.txt").exists()
    (volume / "policy.pt").write_bytes(b"changed later")
    assert f.path.read_bytes() == b"abc"


@pytest.mark.parametrize(
    ("setup", "rule"),
    [
        (lambda v: None, "required file"),
        (lambda v: (v / "policy.pt").write_bytes(b""), "non-empty"),
        (lambda v: (v / "policy.pt").write_bytes(b"x" * (4 * 1024 * 1024 + 1)), "size limit"),
        (
            lambda v: (
                (v / "policy.pt").write_bytes(b"a"),
                (v / "policy.safetensors").write_bytes(b"b"),
            ),
            "one file per role",
        ),
        (lambda v: os.symlink("/etc/passwd", v / "policy.pt"), "no symlinks"),
        (
            lambda v: (
                (v.parent / "outside").write_bytes(b"s"),
                os.link(v.parent / "outside", v / "policy.pt"),
            ),
            "no hard links",
        ),
        (lambda v: os.mkfifo(v / "policy.pt"), "regular file"),
    ],
    ids=["missing", "empty", "oversized", "two-files", "symlink", "hardlink", "fifo"],
)
def test_rejections_name_file_and_rule(volume: Path, task: TaskSpec, setup, rule: str) -> None:
    setup(volume)
    with pytest.raises(SubmissionRejected) as info:
        _snap(volume, task)
    assert info.value.rule == rule
    assert "policy" in str(info.value)


@pytest.mark.parametrize(
    ("rel", "rule"),
    [
        ("../", "path"),
        ("/etc", "path"),
        ("sub/../../x", "path"),
        ("nope", "path"),
        ("a\x00b", "path"),
    ],
)
def test_paths_outside_the_volume_are_rejected(
    volume: Path, task: TaskSpec, rel: str, rule: str
) -> None:
    with pytest.raises(SubmissionRejected) as info:
        _snap(volume, task, rel)
    assert info.value.rule == rule


def test_symlinked_directory_is_rejected(volume: Path, task: TaskSpec, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "policy.pt").write_bytes(b"x")
    os.symlink(elsewhere, volume / "sub")
    with pytest.raises(SubmissionRejected) as info:
        _snap(volume, task, "sub")
    assert info.value.rule == "no symlinks"


def test_subdirectory_submission(volume: Path, task: TaskSpec) -> None:
    (volume / "try2").mkdir()
    (volume / "try2" / "policy.safetensors").write_bytes(b"x")
    (f,) = _snap(volume, task, "try2")
    assert f.name == "policy.safetensors"
