"""numpy's BLAS kernel is named where results are compared and recorded."""

from __future__ import annotations

import subprocess
import sys

from ale_robotics.evaluator.blas import numpy_blas
from ale_robotics.evaluator.execution.base import stack_mismatch, stack_versions
from ale_robotics.evaluator.result import host_info


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
    code = "from ale_robotics.evaluator.blas import numpy_blas; print(numpy_blas())"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"OPENBLAS_CORETYPE": "Haswell", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    assert out[0] == "openblas" and out[2] == "Haswell"
