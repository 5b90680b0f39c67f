from __future__ import annotations

import io
import os
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import random_weights
from safetensors.numpy import save_file

from ale_robotics.model.snapshot import SnapshotFile
from ale_robotics.rollouts.weights import load_weights
from ale_robotics.submission.rejected import SubmissionRejected
from ale_robotics.tasks import FileFormat, TaskSpec


def _load(task: TaskSpec, path: Path, fmt: FileFormat):
    assert task.contract is not None
    return load_weights([SnapshotFile("policy", path.name, fmt, path, "")], task.contract)


def _torch_file(path: Path, sd: dict) -> Path:
    torch.save({k: torch.from_numpy(np.asarray(v)) for k, v in sd.items()}, path)
    return path


def test_safetensors_and_torch_load_to_the_same_arrays(tmp_path: Path, task: TaskSpec) -> None:
    w = random_weights(task)
    save_file(w, str(tmp_path / "policy.safetensors"))
    a = _load(task, tmp_path / "policy.safetensors", FileFormat.SAFETENSORS)
    b = _load(task, _torch_file(tmp_path / "policy.pt", w), FileFormat.TORCH_STATE_DICT)
    for k in w:
        assert np.array_equal(a[k], w[k]) and np.array_equal(b[k], w[k])


@pytest.mark.parametrize(
    ("mutate", "rule", "needle"),
    [
        (lambda w: w.pop("l2.bias"), "required keys", "l2.bias"),
        (lambda w: w.update(extra=np.zeros(1, np.float32)), "no extra keys", "extra"),
        (
            lambda w: w.update({"l1.weight": np.zeros((400, 5), np.float32)}),
            "tensor shape",
            "l1.weight",
        ),
        (lambda w: w.update({"l3.bias": np.zeros(1, np.float64)}), "tensor dtype", "l3.bias"),
        (lambda w: w["l2.weight"].__setitem__((3, 3), np.nan), "finite values", "l2.weight"),
        (lambda w: w["l1.bias"].__setitem__(0, np.inf), "finite values", "l1.bias"),
    ],
    ids=["missing-key", "extra-key", "shape", "dtype", "nan", "inf"],
)
@pytest.mark.parametrize("fmt", [FileFormat.SAFETENSORS, FileFormat.TORCH_STATE_DICT])
def test_contract_violations(tmp_path: Path, task: TaskSpec, mutate, rule, needle, fmt) -> None:
    w = random_weights(task)
    mutate(w)
    if fmt is FileFormat.SAFETENSORS:
        path = tmp_path / "policy.safetensors"
        save_file(w, str(path))
    else:
        path = _torch_file(tmp_path / "policy.pt", w)
    with pytest.raises(SubmissionRejected) as info:
        _load(task, path, fmt)
    assert info.value.rule == rule
    assert needle in str(info.value) and path.name in str(info.value)


class _Payload:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_pickle_payload_never_runs(tmp_path: Path, task: TaskSpec) -> None:
    marker = tmp_path / "PWNED"
    path = tmp_path / "policy.pt"
    torch.save({"l1.weight": _Payload(str(marker))}, path)
    with pytest.raises(SubmissionRejected) as info:
        _load(task, path, FileFormat.TORCH_STATE_DICT)
    assert info.value.rule == "weights_only torch load"
    assert not marker.exists()


def test_plain_pickle_is_not_a_torch_file(tmp_path: Path, task: TaskSpec) -> None:
    path = tmp_path / "policy.pt"
    path.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(SubmissionRejected, match=r"not a torch\.save zip"):
        _load(task, path, FileFormat.TORCH_STATE_DICT)


def test_compressed_zip_is_refused_before_loading(tmp_path: Path, task: TaskSpec) -> None:
    path = tmp_path / "policy.pt"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("archive/data.pkl", b"\x00" * 10_000_000)
    with pytest.raises(SubmissionRejected) as info:
        _load(task, path, FileFormat.TORCH_STATE_DICT)
    assert info.value.rule == "no compression"


def test_truncated_safetensors(tmp_path: Path, task: TaskSpec) -> None:
    path = tmp_path / "policy.safetensors"
    buf = io.BytesIO()
    save_file(random_weights(task), str(path))
    data = path.read_bytes()
    buf.write(data[: len(data) // 2])
    path.write_bytes(buf.getvalue())
    with pytest.raises(SubmissionRejected) as info:
        _load(task, path, FileFormat.SAFETENSORS)
    assert info.value.rule == "safetensors format"


def test_not_a_dict(tmp_path: Path, task: TaskSpec) -> None:
    path = tmp_path / "policy.pt"
    torch.save([torch.zeros(1)], path)
    with pytest.raises(SubmissionRejected, match="not a dict of tensors"):
        _load(task, path, FileFormat.TORCH_STATE_DICT)
