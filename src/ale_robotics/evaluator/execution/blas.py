"""Which BLAS library numpy computes with, and which CPU kernel it picked: a fact of the
host that decides the last bits of a policy's actions."""

from __future__ import annotations

import functools

__all__ = ["PINNED_KERNEL", "numpy_blas", "worker_blas_env"]


@functools.cache
def numpy_blas() -> str:
    """numpy's BLAS library, its version and the CPU kernel it picked at load, e.g.
    ``openblas 0.3.31 SkylakeX``.

    OpenBLAS chooses its kernels for the CPU it runs on (``DYNAMIC_ARCH``), and kernels
    for different CPUs sum a matrix product in different orders: the policy's actions,
    and so the returns, differ in their last bits between, say, an AVX-512 and an AVX2
    host (measured here: up to 1.6e-7 on an MLP's actions). Two workers agree to the
    bit only if this string agrees, so it is part of the stack a shard checks.
    """
    import numpy  # noqa: F401  (loads the library threadpoolctl inspects)
    from threadpoolctl import threadpool_info

    found = [
        f"{i.get('internal_api', '?')} {i.get('version') or '?'} {i.get('architecture') or '?'}"
        for i in threadpool_info()
        if i.get("user_api") == "blas" and "numpy" in str(i.get("filepath", ""))
    ]
    return found[0] if found else "unknown"


PINNED_KERNEL = "Haswell"
"""The OpenBLAS kernel rollout workers use on x86-64: AVX2 with FMA, which every x86-64
server CPU since 2013 has (Intel Haswell, AMD Zen)."""


def worker_blas_env() -> dict[str, str]:
    """Environment for a rollout worker's start: one OpenBLAS kernel on every host.

    Left to itself, OpenBLAS picks the kernel of the CPU it runs on, so the same policy
    gives actions that differ in their last bits on an AVX-512 and an AVX2 host; with
    one kernel everywhere, workers on different x86-64 CPUs agree to the bit. The AVX2
    kernel is also the faster one in a closed loop on this project's AVX-512 Xeon: alone,
    its matrix products are ~5% slower, but alternating with MuJoCo's physics each
    control step costs less (measured in-process on one core, the pendulum's 32-env
    control step: 368 us against 383 us, medians of 3 alternated pairs). Nothing is
    pinned where the CPU lacks AVX2 or FMA, or where the operator has chosen a kernel
    (``OPENBLAS_CORETYPE`` set).
    """
    import os
    import platform

    if "OPENBLAS_CORETYPE" in os.environ or platform.machine() not in ("x86_64", "AMD64"):
        return {}
    return {"OPENBLAS_CORETYPE": PINNED_KERNEL} if _cpu_has("avx2", "fma") else {}


@functools.cache
def _cpu_has(*flags: str) -> bool:
    """Whether the kernel lists every one of ``flags`` for this CPU (Linux's cpuinfo;
    False where there is none to read)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    return all(flag in have for flag in flags)
    except OSError:
        pass
    return False
