"""Validate a frozen submission against its contract, without running any agent code.

Torch files are read only through ``torch.load(weights_only=True)`` (the
restricted unpickler: no arbitrary globals, so a pickle payload raises instead of
running), after a look at the zip directory that refuses compressed or oversized
members (a zip bomb would otherwise be inflated by the loader). Safetensors files
are parsed by the safetensors library, which has no code path at all.
"""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ale_robotics.evaluator.snapshot import SnapshotFile, SubmissionRejected
from ale_robotics.tasks.spec import FileFormat, SubmissionContract, TensorRule

__all__ = ["Weights", "load_weights", "validate_tensors"]

Weights = dict[str, npt.NDArray[np.floating]]


def _load_safetensors(path: Path, shown: str) -> dict[str, npt.NDArray[np.generic]]:
    from safetensors import SafetensorError, safe_open

    try:
        out: dict[str, npt.NDArray[np.generic]] = {}
        with safe_open(str(path), framework="numpy") as f:
            for key in f.keys():  # noqa: SIM118 - safe_open is not a mapping
                out[key] = f.get_tensor(key)
        return out
    except (SafetensorError, ValueError, TypeError, OSError) as exc:
        raise SubmissionRejected(shown, "safetensors format", f"cannot be parsed: {exc}") from None


def _check_zip(path: Path, shown: str, max_bytes: int) -> None:
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise SubmissionRejected(
            shown,
            "torch state dict format",
            f"is not a torch.save zip archive ({exc}); save with torch.save(state_dict, path)",
        ) from None
    total = 0
    for info in infos:
        if info.compress_type != zipfile.ZIP_STORED:
            raise SubmissionRejected(
                shown,
                "no compression",
                f"member {info.filename!r} is compressed; torch.save "
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
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SubmissionRejected(
            shown, "weights_only torch load", f"refused by the safe loader: {first[:300]}"
        ) from None
    if not isinstance(obj, dict):
        raise SubmissionRejected(
            shown, "state dict", f"holds a {type(obj).__name__}, not a dict of tensors"
        )
    out: dict[str, npt.NDArray[np.generic]] = {}
    for key, value in obj.items():
        if not isinstance(key, str):
            raise SubmissionRejected(shown, "state dict", f"has a non-string key {key!r:.80}")
        if not isinstance(value, torch.Tensor) or value.layout != torch.strided:
            raise SubmissionRejected(
                shown, "state dict", f"key {key!r} is a {type(value).__name__}, not a dense tensor"
            )
        if value.dtype not in (torch.float32, torch.float64):
            raise SubmissionRejected(
                shown, "tensor dtype", f"key {key!r} has dtype {value.dtype}; expected float32"
            )
        out[key] = value.detach().contiguous().numpy().copy()
    return out


def validate_tensors(
    tensors: dict[str, npt.NDArray[np.generic]], rules: list[TensorRule], shown: str
) -> Weights:
    """Exact key set, shapes, dtypes, finiteness; returns the arrays in the rules' dtypes."""
    expected = {r.key: r for r in rules}
    missing = [k for k in expected if k not in tensors]
    if missing:
        raise SubmissionRejected(
            shown, "required keys", f"missing key(s) {missing}; required: {list(expected)}"
        )
    extra = sorted(k for k in tensors if k not in expected)
    if extra:
        raise SubmissionRejected(
            shown, "no extra keys", f"unexpected key(s) {extra[:10]}; allowed: {list(expected)}"
        )
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
