"""How a job's weights reach the local executor's workers: once per worker, not per shard.

Passing the weights as a shard's argument pickled them into every shard's call: for the
0.5 MB pendulum MLP that was ~2.8 ms of CPU a two-shard job (pickle, pipe, unpickle),
5 µs a step of a random policy's 8-step episodes, more than the rest of the pipeline's
overhead (``benchmarks/vs_envpool.py``). Instead the evaluator writes the job's weights
once to a private file (safetensors, in a fresh ``0700`` directory of its own that lives
as long as the job) and sends each shard only a :class:`WeightsRef`: their digest and the
file. A worker keeps the last weights it read, by digest, and reads the file only for
weights it has not seen; each shard still gets its own copy, so a kind that writes into
its arrays cannot change the next shard's.

The digest is SHA-256 over every tensor's name, dtype, shape and bytes, so two jobs share
a worker's copy only when their weights are the same to the bit.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from safetensors.numpy import load_file, save_file

from ale_robotics.evaluator.execution.base import WorkerCrashed

__all__ = ["WeightsRef", "published", "resolve", "weights_digest"]

Weights = dict[str, npt.NDArray[np.floating]]


@dataclass(frozen=True)
class WeightsRef:
    """What a shard's call carries instead of the weights (a few hundred bytes)."""

    digest: str
    path: str


def weights_digest(weights: Weights) -> str:
    """SHA-256 of the tensors' names, dtypes, shapes and bytes, in name order."""
    h = hashlib.sha256()
    for key in sorted(weights):
        arr = np.ascontiguousarray(weights[key])
        h.update(f"{key}\0{arr.dtype.str}\0{arr.shape}\0".encode())
        h.update(arr.data)
    return h.hexdigest()


@contextlib.contextmanager
def published(weights: Weights) -> Iterator[WeightsRef]:
    """The weights in a private file for as long as the ``with`` block runs (one job).

    A temporary directory that cannot take them (full, read-only, missing) fails the job
    as the infrastructure's fault (:class:`~.base.WorkerCrashed`), saying what to fix."""
    try:
        folder = Path(tempfile.mkdtemp(prefix="ale-weights-"))  # 0700, this process's user
    except OSError as exc:
        raise _unwritable(exc) from None
    try:
        path = folder / "weights.safetensors"
        try:
            save_file({k: np.ascontiguousarray(v) for k, v in weights.items()}, str(path))
        except OSError as exc:
            raise _unwritable(exc) from None
        yield WeightsRef(weights_digest(weights), str(path))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _unwritable(exc: OSError) -> WorkerCrashed:
    return WorkerCrashed(
        "cannot hand the job's weights to the rollout workers: the evaluator's temporary "
        f"directory did not take them ({exc.strerror or type(exc).__name__}); free space "
        "there or point TMPDIR at a writable directory"
    )


_LAST: tuple[str, Weights] | None = None
"""In a worker: the digest and tensors of the last weights it read."""


def resolve(ref: WeightsRef) -> Weights:
    """In a worker: the weights ``ref`` names, a copy this shard may do with as it likes."""
    global _LAST
    if _LAST is None or _LAST[0] != ref.digest:
        _LAST = None  # a failed read must not leave the previous job's weights in its place
        tensors = load_file(ref.path)
        for arr in tensors.values():
            arr.flags.writeable = False
        _LAST = (ref.digest, tensors)
    return {key: arr.copy() for key, arr in _LAST[1].items()}
