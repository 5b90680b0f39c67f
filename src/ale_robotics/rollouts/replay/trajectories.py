"""Replay tasks: validate a submitted trajectory set, pick the hidden subset, replay it open-loop.

A replay task (``eval.backend = "replay"``) has no policy. Its config publishes
N problem instances (``eval.base_seeds``, used as Gymnasium reset seeds), and
the agent submits one npz file holding ``seeds`` int64 (N,), the instances in
order, and ``actions`` float32 (N, T, A). The evaluator replays only
``eval.replay_subset`` = k of them, open-loop: ``env.reset(seed=instance)``,
then the T actions, success read from ``info["is_success"]`` at the last step.

**Which instances count.** :func:`select_subset` takes the k instances whose
hidden values ``derive_seeds(base_seeds, run_id, secret)`` are smallest. The
agent does not know the secret, so it cannot tell which instances will be
replayed and must solve all of them; the commitments to all N values are in
the run's ``seed_commitment`` event, so once the secret is revealed anyone can
recompute the subset. The hidden value only selects; the reset seed is the
public instance, which is what makes an open-loop plan meaningful at all.

**Reading the npz.** The file was written by an untrusted agent, so nothing in
it is trusted until checked, in this order: the zip directory (only stored or
deflated ``<key>.npy`` members, no duplicates, and the declared uncompressed
total within the contract's size limit, because ``np.load`` inflates members
and a zip bomb is a few kilobytes), the exact key set, then every member's npy
header (dtype and shape must already be the contract's, because numpy
allocates the array the header describes *before* reading its data: a 100-byte
member can declare a terabyte), and only then ``np.load(allow_pickle=False)``,
followed by finiteness, the contract's bounds and the published instances.
Each violation raises :class:`SubmissionRejected` naming the file, the key and
the rule; only ``MemoryError`` is left to the caller (an infrastructure
failure).

**The environment** is built from ``env.gym_id`` by
:func:`ale_robotics.envs.make.make_env`; the Fetch task spells it
``gymnasium_robotics:FetchPickAndPlace-v4``, Gymnasium's "module:id" form, so
that every env the evaluator makes of it (this module, GetSpec, any audit)
imports ``gymnasium_robotics`` first, which registers its envs (what
``gymnasium.register_envs(gymnasium_robotics)`` does by hand).

The kind that uses all this, :class:`~.kind.ReplayKind`, is in :mod:`.kind`.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from numpy.lib import format as npy_format

from ale_robotics.envs.make import make_env
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.model.snapshot import SnapshotFile
from ale_robotics.seeds import HiddenSeed
from ale_robotics.submission.mismatch import check_key_set
from ale_robotics.submission.rejected import SubmissionRejected
from ale_robotics.tasks.contract import FileFormat, TensorRule
from ale_robotics.tasks.spec import TaskSpec

__all__ = [
    "ACTIONS_KEY",
    "SEEDS_KEY",
    "TRAJECTORIES_ROLE",
    "load_trajectories",
    "replay_episodes",
    "select_subset",
]

TRAJECTORIES_ROLE = "trajectories"
"""Contract role of the npz file (:meth:`.kind.ReplayKind.check_task` checks a replay
contract has it)."""
SEEDS_KEY = "seeds"
ACTIONS_KEY = "actions"

_MAX_MEMBERS = 16
"""More members than any replay contract names; refused before looking at them."""
_MAX_HEADER = 10_000
"""Longest npy header read (numpy's own default for ``max_header_size``)."""
_ALLOWED_COMPRESSION = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflated"}


def _shown(text: object) -> str:
    """An agent-chosen name as shown in messages: ``repr``, at most 80 characters."""
    out = repr(text)
    return out if len(out) <= 80 else out[:77] + "..."


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]


def _expected_dtype(rule: TensorRule) -> np.dtype[Any]:
    """The contract dtype, little-endian: a big-endian float32 has the same ``name``."""
    return np.dtype(rule.dtype).newbyteorder("<")


# --------------------------------------------------------------- validation --


def _members(path: Path, shown: str, rules: dict[str, TensorRule], max_bytes: int) -> None:
    """Check the zip directory and every npy header before numpy inflates or allocates."""
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            if len(infos) > _MAX_MEMBERS:
                raise SubmissionRejected(
                    shown, "no extra keys", f"holds {len(infos)} members; at most {_MAX_MEMBERS}"
                )
            keys: dict[str, zipfile.ZipInfo] = {}
            total = 0
            for info in infos:
                if not info.filename.endswith(".npy"):
                    raise SubmissionRejected(
                        shown,
                        "npz format",
                        f"member {_shown(info.filename)} is not a .npy array; "
                        "write the file with numpy.savez",
                    )
                key = info.filename[: -len(".npy")]
                if key in keys:
                    raise SubmissionRejected(
                        shown, "npz format", f"key {_shown(key)} appears twice in the archive"
                    )
                if info.compress_type not in _ALLOWED_COMPRESSION:
                    raise SubmissionRejected(
                        shown,
                        "npz compression",
                        f"key {_shown(key)} uses zip compression method {info.compress_type}; "
                        "numpy.savez stores and numpy.savez_compressed deflates, "
                        "nothing else is read",
                    )
                if info.flag_bits & 0x1:
                    raise SubmissionRejected(shown, "npz format", f"key {_shown(key)} is encrypted")
                keys[key] = info
                total += info.file_size
            if total > max_bytes:
                raise SubmissionRejected(
                    shown,
                    "size limit",
                    f"unpacks to {total} bytes; the contract allows {max_bytes}",
                )
            _check_key_set(keys, rules, shown)
            for key, info in keys.items():
                with zf.open(info) as fh:
                    _check_header(fh, key, rules[key], shown)
    except SubmissionRejected:
        raise
    except MemoryError:
        raise
    except Exception as exc:
        # BadZipFile, a truncated member, a zlib error: the file's fault, whatever it is.
        raise SubmissionRejected(
            shown,
            "npz format",
            f"is not a readable npz (zip) archive ({_first_line(exc)}); write it with "
            "numpy.savez(path, seeds=..., actions=...)",
        ) from None


def _check_key_set(keys: dict[str, Any], rules: dict[str, TensorRule], shown: str) -> None:
    check_key_set(keys.keys(), list(rules), shown)  # missing and unexpected, together


def _check_header(fh: Any, key: str, rule: TensorRule, shown: str) -> None:
    """Dtype and shape from the npy header alone: no array is allocated yet."""
    try:
        version = npy_format.read_magic(fh)
        if version == (1, 0):
            shape, _fortran, dtype = npy_format.read_array_header_1_0(
                fh, max_header_size=_MAX_HEADER
            )
        elif version == (2, 0):
            shape, _fortran, dtype = npy_format.read_array_header_2_0(
                fh, max_header_size=_MAX_HEADER
            )
        else:
            raise ValueError(f"npy format version {version} is not read; use numpy.savez")
    except MemoryError:
        raise
    except Exception as exc:
        raise SubmissionRejected(
            shown, "npz format", f"key {key!r} is not a valid .npy array: {_first_line(exc)}"
        ) from None
    _check_dtype_shape(np.dtype(dtype), tuple(shape), key, rule, shown)


def _check_dtype_shape(
    dtype: np.dtype[Any], shape: tuple[int, ...], key: str, rule: TensorRule, shown: str
) -> None:
    if dtype.hasobject:
        raise SubmissionRejected(
            shown,
            "no pickle",
            f"key {key!r} is an object array (pickled Python objects), which is never "
            f"loaded; the contract requires {rule.dtype}",
        )
    if list(shape) != rule.shape:
        raise SubmissionRejected(
            shown,
            "tensor shape",
            f"key {key!r} has shape {list(shape)}; the contract requires {rule.shape}",
        )
    want = _expected_dtype(rule)
    if dtype.str != want.str:
        raise SubmissionRejected(
            shown,
            "tensor dtype",
            f"key {key!r} has dtype {dtype.name} ({dtype.str!r}); expected {rule.dtype} "
            f"({want.str!r})",
        )


def _check_values(arr: npt.NDArray[Any], key: str, rule: TensorRule, shown: str) -> None:
    finite = np.isfinite(arr)
    if not finite.all():
        where = [int(i) for i in np.argwhere(~finite)[0]]
        raise SubmissionRejected(
            shown, "finite values", f"key {key!r} contains NaN or inf (first at index {where})"
        )
    low = -np.inf if rule.low is None else rule.low
    high = np.inf if rule.high is None else rule.high
    outside = (arr < low) | (arr > high)
    if outside.any():
        first = tuple(int(i) for i in np.argwhere(outside)[0])
        raise SubmissionRejected(
            shown,
            "value bounds",
            f"key {key!r} has {int(outside.sum())} value(s) outside [{rule.low}, {rule.high}], "
            f"first {float(arr[first])!r} at index {list(first)}",
        )


def load_trajectories(
    files: list[SnapshotFile], task: TaskSpec
) -> dict[str, npt.NDArray[np.floating]]:
    """Validate the frozen npz of a replay task; returns ``{"actions": float32 (N, T, A)}``.

    The ``seeds`` array is checked (it must equal the published instances, in
    order, so that row i is unambiguously the plan for instance i) but not
    returned: the instances come from the task config, never from the file.
    """
    assert task.contract is not None
    f = next((x for x in files if x.role == TRAJECTORIES_ROLE), None)
    if f is None:
        raise SubmissionRejected(
            TRAJECTORIES_ROLE, "required file", "no trajectories file in the submission"
        )
    if f.format is not FileFormat.NPZ:
        raise SubmissionRejected(f.name, "format", f"{f.format} is not the npz format")
    max_bytes = task.contract.file_for_role(TRAJECTORIES_ROLE).max_bytes
    rules = {t.key: t for t in task.contract.tensors}
    _members(f.path, f.name, rules, max_bytes)
    arrays: dict[str, npt.NDArray[Any]] = {}
    try:
        with np.load(f.path, allow_pickle=False, max_header_size=_MAX_HEADER) as npz:
            for key in rules:
                arrays[key] = np.asarray(npz[key])
    except MemoryError:
        raise
    except Exception as exc:
        # a member shorter than its header says, a bad CRC: caught only now, while reading
        raise SubmissionRejected(
            f.name, "npz format", f"cannot be loaded: {_first_line(exc)}"
        ) from None
    for key, rule in rules.items():
        arr = arrays[key]
        _check_dtype_shape(arr.dtype, arr.shape, key, rule, f.name)  # what was actually read
        _check_values(arr, key, rule, f.name)
    published = np.asarray(task.eval.base_seeds, dtype=np.int64)
    seeds = arrays[SEEDS_KEY]
    if not np.array_equal(seeds, published):
        pos = int(np.flatnonzero(seeds != published)[0])
        raise SubmissionRejected(
            f.name,
            "published instances",
            f"key 'seeds' differs from the published instances (eval.base_seeds) at position "
            f"{pos}: {int(seeds[pos])} instead of {int(published[pos])}; write one row per "
            "published instance, in the published order",
        )
    return {ACTIONS_KEY: np.ascontiguousarray(arrays[ACTIONS_KEY], dtype=np.float32)}


# ------------------------------------------------------------------ subset --


def select_subset(task: TaskSpec, hidden: Sequence[HiddenSeed]) -> list[tuple[int, int]]:
    """``(index, instance)`` of the instances this run replays, in index order.

    ``hidden`` is ``derive_seeds(task.eval.base_seeds, run_id, secret)``; the k
    instances with the smallest hidden values are chosen (ties, which need a
    64-bit collision, go to the lower index). The values never leave the
    evaluator, only the instances' positions do (in the result's episodes).
    """
    base = task.eval.base_seeds
    k = task.eval.replay_subset
    if k is None:  # only a replay task may set it (the task model refuses it elsewhere)
        raise ValueError(f"task {task.id} is not a replay task")
    if [h.index for h in hidden] != list(range(len(base))):
        raise ValueError("hidden seeds must be derived from the task's base_seeds, in order")
    chosen = sorted(hidden, key=lambda h: (h.value, h.index))[:k]
    return sorted((h.index, base[h.index]) for h in chosen)


# ------------------------------------------------------------------ replay --

_ENVS: dict[str, Any] = {}


def _env(task: TaskSpec) -> Any:
    """One env per process and env config, reused: ``reset(seed=...)`` restores it exactly
    (Fetch's reset calls ``mj_resetData``; tests/evaluator/batch/test_replay.py checks a reused
    env replays bit for bit like a fresh one)."""
    key = task.env.model_dump_json()
    if key not in _ENVS:
        _ENVS[key] = make_env(task.env)
    return _ENVS[key]


def replay_episodes(
    task: TaskSpec,
    actions: npt.NDArray[np.floating],
    episodes: Sequence[tuple[int, int]],
    on_episode: Callable[[EpisodeOutcome], None] | None = None,
) -> list[EpisodeOutcome]:
    """Replay row ``index`` of ``actions`` from ``env.reset(seed=instance)``, per pair.

    Open-loop: observations are never used to choose an action. Success is the
    env's ``info["is_success"]`` after the last step (the HER protocol: where the
    block is when the episode ends, not whether it passed the goal on the way).
    """
    env = _env(task)
    out: list[EpisodeOutcome] = []
    for index, instance in episodes:
        obs, _ = env.reset(seed=int(instance))
        ret, length, terminated = 0.0, 0, False
        info: dict[str, Any] = {}
        for t in range(actions.shape[1]):
            obs, reward, term, trunc, info = env.step(actions[index, t])
            ret += float(reward)
            length += 1
            if term or trunc:
                terminated = bool(term)
                break
        if "is_success" not in info:
            raise RuntimeError(f"{task.env.gym_id} reports no info['is_success']")
        distance = float(
            np.linalg.norm(np.asarray(obs["achieved_goal"]) - np.asarray(obs["desired_goal"]))
        )
        outcome = EpisodeOutcome(
            index,
            ret,
            length,
            terminated,
            success=bool(info["is_success"]),
            final_distance=distance,
        )
        out.append(outcome)
        if on_episode is not None:
            on_episode(outcome)
    return out
