"""Validate a frozen submission against its contract, without running any agent code.

Torch files are read only through ``torch.load(weights_only=True)`` (the
restricted unpickler: no arbitrary globals, so a pickle payload raises instead of
running), after a look at the zip directory that refuses compressed or oversized
members (a zip bomb would otherwise be inflated by the loader). A torch tensor
can also be a view that is far larger than the bytes behind it (``expand`` gives
stride 0; many keys can share one storage), so the tensors' total size is checked
against the contract before anything is materialized. Safetensors files are
parsed by the safetensors library, which has no code path at all. YAML goes
through :func:`load_yaml_strict`: the safe loader plus limits on size, nesting,
aliases and expanded size (a "billion laughs" document is a few hundred bytes).

Every parser here reads attacker-controlled bytes, so any exception it raises is
the file's fault and becomes a :class:`SubmissionRejected` naming the file and
the rule; only ``MemoryError`` is left to the caller (an infrastructure failure).
Messages quote agent-chosen text (tensor keys) only through :func:`_key`, which
bounds its length.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ale_robotics.model.snapshot import SnapshotFile
from ale_robotics.submission.mismatch import check_key_set
from ale_robotics.submission.rejected import SubmissionRejected
from ale_robotics.submission.rejected import first_line as _first_line
from ale_robotics.submission.rejected import quote_key as _key
from ale_robotics.submission.yaml_strict import (
    YAML_MAX_ALIASES,
    YAML_MAX_DEPTH,
    YAML_MAX_NODES,
    load_yaml_strict,
)
from ale_robotics.tasks.contract import FileFormat, SubmissionContract, TensorRule

__all__ = [
    "YAML_MAX_ALIASES",
    "YAML_MAX_DEPTH",
    "YAML_MAX_NODES",
    "Weights",
    "load_weights",
    "load_yaml_strict",
    "validate_tensors",
]

Weights = dict[str, npt.NDArray[np.floating]]

_MAX_KEYS = 4096
"""More tensors than any contract could name; refused before looking at them."""


def _load_safetensors(path: Path, shown: str) -> dict[str, npt.NDArray[np.generic]]:
    from safetensors import safe_open

    try:
        out: dict[str, npt.NDArray[np.generic]] = {}
        with safe_open(str(path), framework="numpy") as f:
            keys = list(f.keys())
            if len(keys) > _MAX_KEYS:
                raise SubmissionRejected(
                    shown, "no extra keys", f"holds {len(keys)} tensors; at most {_MAX_KEYS}"
                )
            for key in keys:
                out[key] = f.get_tensor(key)
        return out
    except SubmissionRejected:
        raise
    except MemoryError:
        raise
    except Exception as exc:
        # SafetensorError for a bad header; TypeError/AttributeError for dtypes numpy
        # lacks (bf16, float8); whatever else the parser raises is still the file's fault.
        raise SubmissionRejected(
            shown, "safetensors format", f"cannot be parsed: {_first_line(exc)}"
        ) from None


def _check_zip(path: Path, shown: str, max_bytes: int) -> None:
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except MemoryError:
        raise
    except Exception as exc:
        raise SubmissionRejected(
            shown,
            "torch state dict format",
            f"is not a torch.save zip archive ({_first_line(exc)}); "
            "save with torch.save(state_dict, path)",
        ) from None
    total = 0
    for info in infos:
        if info.compress_type != zipfile.ZIP_STORED:
            raise SubmissionRejected(
                shown,
                "no compression",
                f"member {_key(info.filename)} is compressed; torch.save "
                "never compresses, so this file was not written by it",
            )
        total += info.file_size
    if total > max_bytes:
        raise SubmissionRejected(
            shown, "size limit", f"unpacks to {total} bytes; the contract allows {max_bytes}"
        )


def _load_torch(path: Path, shown: str, max_bytes: int) -> dict[str, npt.NDArray[np.generic]]:
    _check_zip(path, shown, max_bytes)
    import torch

    try:
        obj = torch.load(path, map_location="cpu", weights_only=True, mmap=False)
    except MemoryError:
        raise
    except Exception as exc:
        raise SubmissionRejected(
            shown, "weights_only torch load", f"refused by the safe loader: {_first_line(exc)}"
        ) from None
    if not isinstance(obj, dict):
        raise SubmissionRejected(
            shown, "state dict", f"holds a {type(obj).__name__}, not a dict of tensors"
        )
    return state_dict_arrays(obj, shown, max_bytes)


def state_dict_arrays(
    obj: dict[Any, Any], shown: str, max_bytes: int
) -> dict[str, npt.NDArray[np.generic]]:
    """A loaded torch state dict's tensors as numpy arrays, once each is checked: string keys,
    dense float tensors, at most ``max_bytes`` of values in all (stride-0 views and shared
    storage hold more values than the file had bytes). Shared by every torch contract (the
    RSL-RL checkpoint's actor, :mod:`.isaaclab.checkpoint`, included)."""
    import torch

    if len(obj) > _MAX_KEYS:
        raise SubmissionRejected(
            shown, "no extra keys", f"holds {len(obj)} entries; at most {_MAX_KEYS}"
        )
    logical = 0
    for key, value in obj.items():
        if not isinstance(key, str):
            raise SubmissionRejected(shown, "state dict", f"has a non-string key {_key(key)}")
        if not isinstance(value, torch.Tensor) or value.layout != torch.strided:
            raise SubmissionRejected(
                shown,
                "state dict",
                f"key {_key(key)} is a {type(value).__name__}, not a dense tensor",
            )
        if value.dtype not in (torch.float32, torch.float64):
            raise SubmissionRejected(
                shown, "tensor dtype", f"key {_key(key)} has dtype {value.dtype}; expected float32"
            )
        logical += value.numel() * value.element_size()
    if logical > max_bytes:
        # torch.save stores whole storages, so honest tensors never hold more values
        # than the file has bytes; more means stride-0 views or shared storage.
        raise SubmissionRejected(
            shown,
            "size limit",
            f"its tensors hold {logical} bytes of values but the contract allows {max_bytes} "
            "(expanded views or shared storage)",
        )
    return {k: v.detach().contiguous().numpy().copy() for k, v in obj.items()}


def validate_tensors(
    tensors: dict[str, npt.NDArray[np.generic]], rules: list[TensorRule], shown: str
) -> Weights:
    """Exact key set, shapes, dtypes, finiteness; returns the arrays in the rules' dtypes."""
    expected = {r.key: r for r in rules}
    check_key_set(tensors.keys(), list(expected), shown)  # missing and unexpected, together
    out: Weights = {}
    for key, rule in expected.items():
        arr = tensors[key]
        if list(arr.shape) != rule.shape:
            raise SubmissionRejected(
                shown,
                "tensor shape",
                f"key {key!r} has shape {list(arr.shape)}; the contract requires {rule.shape}",
            )
        if arr.dtype.name != rule.dtype:
            raise SubmissionRejected(
                shown,
                "tensor dtype",
                f"key {key!r} has dtype {arr.dtype.name}; expected {rule.dtype}",
            )
        if not np.isfinite(arr).all():
            raise SubmissionRejected(shown, "finite values", f"key {key!r} contains NaN or inf")
        out[key] = np.ascontiguousarray(arr)
    return out


def load_weights(files: list[SnapshotFile], contract: SubmissionContract) -> Weights:
    """Load and validate the policy weights of a snapshot."""
    policy = next((f for f in files if f.role == "policy"), None)
    if policy is None:
        raise SubmissionRejected("policy", "required file", "no policy file in the submission")
    max_bytes = contract.file_for_role("policy").max_bytes
    if policy.format is FileFormat.SAFETENSORS:
        tensors = _load_safetensors(policy.path, policy.name)
    elif policy.format is FileFormat.TORCH_STATE_DICT:
        tensors = _load_torch(policy.path, policy.name, max_bytes)
    else:
        raise SubmissionRejected(policy.name, "format", f"{policy.format} is not a weights format")
    return validate_tensors(tensors, contract.tensors, policy.name)
