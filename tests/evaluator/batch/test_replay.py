"""Replay tasks: the npz is validated before anything trusts it, the hidden subset follows the
documented rule, and an open-loop replay reproduces a closed-loop plan bit for bit."""

from __future__ import annotations

import importlib.util
import io
import json
import sys
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from ale_robotics.evaluator.batch.pipeline import rollout_episodes, summarize
from ale_robotics.evaluator.execution.local import LocalExecutor
from ale_robotics.model.episode import EpisodeOutcome
from ale_robotics.model.snapshot import SnapshotFile
from ale_robotics.rollouts.replay import trajectories as replay
from ale_robotics.rollouts.replay.trajectories import (
    load_trajectories,
    replay_episodes,
    select_subset,
)
from ale_robotics.seeds import derive_seeds
from ale_robotics.submission.rejected import SubmissionRejected
from ale_robotics.tasks import FileFormat, TaskSpec, default_registry

TASK_ID = "fetch-pickplace-trajset-v1"
NAME = "trajectories.npz"
SECRET = bytes(range(32))
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def ftask() -> TaskSpec:
    return default_registry().get(TASK_ID)


def _config(**eval_update: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(default_registry().entry(TASK_ID).raw)
    doc["eval"].update(eval_update)
    return doc


def _small(n: int = 4, k: int = 2) -> TaskSpec:
    """The Fetch task cut to n instances (fast replays; same env and rules)."""
    doc = _config()
    doc["eval"].update(episodes=n, base_seeds=doc["eval"]["base_seeds"][:n], replay_subset=k)
    doc["contract"]["tensors"][0]["shape"] = [n]
    doc["contract"]["tensors"][1]["shape"][0] = n
    return TaskSpec.model_validate(doc)


def _agent() -> ModuleType:
    """The reference agent (examples/agents/fetch_scripted.py), for its controller."""
    name = "fetch_scripted_under_test"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, REPO / "examples" / "agents" / "fetch_scripted.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
    return sys.modules[name]


def _valid(task: TaskSpec) -> dict[str, np.ndarray]:
    n, t = task.eval.episodes, task.env.max_episode_steps
    rng = np.random.default_rng(0)
    return {
        "seeds": np.asarray(task.eval.base_seeds, dtype=np.int64),
        "actions": rng.uniform(-1, 1, size=(n, t, 4)).astype(np.float32),
    }


def _write(path: Path, arrays: dict[str, Any], compressed: bool = False) -> Path:
    with open(path, "wb") as fh:
        (np.savez_compressed if compressed else np.savez)(fh, **arrays)
    return path


def _load(task: TaskSpec, path: Path) -> dict[str, np.ndarray]:
    return load_trajectories([SnapshotFile("trajectories", NAME, FileFormat.NPZ, path, "")], task)


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _rejected(task: TaskSpec, path: Path, rule: str) -> SubmissionRejected:
    with pytest.raises(SubmissionRejected) as info:
        _load(task, path)
    exc = info.value
    assert (exc.file, exc.rule) == (NAME, rule), str(exc)
    assert str(exc).startswith(f"{NAME}: ") and str(exc).endswith(f"(rule: {rule})")
    return exc


# -------------------------------------------------------------- validation --


@pytest.mark.parametrize("compressed", [False, True], ids=["savez", "savez_compressed"])
def test_valid_file_loads_the_actions(tmp_path: Path, ftask: TaskSpec, compressed: bool) -> None:
    arrays = _valid(ftask)
    out = _load(ftask, _write(tmp_path / NAME, arrays, compressed))
    assert set(out) == {"actions"}
    assert out["actions"].dtype == np.float32 and out["actions"].flags.c_contiguous
    assert np.array_equal(out["actions"], arrays["actions"])


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda a: a.__setitem__(key, value)


def _poke(index: tuple[int, ...], value: float) -> Callable[[dict[str, Any]], None]:
    return lambda a: a["actions"].__setitem__(index, value)


def _bump_seed(a: dict[str, Any]) -> None:
    a["seeds"] = a["seeds"].copy()
    a["seeds"][7] += 1000


CASES: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    ("missing-key", lambda a: a.pop("seeds"), "required keys", "'seeds'"),
    ("extra-key", _set("observations", np.zeros(3, np.float32)), "no extra keys", "observations"),
    (
        "actions-float64",
        lambda a: a.__setitem__("actions", a["actions"].astype(np.float64)),
        "tensor dtype",
        "key 'actions' has dtype float64",
    ),
    (
        "seeds-int32",
        lambda a: a.__setitem__("seeds", a["seeds"].astype(np.int32)),
        "tensor dtype",
        "key 'seeds' has dtype int32",
    ),
    (
        "big-endian",
        lambda a: a.__setitem__("actions", a["actions"].astype(">f4")),
        "tensor dtype",
        "'>f4'",
    ),
    (
        "short-episodes",
        lambda a: a.__setitem__("actions", a["actions"][:, :49]),
        "tensor shape",
        "key 'actions' has shape [40, 49, 4]",
    ),
    (
        "missing-instance",
        lambda a: a.__setitem__("seeds", a["seeds"][:39]),
        "tensor shape",
        "key 'seeds' has shape [39]",
    ),
    (
        "seeds-reordered",
        lambda a: a.__setitem__("seeds", a["seeds"][::-1].copy()),
        "published instances",
        "at position 0: 9440 instead of 9401",
    ),
    ("seed-changed", _bump_seed, "published instances", "at position 7: 10408 instead of 9408"),
    ("above-bound", _poke((3, 12, 0), 1.5), "value bounds", "first 1.5 at index [3, 12, 0]"),
    (
        "below-bound",
        _poke((0, 0, 3), np.nextafter(np.float32(-1), np.float32(-2))),
        "value bounds",
        "outside [-1.0, 1.0]",
    ),
    ("nan", _poke((5, 1, 2), np.nan), "finite values", "first at index [5, 1, 2]"),
    ("inf", _poke((0, 49, 0), np.inf), "finite values", "key 'actions' contains NaN or inf"),
    (
        "pickled-object-array",
        lambda a: a.__setitem__("actions", a["actions"].astype(object)),
        "no pickle",
        "key 'actions' is an object array",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "rule", "needle"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_contract_violations_are_rejected_by_name(
    tmp_path: Path, ftask: TaskSpec, mutate: Callable[..., None], rule: str, needle: str
) -> None:
    arrays = _valid(ftask)
    mutate(arrays)
    exc = _rejected(ftask, _write(tmp_path / NAME, arrays), rule)
    assert needle in str(exc)


def test_exact_bounds_are_accepted(tmp_path: Path, ftask: TaskSpec) -> None:
    arrays = _valid(ftask)
    arrays["actions"][0, 0] = [-1.0, 1.0, -0.0, 1.0]
    assert _load(ftask, _write(tmp_path / NAME, arrays))["actions"][0, 0, 1] == 1.0


@pytest.fixture
def no_np_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rejections that must happen from the zip directory and npy headers alone."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("np.load reached: the archive was not refused up front")

    monkeypatch.setattr(replay.np, "load", refuse)


def _zip(path: Path, members: list[tuple[str, bytes, int]]) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about duplicate names
        with zipfile.ZipFile(path, "w") as zf:
            for name, data, method in members:
                zf.writestr(zipfile.ZipInfo(name), data, compress_type=method)
    return path


def test_zip_bomb_is_refused_from_the_directory(
    tmp_path: Path, ftask: TaskSpec, no_np_load: None
) -> None:
    seeds = _npy(_valid(ftask)["seeds"])
    bomb = b"\0" * (20 * 1024 * 1024)  # deflates to ~20 KB, well under the file size limit
    path = _zip(
        tmp_path / NAME,
        [("seeds.npy", seeds, zipfile.ZIP_STORED), ("actions.npy", bomb, zipfile.ZIP_DEFLATED)],
    )
    assert path.stat().st_size < 262144
    exc = _rejected(ftask, path, "size limit")
    assert "unpacks to" in str(exc) and "allows 262144" in str(exc)


def test_header_declaring_a_huge_array_is_refused_before_allocation(
    tmp_path: Path, ftask: TaskSpec, no_np_load: None
) -> None:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "<f4", "fortran_order": False, "shape": (10**12, 50, 4)}
    )
    huge = buf.getvalue() + b"\0" * 64
    seeds = _npy(_valid(ftask)["seeds"])
    path = _zip(
        tmp_path / NAME,
        [("seeds.npy", seeds, zipfile.ZIP_STORED), ("actions.npy", huge, zipfile.ZIP_STORED)],
    )
    exc = _rejected(ftask, path, "tensor shape")
    assert "[1000000000000, 50, 4]" in str(exc)


def test_object_array_is_refused_from_its_header(
    tmp_path: Path, ftask: TaskSpec, no_np_load: None
) -> None:
    arrays = _valid(ftask)
    arrays["actions"] = arrays["actions"].astype(object)
    _rejected(ftask, _write(tmp_path / NAME, arrays), "no pickle")


@pytest.mark.parametrize(
    ("members", "rule", "needle"),
    [
        (lambda s, a: [("seeds.npy", s, 0), ("actions.npy", a, 0), ("notes.txt", b"x", 0)],
         "npz format", "'notes.txt' is not a .npy array"),
        (lambda s, a: [("seeds.npy", s, 0), ("actions.npy", a, 0), ("seeds.npy", s, 0)],
         "npz format", "key 'seeds' appears twice"),
        (lambda s, a: [("seeds.npy", s, 0), ("actions.npy", a, zipfile.ZIP_BZIP2)],
         "npz compression", "compression method 12"),
        (lambda s, a: [(f"k{i}.npy", s, 0) for i in range(17)], "no extra keys", "17 members"),
        (lambda s, a: [("seeds.npy", s, 0), ("actions.npy", b"\x93NUMPY garbage", 0)],
         "npz format", "key 'actions' is not a valid .npy array"),
    ],
    ids=["foreign-member", "duplicate-member", "bzip2", "too-many-members", "bad-header"],
)  # fmt: skip
def test_malformed_archives_are_refused(
    tmp_path: Path, ftask: TaskSpec, no_np_load: None, members: Any, rule: str, needle: str
) -> None:
    arrays = _valid(ftask)
    path = _zip(tmp_path / NAME, members(_npy(arrays["seeds"]), _npy(arrays["actions"])))
    assert needle in str(_rejected(ftask, path, rule))


def test_not_a_zip_is_refused(tmp_path: Path, ftask: TaskSpec) -> None:
    path = tmp_path / NAME
    path.write_bytes(_npy(_valid(ftask)["actions"]))  # np.save instead of np.savez
    assert "numpy.savez" in str(_rejected(ftask, path, "npz format"))


def test_truncated_member_is_refused_when_read(tmp_path: Path, ftask: TaskSpec) -> None:
    arrays = _valid(ftask)
    short = _npy(arrays["actions"])[:500]  # a valid header, then too little data
    path = _zip(
        tmp_path / NAME,
        [("seeds.npy", _npy(arrays["seeds"]), 0), ("actions.npy", short, 0)],
    )
    assert "cannot be loaded" in str(_rejected(ftask, path, "npz format"))


# ------------------------------------------------------------------ subset --


def test_subset_is_the_k_smallest_hidden_values(ftask: TaskSpec) -> None:
    hidden = derive_seeds(ftask.eval.base_seeds, "run-a", SECRET)
    chosen = select_subset(ftask, hidden)
    k = ftask.eval.replay_subset
    assert k is not None and len(chosen) == k == 20
    by_value = sorted(range(len(hidden)), key=lambda i: hidden[i].value)
    assert [i for i, _ in chosen] == sorted(by_value[:k])
    assert all(instance == ftask.eval.base_seeds[i] for i, instance in chosen)
    assert select_subset(ftask, derive_seeds(ftask.eval.base_seeds, "run-a", SECRET)) == chosen


def test_subset_depends_on_run_and_secret(ftask: TaskSpec) -> None:
    base = ftask.eval.base_seeds
    subsets = {
        tuple(select_subset(ftask, derive_seeds(base, run, secret)))
        for run in ("run-a", "run-b", "run-c")
        for secret in (SECRET, bytes(32))
    }
    assert len(subsets) == 6  # C(40, 20) subsets: a collision here would be a bug
    first_k = tuple((i, base[i]) for i in range(20))
    assert first_k not in subsets


def test_subset_needs_a_replay_task_and_its_own_seeds(ftask: TaskSpec) -> None:
    other = default_registry().get("td3-inverted-pendulum-v1")
    with pytest.raises(ValueError, match="not a replay task"):
        select_subset(other, derive_seeds(other.eval.base_seeds, "r", SECRET))
    with pytest.raises(ValueError, match="base_seeds"):
        select_subset(ftask, derive_seeds(ftask.eval.base_seeds[:5], "r", SECRET))


# ------------------------------------------------------------------ replay --


@pytest.fixture(scope="module")
def small() -> TaskSpec:
    return _small()


@pytest.fixture(scope="module")
def plans(small: TaskSpec) -> tuple[np.ndarray, list[bool]]:
    _, actions, solved = _agent().solve(small)
    return actions, solved


def _pairs(task: TaskSpec) -> list[tuple[int, int]]:
    return list(enumerate(task.eval.base_seeds))


def test_scripted_plans_replay_solved_and_zero_actions_do_not(
    small: TaskSpec, plans: tuple[np.ndarray, list[bool]]
) -> None:
    actions, solved = plans
    assert all(solved)
    out = replay_episodes(small, actions, _pairs(small))
    assert [o.index for o in out] == [0, 1, 2, 3]
    assert all(o.success for o in out) and all(o.length == 50 for o in out)
    assert all(o.final_distance is not None and o.final_distance < 0.05 for o in out)
    idle = replay_episodes(small, np.zeros_like(actions), _pairs(small))
    assert not any(o.success for o in idle)
    assert all(o.final_distance is not None and o.final_distance >= 0.05 for o in idle)


def test_replay_is_bitwise_deterministic_on_fresh_and_reused_envs(
    small: TaskSpec, plans: tuple[np.ndarray, list[bool]]
) -> None:
    actions, _ = plans
    fresh = []
    for pair in _pairs(small):
        replay._ENVS.clear()  # a new env for every episode
        fresh.extend(replay_episodes(small, actions, [pair]))
    reused = replay_episodes(small, actions, _pairs(small)[::-1])[::-1]  # one env, other order
    assert fresh == reused  # same returns, distances, success, to the last bit


def test_rows_are_matched_to_their_instance(
    small: TaskSpec, plans: tuple[np.ndarray, list[bool]]
) -> None:
    """Row i is replayed on instance i only: a plan on the wrong instance fails."""
    actions, _ = plans
    swapped = [(0, small.eval.base_seeds[1]), (1, small.eval.base_seeds[0])]
    assert not any(o.success for o in replay_episodes(small, actions, swapped))


def test_pipeline_dispatches_replay_and_summarizes_success(
    small: TaskSpec, plans: tuple[np.ndarray, list[bool]]
) -> None:
    actions, _ = plans
    mixed = actions.copy()
    mixed[2] = 0.0  # instance 2 left unsolved
    seen: list[EpisodeOutcome] = []
    out = rollout_episodes(small, {"actions": mixed}, [(1, 9402), (2, 9403)], seen.append)
    assert [(o.index, o.success) for o in out] == [(1, True), (2, False)] and seen == out
    metrics = summarize(out)
    assert metrics["success_rate"] == 0.5
    assert metrics["mean_final_distance"] == pytest.approx(np.mean([o.final_distance for o in out]))
    assert "success_rate" not in summarize([EpisodeOutcome(0, 1.0, 10, True)])


def test_pool_keeps_the_subset_indices(
    small: TaskSpec, plans: tuple[np.ndarray, list[bool]]
) -> None:
    actions, _ = plans
    pool = LocalExecutor(1)
    try:
        out = pool.run(small, {"actions": actions}, [9404, 9402], indices=[3, 1])
    finally:
        pool.shutdown()
    assert [o.index for o in out] == [1, 3]
    assert out == replay_episodes(small, actions, [(1, 9402), (3, 9404)])


# -------------------------------------------------------------------- spec --


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (lambda d: d["eval"].pop("replay_subset"), "replay_subset is None"),
        (lambda d: d["eval"].update(replay_subset=41), "replay_subset <= eval.episodes"),
        (lambda d: d["contract"]["tensors"][1].update(shape=[40, 49, 4]), "replay contract"),
        (lambda d: d["contract"]["tensors"][0].update(dtype="float64"), "replay contract"),
        (lambda d: d["contract"]["tensors"].pop(0), "replay contract"),
        (lambda d: d["contract"]["files"][0].update(role="policy"), "'trajectories' file"),
    ],
    ids=["no-subset", "subset-too-big", "wrong-horizon", "float-seeds", "no-seeds", "no-role"],
)
def test_inconsistent_replay_configs_are_refused(change: Any, needle: str) -> None:
    doc = _config()
    change(doc)
    with pytest.raises(ValueError, match=needle):
        TaskSpec.model_validate(doc)


def test_replay_settings_are_refused_on_policy_tasks() -> None:
    doc = json.loads(default_registry().entry("td3-inverted-pendulum-v1").raw)
    doc["eval"]["replay_subset"] = 3
    with pytest.raises(ValueError, match=r"applies only to eval\.backend 'replay'"):
        TaskSpec.model_validate(doc)
    doc["eval"].pop("replay_subset")
    doc["contract"]["tensors"][0]["low"] = -1.0
    with pytest.raises(ValueError, match="bounds"):
        TaskSpec.model_validate(doc)


def test_published_instances_and_subset_size(ftask: TaskSpec) -> None:
    assert ftask.eval.episodes == len(ftask.eval.base_seeds) == 40
    assert ftask.eval.evaluated_episodes == ftask.eval.replay_subset == 20
    assert default_registry().get("td3-inverted-pendulum-v1").eval.evaluated_episodes == 10
