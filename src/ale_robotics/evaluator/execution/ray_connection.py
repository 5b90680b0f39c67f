"""This process's connection to Ray: joining a cluster or starting a local instance,
with the process's signal handlers kept and a clear error when Ray cannot be reached.

Used by the Ray driver process (:mod:`.ray_driver`), never by the evaluator's own: the
driver connects here and runs shards with :mod:`.ray_shards`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
from collections.abc import Iterator
from typing import Any

from ale_robotics.evaluator.execution.base import (
    ExecutorUnavailable,
)
from ale_robotics.evaluator.execution.blas import worker_blas_env

try:
    import ray
    from ray.exceptions import RayError
except ImportError as exc:  # pragma: no cover - ray is a dependency; a trimmed install
    raise ExecutorUnavailable(
        "the ray executor needs Ray: pip install 'ray==2.60.0' "
        "(or install ale-robotics with its dependencies), or use --executor local"
    ) from exc

__all__ = [
    "THREAD_ENV",
    "check_reachable",
    "connect",
    "disconnect",
]

log = logging.getLogger(__name__)

_CONNECT_TIMEOUT_S = 10.0
THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    **worker_blas_env(),
    **{k: v for k, v in os.environ.items() if k == "OPENBLAS_CORETYPE"},
}
"""One BLAS thread per worker, as the local executor's (threads fight MuJoCo), and the same
OpenBLAS kernel (decided by the driver's CPU: every node must have AVX2 and FMA then, as
every x86-64 server CPU since 2013 has; a node that picks another kernel is refused by the
stack check, see :func:`.base.stack_mismatch`), or the operator's ``OPENBLAS_CORETYPE``
(the driver is started with the workers' kernel, :mod:`.ray_process`)."""


class _Connection:
    """This process's one Ray connection (Ray allows one), shared by its executors.

    ``owned``: this module called ``ray.init`` (the last executor out shuts Ray down);
    otherwise the process had connected already and keeps its connection.
    ``pinned``: the job's runtime env sets one BLAS thread (else each task's does).
    """

    lock = threading.Lock()
    users = 0
    owned = False
    pinned = False
    address: str | None = None


def check_reachable(address: str) -> None:
    """Fail fast on a ``host:port`` that does not answer (``ray.init`` retries for minutes)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return  # 'auto', or a form Ray resolves itself
    try:
        with socket.create_connection((host.strip("[]"), int(port)), _CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        raise ExecutorUnavailable(
            f"cannot reach the Ray cluster at {address} ({exc.strerror or exc}): start its "
            "head with 'ray start --head', or check --ray-address"
        ) from None


def connect(address: str | None, num_cpus: int, object_store_bytes: int) -> bool:
    """Join this process's Ray connection (starting or connecting it); returns ``pinned``."""
    with _Connection.lock:
        if _Connection.users > 0:
            if _Connection.owned and _Connection.address != address:
                have = _Connection.address or "a local instance"
                raise ExecutorUnavailable(
                    f"this process is connected to Ray at {have}, not "
                    f"{address or 'a local instance'}: one Ray connection per process"
                )
            _Connection.users += 1
            return _Connection.pinned
        if ray.is_initialized():  # the embedding program connected on its own
            _Connection.owned, _Connection.pinned = False, False
        else:
            try:
                with _own_signal_handlers():
                    _init(address, num_cpus, object_store_bytes)
            except (ConnectionError, RuntimeError, ValueError, OSError, RayError) as exc:
                raise ExecutorUnavailable(_init_failed(address, exc)) from None
            _Connection.owned, _Connection.pinned = True, True
        _Connection.address = address
        _Connection.users = 1
        return _Connection.pinned


def _init_failed(address: str | None, exc: Exception) -> str:
    if address is None:
        return f"cannot start a local Ray instance: {exc}"
    hint = ""
    if "RAY_AUTH_MODE" not in os.environ:
        hint = (
            " (a cluster with token authentication needs RAY_AUTH_MODE=token here too, and "
            "its token in ~/.ray/auth_token or RAY_AUTH_TOKEN)"
        )
    return f"cannot connect to the Ray cluster at {address}: {exc}{hint}"


def _init(address: str | None, num_cpus: int, object_store_bytes: int) -> None:
    # Ray would send usage statistics to the internet; a local instance's processes
    # inherit this environment.
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    common: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "configure_logging": False,
        "runtime_env": {"env_vars": dict(THREAD_ENV)},
    }
    if address is None:
        ray.init(
            address="local", num_cpus=num_cpus, object_store_memory=object_store_bytes, **common
        )
    else:
        check_reachable(address)
        ray.init(address=address, **common)


@contextlib.contextmanager
def _own_signal_handlers() -> Iterator[None]:
    """Keep this process's SIGINT and SIGTERM handlers across ``ray.init``, which
    replaces SIGTERM's with one that exits: the evaluator (``evaluator serve``, the
    harness) stops on its own terms, and its shutdown stops Ray."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread sets handlers; Ray's then leaves them alone too
        return
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)


def disconnect() -> None:
    with _Connection.lock:
        _Connection.users -= 1
        if _Connection.users == 0 and _Connection.owned:
            ray.shutdown()
            _Connection.owned = False
