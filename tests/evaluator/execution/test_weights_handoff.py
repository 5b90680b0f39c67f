"""The local executor's weights handoff: a digest, a private file per job, a worker's copy."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

from ale_robotics.evaluator.execution import LocalExecutor, WorkerCrashed
from ale_robotics.evaluator.execution import weights_handoff as handoff
from ale_robotics.tasks import default_registry


def _weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "l0.weight": rng.standard_normal((8, 4)).astype(np.float32),
        "l0.bias": rng.standard_normal(8).astype(np.float32),
    }


@pytest.fixture(autouse=True)
def _fresh_worker_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handoff, "_LAST", None)


def test_the_digest_tells_apart_any_bit_name_dtype_or_shape() -> None:
    w = _weights()
    d = handoff.weights_digest(w)
    assert handoff.weights_digest(_weights()) == d  # equal content, other arrays
    assert handoff.weights_digest(dict(reversed(list(w.items())))) == d  # order of the keys
    bit = {k: v.copy() for k, v in w.items()}
    bit["l0.bias"].view(np.uint32)[3] ^= 1
    renamed = {"l0.weight": w["l0.weight"], "l1.bias": w["l0.bias"]}
    wider = {**w, "l0.bias": w["l0.bias"].astype(np.float64)}
    reshaped = {**w, "l0.weight": w["l0.weight"].reshape(4, 8)}
    non_contiguous = {**w, "l0.weight": np.asfortranarray(w["l0.weight"])}
    others = [handoff.weights_digest(x) for x in (bit, renamed, wider, reshaped)]
    assert len({d, *others}) == 5
    assert handoff.weights_digest(non_contiguous) == d  # the same values in another layout


def test_the_file_is_private_and_lives_as_long_as_the_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(handoff.tempfile, "tempdir", None)  # re-read TMPDIR
    with handoff.published(_weights()) as ref:
        folder = Path(ref.path).parent
        assert folder.parent == tmp_path
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert ref.digest == handoff.weights_digest(_weights())
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError), handoff.published(_weights()):
        raise RuntimeError("the job failed")
    assert list(tmp_path.iterdir()) == []  # removed after a failed job too


def test_a_worker_reads_the_file_once_per_weights_and_hands_each_shard_a_copy() -> None:
    w = _weights()
    with handoff.published(w) as ref:
        first = handoff.resolve(ref)
    assert not os.path.exists(ref.path)
    second = handoff.resolve(ref)  # the same digest: the worker's own copy, no file read
    for key, value in w.items():
        assert np.array_equal(first[key], value) and first[key].dtype == value.dtype
        assert np.array_equal(second[key], value)
    first["l0.bias"][:] = 0  # a kind writing into its arrays changes nothing for the next
    assert np.array_equal(handoff.resolve(ref)["l0.bias"], w["l0.bias"])


def test_new_weights_are_read_and_a_failed_read_keeps_nothing_of_the_last() -> None:
    with handoff.published(_weights(0)) as a:
        handoff.resolve(a)
    with handoff.published(_weights(1)) as b:
        got = handoff.resolve(b)
    assert np.array_equal(got["l0.weight"], _weights(1)["l0.weight"])
    missing = handoff.WeightsRef("0" * 64, str(b.path))  # a digest it has not seen, file gone
    with pytest.raises(FileNotFoundError):
        handoff.resolve(missing)
    with pytest.raises(FileNotFoundError):  # b's copy was dropped with the failed read
        handoff.resolve(b)


def test_a_temporary_directory_that_cannot_take_the_weights_fails_the_job_as_infrastructure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handoff.tempfile, "tempdir", str(tmp_path / "missing"))
    missing = r"temporary directory .*No such file.* TMPDIR"
    with pytest.raises(WorkerCrashed, match=missing), handoff.published(_weights()):
        pass
    task = default_registry().get("td3-inverted-pendulum-v2")
    assert task.contract is not None
    weights = {r.key: np.zeros(r.shape, dtype=r.dtype) for r in task.contract.tensors}
    executor = LocalExecutor(1)
    try:
        with pytest.raises(WorkerCrashed, match="TMPDIR"):
            executor.run(task, weights, [1, 2])
        monkeypatch.setattr(handoff.tempfile, "tempdir", None)
        assert len(executor.run(task, weights, [1, 2])) == 2  # the executor still works
    finally:
        executor.shutdown()
