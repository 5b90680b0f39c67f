"""The artifact of the ``isaaclab`` kind: RSL-RL's checkpoint, checked in the evaluator.

No engine needed: the checkpoint is read with the evaluator's own torch
(``weights_only=True``), like every torch contract. Each rule is shown to refuse a file
that breaks it, with the rule named.
"""

from __future__ import annotations

import itertools
import pickle
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from ale_robotics.model.kind_registry import get_kind
from ale_robotics.model.snapshot import SnapshotFile
from ale_robotics.submission.rejected import SubmissionRejected
from ale_robotics.tasks import TaskSpec, default_registry
from ale_robotics.tasks.contract import FileFormat

TASK = "isaaclab-cartpole-direct-v1"
SHIPPED = (
    Path(__file__).resolve().parents[3]
    / "examples/agents/checkpoints/isaaclab-cartpole-direct-v1/model.pt"
)


def _task() -> TaskSpec:
    return default_registry().get(TASK)


def _mlp(sizes: list[int], gen: torch.Generator) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        out[f"mlp.{2 * i}.weight"] = torch.randn(b, a, generator=gen)
        out[f"mlp.{2 * i}.bias"] = torch.randn(b, generator=gen)
    return out


def checkpoint(**actor_changes: Any) -> dict[str, Any]:
    """What RSL-RL 5's OnPolicyRunner.save writes for the cartpole's runner config."""
    gen = torch.Generator().manual_seed(0)
    actor: dict[str, Any] = {"distribution.std_param": torch.ones(1), **_mlp([4, 32, 32, 1], gen)}
    critic = _mlp([4, 32, 32, 1], gen)
    params = [torch.nn.Parameter(v.clone()) for v in [*actor.values(), *critic.values()]]
    opt = torch.optim.Adam(params, lr=1e-3)
    sum(p.sum() for p in params).backward()
    opt.step()
    for key, value in actor_changes.items():
        if value is None:
            actor.pop(key)
        else:
            actor[key] = value
    return {
        "actor_state_dict": actor,
        "critic_state_dict": critic,
        "optimizer_state_dict": opt.state_dict(),
        "iter": 150,
        "infos": None,
    }


def _load(path: Path) -> dict[str, np.ndarray]:
    file = SnapshotFile("policy", "model.pt", FileFormat.TORCH_STATE_DICT, path, "")
    return get_kind("isaaclab").load_artifact([file], _task())


def _saved(tmp_path: Path, obj: Any) -> Path:
    path = tmp_path / "model.pt"
    torch.save(obj, path)
    return path


def test_the_actor_of_an_rsl_rl_checkpoint_is_the_artifact(tmp_path: Path) -> None:
    ckpt = checkpoint()
    art = _load(_saved(tmp_path, ckpt))
    assert set(art) == {t.key for t in _task().contract.tensors}  # type: ignore[union-attr]
    for key, value in ckpt["actor_state_dict"].items():
        assert art[key].dtype == np.float32
        np.testing.assert_array_equal(art[key], value.numpy())


def test_the_shipped_checkpoint_is_valid() -> None:
    art = _load(SHIPPED)
    assert art["mlp.0.weight"].shape == (32, 4) and np.isfinite(art["mlp.4.weight"]).all()


@pytest.mark.parametrize(
    ("obj", "rule"),
    [
        ({"model_state_dict": {}}, "RSL-RL checkpoint"),
        ([1, 2], "RSL-RL checkpoint"),
        (checkpoint(**{"distribution.std_param": None}), "missing"),
        (checkpoint(**{"obs_normalizer._mean": torch.zeros(4)}), "unexpected"),
        (checkpoint(**{"mlp.0.weight": torch.zeros(64, 4)}), "tensor shape"),
        (checkpoint(**{"mlp.0.weight": torch.zeros(32, 4, dtype=torch.float64)}), "tensor dtype"),
        (checkpoint(**{"mlp.2.bias": torch.full((32,), float("nan"))}), "finite values"),
        (checkpoint(**{"mlp.2.bias": torch.zeros(32, dtype=torch.int64)}), "tensor dtype"),
        (checkpoint(**{"mlp.2.bias": "a string"}), "state dict"),
    ],
)
def test_checkpoints_breaking_a_rule_are_rejected(tmp_path: Path, obj: Any, rule: str) -> None:
    with pytest.raises(SubmissionRejected, match=rule):
        _load(_saved(tmp_path, obj))


class _Payload:
    def __reduce__(self) -> tuple[Any, ...]:
        return (print, ("this would run",))


def test_a_pickle_payload_never_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "model.pt"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("archive/data.pkl", pickle.dumps({"actor_state_dict": _Payload()}))
        zf.writestr("archive/version", "3\n")
    with pytest.raises(SubmissionRejected, match="weights_only torch load"):
        _load(path)
    assert "this would run" not in capsys.readouterr().out


def test_a_compressed_member_is_refused_before_loading(tmp_path: Path) -> None:
    path = _saved(tmp_path, checkpoint())
    squeezed = tmp_path / "squeezed.pt"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(squeezed, "w") as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info), compress_type=zipfile.ZIP_DEFLATED)
    with pytest.raises(SubmissionRejected, match="no compression"):
        _load(squeezed)


def test_the_null_artifact_is_the_zero_actor() -> None:
    null = get_kind("isaaclab").null_artifact(_task())
    assert null is not None and set(null) == set(_load(SHIPPED))
    assert all(not v.any() for v in null.values())
