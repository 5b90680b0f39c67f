"""numpy's BLAS kernel is named where results are compared and recorded."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ale_robotics.evaluator.execution.base import stack_mismatch, stack_versions
from ale_robotics.evaluator.execution.blas import numpy_blas
from ale_robotics.evaluator.results.builder import host_info


def test_the_kernel_numpy_picked_is_named() -> None:
    api, version, kernel = numpy_blas().split()
    assert api == "openblas" and version[0].isdigit() and kernel not in ("?", "unknown")
    assert stack_versions()["numpy-blas"] == numpy_blas()
    assert host_info().blas == numpy_blas()  # every EvalResult records it


def test_another_kernel_is_a_stack_mismatch() -> None:
    assert stack_mismatch(stack_versions()) is None
    other = {**stack_versions(), "numpy-blas": "openblas 0.0 Prescott"}
    message = stack_mismatch(other)
    assert message is not None and "numpy-blas" in message and "OPENBLAS_CORETYPE" in message


def test_a_forced_kernel_is_what_is_named() -> None:
    """OPENBLAS_CORETYPE picks the kernel: the name follows it (the reading is not a guess)."""
    code = "from ale_robotics.evaluator.execution.blas import numpy_blas; print(numpy_blas())"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"OPENBLAS_CORETYPE": "Haswell", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    assert out[0] == "openblas" and out[2] == "Haswell"


def test_rollout_workers_use_the_pinned_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every local worker computes with one OpenBLAS kernel, whatever this CPU would pick,
    so workers on different x86-64 hosts agree to the bit (and the closed loop is faster
    here: see worker_blas_env)."""
    from ale_robotics.evaluator.execution import LocalExecutor
    from ale_robotics.evaluator.execution.base import WorkerLimits
    from ale_robotics.evaluator.execution.blas import PINNED_KERNEL

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    probe = "from ale_robotics.evaluator.execution.blas import worker_blas_env as w; print(w())"
    wanted = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    if wanted == "{}":
        pytest.skip("no AVX2/FMA here: nothing is pinned")
    assert wanted == str({"OPENBLAS_CORETYPE": PINNED_KERNEL})
    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)  # conftest pins this process's
    ex = LocalExecutor(1, WorkerLimits(isolate_network=False))
    try:
        assert ex.run_in_worker(numpy_blas).split()[2] == PINNED_KERNEL
    finally:
        ex.shutdown()
    # an operator's choice wins: nothing is pinned over it
    chosen = subprocess.run(
        [sys.executable, "-c", probe],
        env={**env, "OPENBLAS_CORETYPE": "SkylakeX"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert chosen == "{}"
