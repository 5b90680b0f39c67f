"""Which BLAS library numpy computes with, and which CPU kernel it picked: a fact of the
host that decides the last bits of a policy's actions."""

from __future__ import annotations

import functools

__all__ = ["numpy_blas"]


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
